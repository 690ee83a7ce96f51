//! `jtrace dump TRACE -o SNAPSHOT`: a readable snapshot of a ring
//! recording (`--max-size`, `--max-age`) while it goes on.
//!
//! The snapshot is a new trace directory, made with the invoking user's
//! rights only (under sudo, on a thread that took their identity: nothing
//! is done as root). Holding the recording directory's lock, so that the
//! ring's keeper deletes nothing meanwhile, it hard-links each stream's
//! finished chunks (no copy: they no longer change) and copies what the
//! stream's newest chunk holds so far; then it writes meta.json, marked
//! incomplete, with the time of the snapshot. A reader takes the copied
//! chunks as streams cut off there.

use crate::clock::clock_ns;
use crate::user::User;
use anyhow::{bail, Context};
use jtrace_merge::Meta;
use rustix::fs::{AtFlags, Mode, OFlags, CWD};
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// Arguments of `jtrace dump`.
#[derive(clap::Args)]
pub(crate) struct DumpArgs {
    /// The trace directory of a ring recording (`--max-size`, `--max-age`),
    /// recording or finished.
    trace: PathBuf,
    /// The snapshot's directory, to be created.
    #[arg(short, long)]
    output: PathBuf,
}

/// Runs `jtrace dump`.
pub(crate) fn dump(args: DumpArgs) -> anyhow::Result<()> {
    let user = User::invoking()?;
    let (linked, copied) = user.run_as(|| snapshot(&args.trace, &args.output))?;
    eprintln!(
        "jtrace: snapshot of {} written to {} ({linked} chunk(s) linked, {copied} copied); read it with `jtrace report {}`",
        args.trace.display(),
        args.output.display(),
        args.output.display()
    );
    Ok(())
}

/// Opens a directory without following a link.
fn open_dir(path: &Path) -> anyhow::Result<OwnedFd> {
    rustix::fs::openat(
        CWD,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .with_context(|| format!("cannot open the trace directory {}", path.display()))
}

/// The snapshot itself (as the invoking user): chunks linked and copied.
fn snapshot(trace: &Path, out: &Path) -> anyhow::Result<(u64, u64)> {
    let src = open_dir(trace)?;
    let meta = Meta::load(trace)?;
    if meta.max_size.is_none() && meta.max_age_ns.is_none() {
        bail!(
            "{} is not a ring recording (--max-size, --max-age): copy it instead",
            trace.display()
        );
    }
    rustix::fs::mkdirat(CWD, out, Mode::from_raw_mode(0o700))
        .with_context(|| format!("cannot create the snapshot directory {}", out.display()))?;
    let dst = open_dir(out)?;
    let taken = lock_shared(&src, || copy_streams(&src, &dst, trace, out));
    let (linked, copied) = match taken {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_dir_all(out);
            return Err(e);
        }
    };
    let mut m = meta;
    m.complete = false;
    m.snapshot_ns = Some(clock_ns(rustix::time::ClockId::Monotonic));
    m.store_in(&dst)?;
    Ok((linked, copied))
}

/// Runs `f` holding the directory's shared lock (the keeper holds it
/// exclusively while it deletes).
fn lock_shared<T>(dir: &OwnedFd, f: impl FnOnce() -> T) -> T {
    use rustix::fs::FlockOperation;
    let held = rustix::fs::flock(dir, FlockOperation::LockShared).is_ok();
    let r = f();
    if held {
        let _ = rustix::fs::flock(dir, FlockOperation::Unlock);
    }
    r
}

/// Links every stream's chunks but its newest, copies the newest.
fn copy_streams(src: &OwnedFd, dst: &OwnedFd, trace: &Path, out: &Path) -> anyhow::Result<(u64, u64)> {
    let mut streams: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
    for e in rustix::fs::Dir::read_from(src)? {
        let e = e?;
        let Ok(name) = e.file_name().to_str() else { continue };
        if let Some((stream, Some(seq))) = jtrace_format::parse_stream_file(name) {
            if e.file_type() == rustix::fs::FileType::RegularFile {
                streams
                    .entry(stream.to_string())
                    .or_default()
                    .push((seq, name.to_string()));
            }
        }
    }
    if streams.is_empty() {
        bail!("{} has no chunk files", trace.display());
    }
    let (mut linked, mut copied) = (0, 0);
    for chunks in streams.values_mut() {
        chunks.sort();
        // A chunk its writer is still creating (no CHUNK record yet) is not
        // part of the stream yet: the one before is the newest.
        while chunks.len() > 1 && !has_chunk_record(src, &chunks[chunks.len() - 1].1) {
            chunks.pop();
        }
        let (last, older) = chunks.split_last().expect("a stream has a chunk");
        for (_, name) in older {
            match rustix::fs::linkat(src, name.as_str(), dst, name.as_str(), AtFlags::empty()) {
                Ok(()) => linked += 1,
                // Another file system, or links not allowed: a copy.
                Err(_) => {
                    copy(src, dst, name, out)?;
                    copied += 1;
                }
            }
        }
        copy(src, dst, &last.1, out)?;
        copied += 1;
    }
    Ok((linked, copied))
}

/// Whether the file `name` of `src` begins with a stream header and a CHUNK record.
fn has_chunk_record(src: &OwnedFd, name: &str) -> bool {
    let Ok(fd) = rustix::fs::openat(
        src,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    let mut b = [0u8; jtrace_format::FILE_HEADER_LEN + jtrace_format::CHUNK_RECORD_LEN];
    let Ok(n) = rustix::io::pread(&fd, &mut b, 0) else {
        return false;
    };
    let Some(h) = jtrace_format::FileHeader::parse(&b[..n]) else {
        return false;
    };
    let kinds = [jtrace_format::kind::CHUNK, jtrace_format::kind::JVM_CHUNK];
    (h.magic == jtrace_format::KERNEL_MAGIC || h.magic == jtrace_format::JVM_MAGIC)
        && n == b.len()
        && kinds.contains(&u16::from_le_bytes([b[16], b[17]]))
}

/// Copies the regular file `name` of `src` (as it is now) into `dst`.
fn copy(src: &OwnedFd, dst: &OwnedFd, name: &str, out: &Path) -> anyhow::Result<()> {
    let from = rustix::fs::openat(
        src,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    if rustix::fs::fstat(&from)?.st_mode & 0o170000 != 0o100000 {
        bail!("{name} is not a regular file");
    }
    let to = rustix::fs::openat(
        dst,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut from = std::fs::File::from(from);
    let mut to = std::fs::File::from(to);
    std::io::copy(&mut from, &mut to).with_context(|| format!("cannot copy {name} into {}", out.display()))?;
    Ok(())
}
