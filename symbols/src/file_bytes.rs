//! The bytes of a binary or debug file jtrace reads: mapped when only root
//! can change the file, read into memory otherwise. Root reads binaries
//! other users own (a traced process's own libraries, a user's trace's
//! debug files), and a mapping of a file its owner truncates meanwhile
//! kills the reader with SIGBUS at the first access past the new end.

use std::fs::File;
use std::io;
use std::ops::Deref;
use std::os::unix::fs::{FileExt, MetadataExt};

/// A whole file's bytes.
#[derive(Debug)]
pub enum FileBytes {
    /// Mapped read-only: the file belongs to root and is writable by no
    /// one else.
    Mapped(memmap2::Mmap),
    /// A copy: anyone but root could shorten the file.
    Read(Vec<u8>),
}

impl FileBytes {
    /// The bytes of the open file `file`.
    pub fn of(file: &File) -> io::Result<FileBytes> {
        let meta = file.metadata()?;
        if only_root_can_change(meta.uid(), meta.mode()) {
            #[allow(unsafe_code)]
            // SAFETY: a read-only private map of a file only root can
            // truncate or rewrite (binaries are replaced by rename, which
            // leaves this open file as it was).
            return Ok(FileBytes::Mapped(unsafe { memmap2::Mmap::map(file)? }));
        }
        let mut v = vec![0u8; meta.len() as usize];
        let mut at = 0;
        while at < v.len() {
            match file.read_at(&mut v[at..], at as u64)? {
                0 => break, // shortened since: what was read is the file
                n => at += n,
            }
        }
        v.truncate(at);
        Ok(FileBytes::Read(v))
    }
}

/// Whether a file of owner `uid` and `mode` can be changed by root alone.
fn only_root_can_change(uid: u32, mode: u32) -> bool {
    uid == 0 && mode & 0o022 == 0
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(m) => m,
            FileBytes::Read(v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_root_alone_can_change_are_mapped() {
        assert!(only_root_can_change(0, 0o100755));
        assert!(only_root_can_change(0, 0o100644));
        assert!(!only_root_can_change(0, 0o100664), "group-writable");
        assert!(!only_root_can_change(0, 0o100666), "world-writable");
        assert!(!only_root_can_change(1000, 0o100444), "another user's, read-only");
    }
}
