//! Copying a JVM stream that the traced JVM's user wrote (the agent in a
//! container, src/container.rs) into the trace directory. That user may
//! have made the file anything, so only what the stream format makes of it
//! is copied: a JVM stream header, then whole records, up to the first
//! record that is not one (where a reader stops too: a zero-filled or cut
//! tail, a sparse hole), and never past the trace's free-space floor.

use anyhow::{bail, Context};
use jtrace_format::{FileHeader, FILE_HEADER_LEN, JVM_MAGIC, RECORD_HEADER_LEN, STREAM_COMPLETE};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;

/// How much is read at a time.
const BLOCK: usize = 1 << 20;

/// What a copy came to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Copied {
    /// Bytes written, header included.
    pub(crate) bytes: u64,
    /// Why the copy ended before the end of the source, if it did.
    pub(crate) stopped: Option<String>,
}

/// Copies the JVM stream `src` into `dst` (see the module documentation).
/// The copy is marked complete (as the source's header says) only once all
/// of it is in: one cut short (the floor `min_free` reached, an error) is not.
pub(crate) fn copy_stream(src: &File, dst: &mut File, min_free: u64) -> anyhow::Result<Copied> {
    let mut head = [0u8; FILE_HEADER_LEN];
    let n = read_at(src, &mut head, 0)?;
    let header = match FileHeader::parse(&head[..n]) {
        Some(h) if h.magic == JVM_MAGIC => h,
        _ => bail!("it is not a JVM stream (no stream header)"),
    };
    let unfinished = FileHeader {
        flags: header.flags & !STREAM_COMPLETE,
        ..header
    };
    write_checked(dst, &unfinished.to_bytes(), min_free)?;
    let mut copied = Copied {
        bytes: FILE_HEADER_LEN as u64,
        stopped: None,
    };
    let mut buf = vec![0u8; BLOCK];
    // `buf[..filled]` holds the bytes at `at` of the source (after a
    // block, the start of a record it cut).
    let mut at = FILE_HEADER_LEN as u64;
    let mut filled = 0;
    loop {
        let n = read_at(src, &mut buf[filled..], at + filled as u64)?;
        let eof = n == 0;
        filled += n;
        let whole = whole_records(&buf[..filled]);
        let invalid = whole.invalid;
        if whole.len > 0 {
            if let Err(e) = write_checked(dst, &buf[..whole.len], min_free) {
                copied.stopped = Some(format!("{e:#}"));
                break;
            }
            copied.bytes += whole.len as u64;
        }
        if invalid || (eof && whole.len == 0) {
            break;
        }
        buf.copy_within(whole.len..filled, 0);
        at += whole.len as u64;
        filled -= whole.len;
    }
    if copied.stopped.is_none() && header != unfinished {
        dst.write_all_at(&header.to_bytes(), 0)
            .context("cannot mark the copy complete")?;
    }
    Ok(copied)
}

/// The whole records at the start of `b`: their length, and whether what
/// follows them is no record (the copy ends there).
struct Whole {
    len: usize,
    invalid: bool,
}

fn whole_records(b: &[u8]) -> Whole {
    let mut pos = 0;
    while pos + RECORD_HEADER_LEN <= b.len() {
        let len = u16::from_le_bytes([b[pos + 2], b[pos + 3]]) as usize;
        if len < RECORD_HEADER_LEN || !len.is_multiple_of(8) {
            return Whole {
                len: pos,
                invalid: true,
            };
        }
        if pos + len > b.len() {
            break;
        }
        pos += len;
    }
    Whole {
        len: pos,
        invalid: false,
    }
}

/// Reads at `offset` until `buf` is full or the file ends.
fn read_at(f: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Appends `bytes` to `dst` unless that would cross the free-space floor.
fn write_checked(dst: &mut File, bytes: &[u8], min_free: u64) -> anyhow::Result<()> {
    jtrace_format::check_free_space(dst, bytes.len() as u64, min_free)?;
    dst.write_all(bytes).context("cannot write the copy")
}

#[cfg(test)]
mod tests {
    use super::*;
    use jtrace_format::{Encoder, Payload, Record};

    fn temp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("jtrace-copy-{name}-{}", std::process::id()))
    }

    /// A JVM stream of `n` records (AGENT_ERROR, of various lengths).
    fn stream(n: usize, complete: bool) -> Vec<u8> {
        let mut h = FileHeader::new(JVM_MAGIC);
        if complete {
            h.flags = STREAM_COMPLETE;
        }
        let mut enc = Encoder::new();
        for i in 0..n {
            enc.record(&Record {
                tid: 7,
                ts: i as u64,
                payload: Payload::AgentError("x".repeat(i % 300)),
            });
        }
        let mut b = h.to_bytes().to_vec();
        b.extend_from_slice(&enc.buf);
        b
    }

    fn copy(src: &[u8], min_free: u64) -> (Vec<u8>, Copied) {
        let (s, d) = (temp("src"), temp("dst"));
        std::fs::write(&s, src).unwrap();
        let mut out = File::create(&d).unwrap();
        let c = copy_stream(&File::open(&s).unwrap(), &mut out, min_free).unwrap();
        let got = std::fs::read(&d).unwrap();
        let _ = (std::fs::remove_file(&s), std::fs::remove_file(&d));
        (got, c)
    }

    /// A stream larger than a block is copied whole; its tail of zeros
    /// (a stream cut by kill -9) and a cut last record are left out.
    #[test]
    fn whole_records_only() {
        let s = stream(20_000, true);
        assert!(s.len() > BLOCK);
        let (got, c) = copy(&s, 0);
        assert_eq!(got, s);
        assert_eq!(c.stopped, None);
        let mut cut = stream(100, false);
        let full = cut.len();
        cut.extend_from_slice(&[0u8; 4096]);
        assert_eq!(copy(&cut, 0).0.len(), full);
        let mut torn = stream(100, false);
        let last = torn.len();
        torn.extend_from_slice(&stream(1, false)[FILE_HEADER_LEN..][..20]);
        assert_eq!(copy(&torn, 0).0.len(), last);
    }

    /// What is not a JVM stream is refused; a copy that would cross the
    /// floor stops and is not marked complete.
    #[test]
    fn foreign_files_and_the_floor() {
        let (s, d) = (temp("bad"), temp("bad-out"));
        std::fs::write(&s, b"#!/bin/sh\nnot a stream at all\n").unwrap();
        let e = copy_stream(&File::open(&s).unwrap(), &mut File::create(&d).unwrap(), 0).unwrap_err();
        assert!(format!("{e}").contains("not a JVM stream"), "{e}");
        let _ = (std::fs::remove_file(&s), std::fs::remove_file(&d));
        let (s, d) = (temp("floor"), temp("floor-out"));
        std::fs::write(&s, stream(10, true)).unwrap();
        // A floor no file system has room for.
        let e = copy_stream(&File::open(&s).unwrap(), &mut File::create(&d).unwrap(), u64::MAX / 2).unwrap_err();
        assert!(format!("{e:#}").contains("free-space floor"), "{e:#}");
        let _ = std::fs::remove_file(&s);
        let _ = std::fs::remove_file(&d);
    }
}
