//! The trace directory as the agent writes into it.
//!
//! The agent runs as the JVM's user, and the trace directory belongs to a
//! user who may swap it (or a file in it) for a link while the agent
//! starts; behind a `jtrace attach` that user need not be the JVM's. So the
//! directory is opened once, without following a link, and checked against
//! the identity (device, inode) jtrace gave in the agent's options; the
//! configuration is read and every stream file created relative to that
//! descriptor, new (`O_EXCL`) and without following links
//! (docs/ARCHITECTURE.md invariant 6). Used by hand, without jtrace's
//! identity, the agent still never follows a link at the directory or its
//! files.

use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The largest configuration file read (a JPMT file is a few lines).
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The identity of a directory: its device and inode numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DirId {
    /// `st_dev`.
    pub(crate) dev: u64,
    /// `st_ino`.
    pub(crate) ino: u64,
}

impl DirId {
    /// Parses `<dev>:<ino>` (decimal), as jtrace writes it.
    pub(crate) fn parse(s: &str) -> Option<DirId> {
        let (dev, ino) = s.split_once(':')?;
        Some(DirId {
            dev: dev.parse().ok()?,
            ino: ino.parse().ok()?,
        })
    }
}

/// The open trace directory (see the module documentation).
#[derive(Debug)]
pub(crate) struct OutDir {
    fd: OwnedFd,
    path: String,
}

fn c_string(s: &str) -> std::io::Result<CString> {
    CString::new(s).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in a path"))
}

fn check(r: libc::c_int) -> std::io::Result<libc::c_int> {
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn fstat(fd: &impl AsRawFd) -> std::io::Result<libc::stat> {
    // SAFETY: fstat fills the zeroed struct for a valid descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid out-pointer for the call.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st)
}

impl OutDir {
    /// Opens the directory `path` without following a link at it; with
    /// `expected`, it must be that directory (a link, or another directory
    /// put in its place, is refused); without, it is created (mode 0700)
    /// if missing.
    pub(crate) fn open(path: &str, expected: Option<DirId>) -> Result<OutDir, String> {
        let c = c_string(path).map_err(|e| format!("{path}: {e}"))?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        if expected.is_none() {
            use std::os::unix::fs::DirBuilderExt;
            // mkdir never follows a link at the last component: one there stays and is refused below.
            match std::fs::DirBuilder::new().recursive(true).mode(0o700).create(path) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                    return Err(format!("cannot create output directory {path}: {e}"))
                }
                _ => {}
            }
        }
        // SAFETY: a NUL-terminated path; the descriptor is owned from here on.
        let fd = check(unsafe { libc::open(c.as_ptr(), flags) })
            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) | Some(libc::ENOTDIR) => {
                    format!("output directory {path} is a link or not a directory; not writing there")
                }
                _ => format!("cannot open output directory {path}: {e}"),
            })?;
        if let Some(want) = expected {
            let st = fstat(&fd).map_err(|e| format!("{path}: {e}"))?;
            let got = DirId {
                dev: st.st_dev,
                ino: st.st_ino,
            };
            if got != want {
                return Err(format!(
                    "output directory {path} is not the one jtrace prepared (it was replaced); not writing there"
                ));
            }
        }
        Ok(OutDir {
            fd,
            path: path.to_string(),
        })
    }

    /// The path of `name` in the directory, for messages.
    pub(crate) fn shown(&self, name: &str) -> String {
        format!("{}/{name}", self.path.trim_end_matches('/'))
    }

    /// Creates the new file `name` (mode 0600), read-write: fails if
    /// anything is there already, a link included.
    pub(crate) fn create_new(&self, name: &str) -> std::io::Result<File> {
        let c = c_string(name)?;
        let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: a NUL-terminated name relative to our directory descriptor.
        let fd = check(unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags, 0o600 as libc::c_uint) })?;
        // SAFETY: a new descriptor, owned by the File from here on.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// Removes `name` (a file this agent created and could not use);
    /// relative to the directory, nothing followed.
    pub(crate) fn remove(&self, name: &str) {
        if let Ok(c) = c_string(name) {
            // SAFETY: a NUL-terminated name relative to our directory descriptor.
            unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) };
        }
    }

    /// Reads the regular file `name` (at most [`MAX_CONFIG_BYTES`]),
    /// without following a link or waiting on a FIFO.
    pub(crate) fn read_small(&self, name: &str) -> std::io::Result<String> {
        let c = c_string(name)?;
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
        // SAFETY: a NUL-terminated name relative to our directory descriptor.
        let fd = check(unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags) })?;
        // SAFETY: a new descriptor, owned by the File from here on.
        let f = unsafe { File::from_raw_fd(fd) };
        let st = fstat(&f)?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(std::io::Error::other("not a regular file"));
        }
        let mut text = String::new();
        f.take(MAX_CONFIG_BYTES + 1).read_to_string(&mut text)?;
        if text.len() as u64 > MAX_CONFIG_BYTES {
            return Err(std::io::Error::other(format!(
                "larger than {} KiB",
                MAX_CONFIG_BYTES >> 10
            )));
        }
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn temp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("jtrace-outdir-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_link_or_a_replaced_directory_is_refused() {
        let d = temp("swap");
        let real = d.join("real");
        std::fs::create_dir(&real).unwrap();
        let md = std::fs::metadata(&real).unwrap();
        let id = DirId {
            dev: md.dev(),
            ino: md.ino(),
        };
        assert!(OutDir::open(real.to_str().unwrap(), Some(id)).is_ok());
        // Swapped for a link to elsewhere: refused, though the target is a directory.
        std::fs::rename(&real, d.join("moved")).unwrap();
        std::os::unix::fs::symlink(d.join("moved"), &real).unwrap();
        let e = OutDir::open(real.to_str().unwrap(), Some(id)).unwrap_err();
        assert!(e.contains("is a link"), "{e}");
        // Swapped for another directory: refused by its identity.
        std::fs::remove_file(&real).unwrap();
        std::fs::create_dir(&real).unwrap();
        let e = OutDir::open(real.to_str().unwrap(), Some(id)).unwrap_err();
        assert!(e.contains("not the one jtrace prepared"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn files_are_created_new_and_links_are_not_followed() {
        let d = temp("files");
        let dir = OutDir::open(d.to_str().unwrap(), None).unwrap();
        let target = d.join("target");
        std::fs::write(&target, "keep").unwrap();
        std::os::unix::fs::symlink(&target, d.join("jvm-1.bin")).unwrap();
        assert!(dir.create_new("jvm-1.bin").is_err());
        std::os::unix::fs::symlink(&target, d.join("agent.conf")).unwrap();
        assert!(dir.read_small("agent.conf").is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        dir.create_new("jvm-2.bin").unwrap();
        assert!(dir.create_new("jvm-2.bin").is_err(), "an existing file is not reused");
        assert_eq!(DirId::parse("12:34"), Some(DirId { dev: 12, ino: 34 }));
        assert_eq!(DirId::parse("12"), None);
        let _ = std::fs::remove_dir_all(&d);
    }
}
