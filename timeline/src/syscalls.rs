//! The syscall records of a streamed trace, on disk, by index.
//!
//! A streamed [`Trace`](jtrace_merge::Trace) has no syscall table (the merge
//! carries each record with its event and drops it after the walk's
//! bookkeeping), but the text trace names the syscall a thread blocked in:
//! `blocked … in read(fd 5: socket tcp …)`. [`SyscallTable`] reads the kernel
//! stream once more, in chunks, and keeps every SYSCALL record at a fixed
//! size, in the order the merge numbers them
//! ([`jtrace_merge::Evidence::Syscall`] indexes): in memory up to a cap, else
//! in an unlinked temporary file, where a lookup is one positioned read, so
//! memory stays bounded whatever the length of the trace.

use jtrace_format::{self as fmt, Decoder, Payload};
use jtrace_merge::SyscallInfo;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Bytes of one entry: tid, entry time, the record as the stream carries it.
const ENTRY: usize = 4 + 8 + fmt::Syscall::LEN;

/// Entries read from disk at a time (lookups of one thread are spread over
/// the file in index order, so a block serves several of them).
const BLOCK_ENTRIES: u64 = 512;

/// Size of a read from the kernel stream.
const CHUNK: usize = 4 << 20;

/// Every SYSCALL record of a trace's kernel stream, by the index the merge
/// gives it.
pub struct SyscallTable {
    /// The entries on disk, when they exceeded the cap.
    file: Option<File>,
    /// The entries, when they fit the cap.
    mem: Vec<u8>,
    len: u64,
    /// The block in memory: index of its first entry, and its bytes.
    block: Option<(u64, Vec<u8>)>,
}

impl SyscallTable {
    /// Reads `dir`'s kernel stream (if any) into a table: in memory up to
    /// `cap` bytes, beyond it in `temp_dir` (default `$TMPDIR`, else /tmp).
    pub fn build(dir: &Path, temp_dir: Option<&Path>, cap: usize) -> anyhow::Result<SyscallTable> {
        let mut t = SyscallTable {
            file: None,
            mem: Vec::new(),
            len: 0,
            block: None,
        };
        let kpath = dir.join(fmt::KERNEL_FILE);
        if !kpath.exists() {
            return Ok(t);
        }
        let rerr = |e: std::io::Error| anyhow::anyhow!("cannot read {}: {e}", kpath.display());
        let mut input = File::open(&kpath).map_err(rerr)?;
        let tmp = temp_dir.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let werr = |e: std::io::Error| anyhow::anyhow!("cannot write the syscall table in {}: {e}", tmp.display());
        // Entries not written out yet; a file once they exceed the cap.
        let mut pending: Vec<u8> = Vec::new();
        let mut out: Option<BufWriter<File>> = None;

        // The records in chunks; `buf[pos..]` is not consumed yet, `base` is
        // the file offset of `buf[0]`.
        let mut buf: Vec<u8> = Vec::new();
        let (mut pos, mut base, mut eof) = (0usize, 0usize, false);
        let mut header_checked = false;
        loop {
            let rest = &buf[pos..];
            // A whole record at `pos` (or something the decoder rejects by
            // itself), else read more.
            let need = if !header_checked {
                fmt::FILE_HEADER_LEN
            } else if rest.len() >= fmt::RECORD_HEADER_LEN {
                (u16::from_le_bytes([rest[2], rest[3]]) as usize).max(fmt::RECORD_HEADER_LEN)
            } else {
                fmt::RECORD_HEADER_LEN
            };
            if rest.len() < need && !eof {
                buf.drain(..pos);
                base += pos;
                pos = 0;
                let old = buf.len();
                buf.resize(old + CHUNK, 0);
                let n = read_full(&mut input, &mut buf[old..]).map_err(rerr)?;
                buf.truncate(old + n);
                eof = n == 0;
                continue;
            }
            if !header_checked {
                // stream::open checked the header already; here only skip it.
                if rest.len() < fmt::FILE_HEADER_LEN {
                    break;
                }
                pos += fmt::FILE_HEADER_LEN;
                header_checked = true;
                continue;
            }
            if rest.is_empty() {
                break;
            }
            let one = &rest[..need.min(rest.len())];
            // The merge stops at the first bad record; the indices it gave
            // before are the ones its evidence refers to.
            let Some(Ok(raw)) = Decoder::new(one, base + pos).next_raw() else {
                break;
            };
            pos += need;
            if raw.kind == fmt::kind::SYSCALL {
                let Ok(rec) = raw.decode() else { break };
                if let Payload::Syscall(sc) = rec.payload {
                    pending.extend_from_slice(&raw.tid.to_le_bytes());
                    pending.extend_from_slice(&raw.ts.to_le_bytes());
                    pending.extend_from_slice(&sc.to_bytes());
                    t.len += 1;
                    if pending.len() >= cap.max(64 << 10) {
                        if out.is_none() {
                            let f = unlinked_temp_file(&tmp, "syscalls", "the syscall table")?;
                            out = Some(BufWriter::with_capacity(1 << 20, f));
                        }
                        out.as_mut().expect("set above").write_all(&pending).map_err(werr)?;
                        pending.clear();
                    }
                }
            }
        }
        match out {
            None => t.mem = pending,
            Some(mut out) => {
                out.write_all(&pending).map_err(werr)?;
                t.file = Some(out.into_inner().map_err(|e| werr(e.into_error()))?);
            }
        }
        Ok(t)
    }

    /// Records in the table.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the trace has no syscall records.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The record the merge numbered `idx`.
    pub fn get(&mut self, idx: u32) -> anyhow::Result<Option<SyscallInfo>> {
        let idx = idx as u64;
        if idx >= self.len {
            return Ok(None);
        }
        let Some(file) = &self.file else {
            return Ok(Some(entry(&self.mem[idx as usize * ENTRY..][..ENTRY])?));
        };
        let first = idx - idx % BLOCK_ENTRIES;
        if self.block.as_ref().is_none_or(|b| b.0 != first) {
            let n = (self.len - first).min(BLOCK_ENTRIES) as usize;
            let mut bytes = self.block.take().map(|b| b.1).unwrap_or_default();
            bytes.resize(n * ENTRY, 0);
            file.read_exact_at(&mut bytes, first * ENTRY as u64)
                .map_err(|e| anyhow::anyhow!("cannot read back the syscall table: {e}"))?;
            self.block = Some((first, bytes));
        }
        let bytes = &self.block.as_ref().expect("filled above").1;
        Ok(Some(entry(&bytes[(idx - first) as usize * ENTRY..][..ENTRY])?))
    }

    /// Whether the table went to disk.
    pub fn on_disk(&self) -> bool {
        self.file.is_some()
    }
}

/// Decodes one entry.
fn entry(e: &[u8]) -> anyhow::Result<SyscallInfo> {
    {
        let tid = u32::from_le_bytes([e[0], e[1], e[2], e[3]]);
        let enter = u64::from_le_bytes([e[4], e[5], e[6], e[7], e[8], e[9], e[10], e[11]]);
        let rec = fmt::Syscall::from_bytes(&e[12..])
            .ok_or_else(|| anyhow::anyhow!("the syscall table is corrupt (was the temporary file changed?)"))?;
        Ok(SyscallInfo { tid, enter, rec })
    }
}

/// A new temporary file in `dir`, already unlinked: it lives as long as it is
/// open, and nothing is left behind whatever happens to the process.
pub(crate) fn unlinked_temp_file(dir: &Path, prefix: &str, what: &str) -> anyhow::Result<File> {
    static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("jtrace-{prefix}-{}-{serial}.tmp", std::process::id()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot create {what} in {}: {e} (set TMPDIR or --temp-dir)",
                dir.display()
            )
        })?;
    let _ = std::fs::remove_file(&path);
    Ok(file)
}

/// Reads until `buf` is full or the file ends.
fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
