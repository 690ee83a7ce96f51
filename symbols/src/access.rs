//! Whose rights the binaries a trace names are opened with.
//!
//! A trace names binaries by path (MAPPING records), and a trace belongs to
//! the user who was traced, who can write it. Root reading such a trace
//! (`sudo jtrace report`) must not open a file that user names with root's
//! rights (docs/ARCHITECTURE.md invariant 6): the paths are opened with the
//! rights of the trace directory's owner, on a thread of its own that takes
//! that identity, so the user's trace can only make jtrace read what the
//! user could read anyway.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rustix::process::{Gid, Uid};
use rustix::thread::{set_thread_groups, set_thread_res_gid, set_thread_res_uid};

/// The rights binaries are opened with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryAccess {
    /// This process's own.
    Own,
    /// Another user's (effective user and group, no supplementary groups).
    As {
        /// User id.
        uid: u32,
        /// Group id.
        gid: u32,
    },
}

impl BinaryAccess {
    /// For the trace in `dir`: when this process runs as root and `dir` belongs
    /// to another user, that user's rights (its owner's group, no
    /// supplementary groups); otherwise this process's own. A directory that
    /// cannot be inspected gets nobody's rights: uid and gid 65534.
    pub fn for_trace(dir: &Path) -> BinaryAccess {
        // A trace built in memory (no directory) is its builder's own.
        if !rustix::process::geteuid().is_root() || dir.as_os_str().is_empty() {
            return BinaryAccess::Own;
        }
        match std::fs::symlink_metadata(dir) {
            Ok(m) if m.uid() == 0 => BinaryAccess::Own,
            Ok(m) => BinaryAccess::As {
                uid: m.uid(),
                gid: m.gid(),
            },
            Err(_) => BinaryAccess::As { uid: 65534, gid: 65534 },
        }
    }

    /// Opens `path` for reading with these rights.
    pub fn open(&self, path: &Path) -> io::Result<File> {
        let BinaryAccess::As { uid, gid } = *self else {
            return File::open(path);
        };
        std::thread::scope(|s| {
            s.spawn(|| {
                // Only this thread changes identity (raw syscalls, not
                // glibc's process-wide wrappers), and it ends here.
                set_thread_groups(&[])?;
                set_thread_res_gid(None, Gid::from_raw(gid), None)?;
                set_thread_res_uid(None, Uid::from_raw(uid), None)?;
                File::open(path)
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the thread opening a binary panicked")))
        })
    }
}
