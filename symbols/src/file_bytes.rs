//! How the views read a binary or debug file a trace names: only a
//! regular file of at most [`MAX_ELF_FILE`] bytes, checked before
//! anything is read; mapped whole when only root can change it, else read
//! in bounded parts with `pread`. Root reads binaries other users own (a
//! traced process's own libraries, a user's trace's debug files): read
//! whole, a sparse file of a terabyte would cost a terabyte of memory;
//! mapped, a file its owner shortens meanwhile kills the reader with
//! SIGBUS at the first access past the new end.

use std::fs::File;
use std::os::unix::fs::MetadataExt;

use crate::bounded_read::{Refused, MAX_ELF_FILE};

/// An open file's bytes, as they may be read.
#[derive(Debug)]
pub enum FileBytes {
    /// Mapped read-only: the file belongs to root and is writable by no
    /// one else.
    Mapped(memmap2::Mmap),
    /// To be read in parts (`bounded_read`, `pread`): anyone but root
    /// could shorten it. The file (a second descriptor) and its length.
    Unmapped(File, u64),
}

impl FileBytes {
    /// The bytes of the open file `file`, if it is a regular file of at
    /// most [`MAX_ELF_FILE`] bytes (refused before anything is mapped or
    /// read).
    pub fn of(file: &File) -> Result<FileBytes, Refused> {
        let meta = file.metadata().map_err(|e| Refused::Status(e.to_string()))?;
        if !meta.is_file() {
            return Err(Refused::NotRegular);
        }
        if meta.len() > MAX_ELF_FILE {
            return Err(Refused::TooLarge(meta.len()));
        }
        if only_root_can_change(meta.uid(), meta.mode()) {
            #[allow(unsafe_code)]
            // SAFETY: a read-only private map of a file only root can
            // truncate or rewrite (binaries are replaced by rename, which
            // leaves this open file as it was).
            let map = unsafe { memmap2::Mmap::map(file) }.map_err(|e| Refused::Status(e.to_string()))?;
            return Ok(FileBytes::Mapped(map));
        }
        let dup = file.try_clone().map_err(|e| Refused::Status(e.to_string()))?;
        Ok(FileBytes::Unmapped(dup, meta.len()))
    }

    /// The file's length when it was opened.
    pub fn len(&self) -> u64 {
        match self {
            FileBytes::Mapped(m) => m.len() as u64,
            FileBytes::Unmapped(_, len) => *len,
        }
    }

    /// Whether the file was empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether a file of owner `uid` and `mode` can be changed by root alone.
fn only_root_can_change(uid: u32, mode: u32) -> bool {
    uid == 0 && mode & 0o022 == 0
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

    /// A sparse file of a terabyte is refused at once, whoever owns it; a
    /// directory is no file to read.
    #[test]
    fn huge_and_irregular_files_are_refused_before_mapping() {
        let p = std::env::temp_dir().join(format!("jtrace-file-bytes-huge-{}", std::process::id()));
        let f = File::create(&p).unwrap();
        f.set_len(1 << 40).unwrap();
        assert_eq!(FileBytes::of(&f).unwrap_err(), Refused::TooLarge(1 << 40));
        std::fs::remove_file(&p).unwrap();
        let dir = File::open("/").unwrap();
        assert_eq!(FileBytes::of(&dir).unwrap_err(), Refused::NotRegular);
    }
}
