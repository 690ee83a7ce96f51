//! The paths of the files SYSCALL records name, resolved in user space
//! while the recorder runs and written as FILE_PATH records.

use std::collections::HashMap;

use jtrace_format::{fd_kind, Decoder, FilePath, Payload, Record, Syscall, RECORD_HEADER_LEN};

/// How many times the path of one inode is looked for before giving up
/// (the fd may be closed, or the thread gone, by the time its record is read).
const PATH_ATTEMPTS: u8 = 3;

/// Names the files SYSCALL records refer to by (dev, ino): once per inode,
/// from `/proc/<tid>/fd/<fd>` while the fd is (usually) still open, checked
/// with stat against the record's dev and ino so that a reused fd or a
/// renamed file never gets a wrong name.
#[derive(Default)]
pub(crate) struct PathResolver {
    /// Per inode: the attempts left, `None` when resolved or given up.
    seen: HashMap<(u64, u64), Option<u8>>,
    /// FILE_PATH records made.
    pub(crate) written: u64,
}

impl PathResolver {
    /// The FILE_PATH record for the file of this SYSCALL sample, if it is
    /// the first time its inode is seen and its path can be confirmed.
    pub(crate) fn file_path(&mut self, sample: &[u8]) -> Option<Record> {
        // Most SYSCALL records name no file: look at their fd_kind before
        // decoding the whole record (the decode was ≈12 % of the consumer).
        let kind = Syscall::fd_kind_of(sample.get(RECORD_HEADER_LEN..)?)?;
        if kind != fd_kind::FILE && kind != fd_kind::DIR {
            return None;
        }
        let rec = Decoder::new(sample, 0).next()?.ok()?;
        let Payload::Syscall(sc) = rec.payload else {
            return None;
        };
        if !(sc.fd_kind == fd_kind::FILE || sc.fd_kind == fd_kind::DIR) || sc.fd < 0 || sc.ino == 0 {
            return None;
        }
        let key = (sc.dev, sc.ino);
        let left = self.seen.entry(key).or_insert(Some(PATH_ATTEMPTS));
        let n = (*left)?;
        let path = resolve_path(rec.tid, sc.fd, sc.dev, sc.ino);
        // None once resolved, or out of attempts: never looked for again.
        *left = if path.is_some() {
            None
        } else {
            Some(n - 1).filter(|&n| n > 0)
        };
        let path = path?;
        self.written += 1;
        Some(Record {
            tid: 0,
            ts: rec.ts,
            payload: Payload::FilePath(FilePath {
                dev: sc.dev,
                ino: sc.ino,
                path,
            }),
        })
    }
}

/// The path of `fd` of thread `tid` if it is still the file (dev, ino) the
/// kernel reported (dev in the kernel's `major << 20 | minor` encoding).
fn resolve_path(tid: u32, fd: i32, dev: u64, ino: u64) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let link = std::fs::read_link(format!("/proc/{tid}/fd/{fd}")).ok()?;
    let path = link.to_str()?;
    // "/x (deleted)", "pipe:[…]", "anon_inode:…" are not paths to show.
    if !path.starts_with('/') || path.ends_with(" (deleted)") {
        return None;
    }
    let md = std::fs::metadata(path).ok()?;
    let kdev = u64::from(libc::major(md.dev())) << 20 | u64::from(libc::minor(md.dev()));
    (kdev == dev && md.ino() == ino).then(|| path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use jtrace_format::Encoder;
    use std::os::unix::fs::MetadataExt;

    /// A file this process holds open is named once, by its real path; a
    /// record whose fd is not that file gets no name.
    #[test]
    fn a_file_is_named_once_and_only_if_it_is_the_one_recorded() {
        let dir = std::env::temp_dir().join(format!("jtrace-bpf-paths-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.canonicalize().unwrap().join("data.bin");
        let file = std::fs::File::create(&path).unwrap();
        let md = file.metadata().unwrap();
        let dev = u64::from(libc::major(md.dev())) << 20 | u64::from(libc::minor(md.dev()));
        let sample = |ino: u64| {
            let mut enc = Encoder::new();
            enc.record(&Record {
                tid: std::process::id(),
                ts: 5,
                payload: Payload::Syscall(Syscall {
                    fd_kind: fd_kind::FILE,
                    fd: std::os::fd::AsRawFd::as_raw_fd(&file),
                    dev,
                    ino,
                    ..Default::default()
                }),
            });
            enc.buf
        };
        let mut paths = PathResolver::default();
        assert_eq!(paths.file_path(&sample(md.ino() + 1)), None, "another inode");
        let rec = paths.file_path(&sample(md.ino())).expect("named");
        assert_eq!(
            rec.payload,
            Payload::FilePath(FilePath {
                dev,
                ino: md.ino(),
                path: path.to_str().unwrap().to_string()
            })
        );
        assert_eq!(rec.ts, 5);
        assert_eq!(paths.file_path(&sample(md.ino())), None, "named once");
        assert_eq!(paths.written, 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
