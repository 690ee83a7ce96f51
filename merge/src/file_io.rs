//! File access shared by the stream reader ([`crate::read::records`]) and
//! the sorted runs ([`crate::sort::run`]): mapping a file for one sequential pass
//! and giving back what the reader has passed, reading a buffer full, and
//! the unlinked temporary files the runs (and the views' spilled rows) live in.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// A new file `jtrace-PREFIX-PID-N.tmp` in `dir`, unlinked at once: it
/// lives as long as it is open, and nothing is left behind whatever happens
/// to the process (the sorted runs of a streamed walk; the views' spilled
/// rows too).
pub fn unlinked_temp_file(dir: &Path, prefix: &str) -> std::io::Result<File> {
    static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("jtrace-{prefix}-{}-{serial}.tmp", std::process::id()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    let _ = std::fs::remove_file(&path);
    Ok(file)
}

/// The file mapped read-only for one sequential pass, or None if it is
/// shorter than `min_len` (or empty) or the mapping fails: the caller reads
/// it instead. The caller guarantees the file does not shrink while mapped.
pub(crate) fn map_file(file: &File, min_len: usize) -> Option<memmap2::Mmap> {
    let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
    if len == 0 || len < min_len {
        return None;
    }
    // SAFETY: read-only and private; the file does not shrink (see callers).
    let map = unsafe { memmap2::MmapOptions::new().len(len).map(file) }.ok()?;
    let _ = map.advise(memmap2::Advice::Sequential);
    Some(map)
}

/// Gives the kernel back what a sequential reader of `map` at `pos` has
/// passed, except the last `keep` bytes, once there are `keep` more to give
/// (one call in `keep` bytes): the resident set stays bounded whatever the
/// file's size, and the page cache keeps the file.
pub(crate) fn release_behind(map: &memmap2::Mmap, released: &mut usize, pos: usize, keep: usize) {
    if pos >= *released + 2 * keep {
        let upto = pos - keep;
        // SAFETY: no slice of the mapping below `pos` is still borrowed by
        // the caller; read again, the bytes would be faulted back in from
        // the file.
        let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, *released, upto - *released) };
        *released = upto;
    }
}

/// Reads until `buf` is full or the file ends (an interrupted read is
/// retried); returns the bytes read.
pub(crate) fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
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
