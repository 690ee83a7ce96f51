//! The trace directory, held open by a file descriptor.
//!
//! jtrace runs as root, and while it records, the directory belongs to the
//! traced user, who can plant links and other files in it. So the directory
//! is created (or taken over) with the invoking user's credentials and
//! opened without following a link; every file jtrace then creates, reads
//! or hands over in it is opened relative to that descriptor without
//! following links (new files never over anything there), and changed
//! through its own descriptor, never by name (docs/ARCHITECTURE.md
//! invariant 6).
//!
//! Every file jtrace creates there is the invoking user's from the moment
//! it exists (given through its descriptor before a byte is written): the
//! user reads their trace while it records (`jtrace info`, `jtrace dump`),
//! and still does if jtrace is killed.

use crate::user::User;
use anyhow::{bail, Context};
use jtrace_merge::Meta;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, CWD};
use rustix::io::Errno;
use std::collections::HashSet;
use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Mode of the trace directory: its owner only.
const DIR_MODE: u32 = 0o700;
/// Mode of the files in it: readable by their owner only.
const FILE_MODE: u32 = 0o600;
/// Room kept on the trace's file system for the final meta.json, in a file
/// without a name (O_TMPFILE) closed just before it is written: a disk the
/// streams filled up must not keep the metadata from being finished, and
/// nothing is left in the trace if jtrace is killed.
const ROOM_BYTES: u64 = 256 << 10;
/// Where meta.json is written before it is renamed into place.
const META_TMP: &str = ".meta.json.tmp";
/// The name under which an earlier jtrace kept its room: only jtrace's,
/// never a reason to refuse the directory.
const OLD_ROOM_FILE: &str = ".jtrace-room";
/// Held locked (flock) by the jtrace that records into the directory, from
/// before it empties an earlier trace to its end: a second jtrace given the
/// same output is refused instead of mixing its streams into the first's.
const LOCK_FILE: &str = ".jtrace-lock";

/// An open trace directory (see the module documentation).
#[derive(Debug)]
pub(crate) struct TraceDir {
    fd: OwnedFd,
    path: PathBuf,
    creator: User,
    /// The inodes of the files jtrace created in it (shared by every
    /// handle): only these, and the files of the user who writes the trace,
    /// are ever handed over.
    made: Arc<Mutex<HashSet<u64>>>,
    /// [`LOCK_FILE`], locked while any handle lives.
    _recording: Arc<OwnedFd>,
    /// The room kept for the final metadata (see [`ROOM_BYTES`]).
    room: Mutex<Option<OwnedFd>>,
}

impl TraceDir {
    /// Makes `path` the output directory, acting as `creator` (the invoking
    /// user): creates it (and missing parents) if it does not exist, so that
    /// only a directory that user could create is made; or takes over an
    /// earlier trace of theirs, emptied. Refuses a symbolic link, another
    /// user's directory, and a non-empty directory that is not a jtrace
    /// trace. The directory is left mode 0700, owned by `creator`.
    pub(crate) fn prepare(path: &Path, creator: &User) -> anyhow::Result<TraceDir> {
        let (fd, lock) = creator.run_as(|| open_as_creator(path, creator))?;
        Ok(TraceDir {
            fd,
            path: path.to_path_buf(),
            creator: creator.clone(),
            made: Default::default(),
            _recording: Arc::new(lock),
            room: Mutex::new(None),
        })
    }

    /// The directory's identity, `<dev>:<ino>`, which the agent checks
    /// before it reads or writes a thing there (agent/src/out_dir.rs).
    pub(crate) fn identity(&self) -> anyhow::Result<String> {
        let st = rustix::fs::fstat(&self.fd)?;
        Ok(format!("{}:{}", st.st_dev, st.st_ino))
    }

    /// The agent's options for this directory: its identity, then the
    /// configuration file `conf` (a name in it).
    pub(crate) fn agent_options(&self, conf: &str) -> anyhow::Result<String> {
        Ok(format!(
            "dir={},config={}",
            self.identity()?,
            self.path.join(conf).display()
        ))
    }

    /// Notes that jtrace made the file open as `fd`.
    fn note_made(&self, fd: impl rustix::fd::AsFd) {
        if let Ok(st) = rustix::fs::fstat(fd) {
            self.made.lock().unwrap_or_else(|p| p.into_inner()).insert(st.st_ino);
        }
    }

    /// Whether jtrace made the file of inode `ino`.
    fn was_made(&self, ino: u64) -> bool {
        self.made.lock().unwrap_or_else(|p| p.into_inner()).contains(&ino)
    }

    /// The directory's path (as given, made absolute).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Gives the directory (not its files) to `user`, who is to write into
    /// it while recording (attach: the JVM's user).
    pub(crate) fn lend_to(&self, user: &User) -> anyhow::Result<()> {
        rustix::fs::fchown(&self.fd, Some(user.uid), Some(user.gid))
            .with_context(|| format!("cannot hand {} to uid {}", self.path.display(), user.uid.as_raw()))
    }

    /// Creates the new file `name` (mode 0600) for writing, the invoking
    /// user's from the start; fails if anything, a link included, is
    /// already there.
    pub(crate) fn create_file(&self, name: &str) -> anyhow::Result<File> {
        self.create_file_for(name, &self.creator)
    }

    /// A second handle on the directory, for the recording's other threads
    /// (the kernel chunks' creator, the ring's keeper).
    pub(crate) fn try_clone(&self) -> anyhow::Result<TraceDir> {
        Ok(TraceDir {
            fd: self.fd.try_clone()?,
            path: self.path.clone(),
            creator: self.creator.clone(),
            made: self.made.clone(),
            _recording: self._recording.clone(),
            room: Mutex::new(None),
        })
    }

    /// Creates the new file `name` (mode 0600) for writing, given to `user`
    /// through its descriptor before anything is written (`attach`: the
    /// configuration the JVM's user reads); fails if anything, a link
    /// included, is already there.
    pub(crate) fn create_file_for(&self, name: &str, user: &User) -> anyhow::Result<File> {
        let fd = self.create_owned(name, user).with_context(|| {
            format!(
                "cannot create {} for uid {}",
                self.path.join(name).display(),
                user.uid.as_raw()
            )
        })?;
        self.note_made(&fd);
        Ok(File::from(fd))
    }

    /// The new file `name`, `user`'s before it has a name (so that not
    /// even a killed jtrace leaves one of root's): made without a name
    /// (O_TMPFILE), given to `user`, then linked in, never over anything
    /// (a link there included). Where the file system has no unnamed
    /// files: created with O_EXCL|O_NOFOLLOW, then given.
    fn create_owned(&self, name: &str, user: &User) -> rustix::io::Result<OwnedFd> {
        let give = |fd: &OwnedFd| rustix::fs::fchown(fd, Some(user.uid), Some(user.gid));
        let mode = Mode::from_raw_mode(FILE_MODE);
        if let Ok(fd) = rustix::fs::openat(&self.fd, ".", OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC, mode) {
            give(&fd)?;
            match rustix::fs::linkat(&fd, "", &self.fd, name, AtFlags::EMPTY_PATH) {
                Ok(()) => return Ok(fd),
                Err(Errno::EXIST) => return Err(Errno::EXIST),
                // Linking a descriptor refused: the named way below.
                Err(_) => {}
            }
        }
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, name, flags, mode)?;
        give(&fd)?;
        Ok(fd)
    }

    /// The chunk files of a ring recording in the directory: (name, stream,
    /// number, size in bytes). Only regular files (a link or anything else
    /// planted under a chunk's name is not one).
    pub(crate) fn chunks(&self) -> anyhow::Result<Vec<(String, String, u64, u64)>> {
        let mut out = Vec::new();
        for name in self.entries()? {
            let Ok(n) = name.to_str() else { continue };
            let Some((stream, Some(seq))) = jtrace_format::parse_stream_file(n) else {
                continue;
            };
            let Ok(st) = rustix::fs::statat(&self.fd, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile {
                out.push((n.to_string(), stream.to_string(), seq, st.st_size as u64));
            }
        }
        Ok(out)
    }

    /// When the chunk file `name` began (the time of its CHUNK record) and
    /// whether its writer finished it (STREAM_COMPLETE); None if it has no
    /// CHUNK record yet, or is not a regular file.
    pub(crate) fn chunk_start(&self, name: &str) -> Option<(u64, bool)> {
        let c = CString::new(name).ok()?;
        let before = rustix::fs::statat(&self.fd, c.as_c_str(), AtFlags::SYMLINK_NOFOLLOW).ok()?;
        if FileType::from_raw_mode(before.st_mode) != FileType::RegularFile {
            return None;
        }
        let fd = rustix::fs::openat(
            &self.fd,
            c.as_c_str(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let mut b = [0u8; jtrace_format::FILE_HEADER_LEN + jtrace_format::CHUNK_RECORD_LEN];
        let n = rustix::io::pread(&fd, &mut b, 0).ok()?;
        let done = jtrace_format::FileHeader::parse(&b[..n])?.flags & jtrace_format::STREAM_COMPLETE != 0;
        let raw = jtrace_format::Decoder::new(b.get(jtrace_format::FILE_HEADER_LEN..n)?, 0)
            .next_raw()?
            .ok()?;
        (raw.kind == jtrace_format::kind::CHUNK || raw.kind == jtrace_format::kind::JVM_CHUNK).then_some((raw.ts, done))
    }

    /// Removes the chunk file `name` (unlinked by name relative to the
    /// directory: a link there is removed, never followed).
    pub(crate) fn remove_chunk(&self, name: &str) -> anyhow::Result<()> {
        if jtrace_format::parse_stream_file(name).is_none_or(|(_, seq)| seq.is_none()) {
            bail!("{name} is not a chunk file");
        }
        rustix::fs::unlinkat(&self.fd, name, AtFlags::empty())
            .with_context(|| format!("cannot remove {}", self.path.join(name).display()))
    }

    /// Holds the directory's lock (flock on its descriptor) while `f`
    /// runs: exclusive for the ring's keeper deleting chunks, shared for
    /// `jtrace dump` linking them, so that a snapshot never loses a chunk
    /// halfway.
    pub(crate) fn locked<T>(&self, exclusive: bool, f: impl FnOnce() -> T) -> T {
        use rustix::fs::FlockOperation;
        let op = if exclusive {
            FlockOperation::LockExclusive
        } else {
            FlockOperation::LockShared
        };
        let held = rustix::fs::flock(&self.fd, op).is_ok();
        let r = f();
        if held {
            let _ = rustix::fs::flock(&self.fd, FlockOperation::Unlock);
        }
        r
    }

    /// Writes the new file `name` (see [`TraceDir::create_file_for`]).
    pub(crate) fn write_file_for(&self, name: &str, bytes: &[u8], user: &User) -> anyhow::Result<()> {
        self.create_file_for(name, user)?
            .write_all(bytes)
            .with_context(|| format!("cannot write {}", self.path.join(name).display()))
    }

    /// Writes the new file `name` (see [`TraceDir::create_file`]).
    pub(crate) fn write_file(&self, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
        self.write_file_for(name, bytes, &self.creator)
    }

    /// Writes meta.json atomically, without following links: a fresh
    /// temporary file (a stale or planted one is unlinked, never written
    /// through), the invoking user's from the start, renamed into place.
    pub(crate) fn store_meta(&self, meta: &Meta) -> anyhow::Result<()> {
        let what = || format!("cannot write the metadata of {}", self.path.display());
        let bytes = serde_json::to_vec_pretty(meta)?;
        match rustix::fs::unlinkat(&self.fd, META_TMP, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(anyhow::anyhow!("cannot remove the old {META_TMP}: {e}")).with_context(what),
        }
        self.write_file(META_TMP, &bytes).with_context(what)?;
        rustix::fs::renameat(&self.fd, META_TMP, &self.fd, jtrace_format::META_FILE).with_context(what)
    }

    /// The size of the directory's file system in bytes, if it says.
    pub(crate) fn file_system_size(&self) -> Option<u64> {
        let st = rustix::fs::fstatvfs(&self.fd).ok()?;
        Some(st.f_blocks.saturating_mul(st.f_frsize))
    }

    /// Sets room aside for the final metadata ([`ROOM_BYTES`], in a file
    /// without a name); best effort (a file system without O_TMPFILE or
    /// fallocate keeps none).
    pub(crate) fn keep_room(&self) {
        let Ok(fd) = rustix::fs::openat(
            &self.fd,
            ".",
            OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC,
            Mode::from_raw_mode(FILE_MODE),
        ) else {
            return;
        };
        if rustix::fs::fallocate(&fd, rustix::fs::FallocateFlags::empty(), 0, ROOM_BYTES).is_ok() {
            *self.room.lock().unwrap_or_else(|p| p.into_inner()) = Some(fd);
        }
    }

    /// Gives back the room [`TraceDir::keep_room`] set aside: its file,
    /// which has no name, goes as it is closed.
    pub(crate) fn release_room(&self) {
        self.room.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Reads the file `name` if it is a regular file (a link, a FIFO or a
    /// device there is an error, not followed or opened).
    pub(crate) fn read_file(&self, name: &str) -> anyhow::Result<Vec<u8>> {
        let c = CString::new(name)?;
        let mut bytes = Vec::new();
        self.open_regular(&c)?.read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// The last `n` bytes (or fewer) of the file `name`, opened as
    /// [`TraceDir::read_file`] opens it.
    pub(crate) fn read_tail(&self, name: &str, n: u64) -> anyhow::Result<Vec<u8>> {
        use std::io::{Seek, SeekFrom};
        let c = CString::new(name)?;
        let mut f = self.open_regular(&c)?;
        let len = f.metadata()?.len();
        f.seek(SeekFrom::Start(len.saturating_sub(n)))?;
        let mut bytes = Vec::new();
        f.take(n).read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// The last file of each JVM stream in the directory: `jvm-<pid>.bin`,
    /// or its newest chunk in a ring recording (the one its end record is in).
    pub(crate) fn jvm_streams(&self) -> Vec<String> {
        let mut last: std::collections::BTreeMap<String, (Option<u64>, String)> = Default::default();
        for n in self.entries().unwrap_or_default() {
            let Ok(n) = n.into_string() else { continue };
            let Some((stream, seq)) = jtrace_format::parse_stream_file(&n) else {
                continue;
            };
            if stream == jtrace_format::KERNEL_STREAM {
                continue;
            }
            let e = last.entry(stream.to_string()).or_insert((seq, n.clone()));
            if seq > e.0 {
                *e = (seq, n);
            }
        }
        last.into_values().map(|(_, n)| n).collect()
    }

    /// Hands every file jtrace or the agent wrote to `owner`, readable by
    /// them only, then the directory itself (mode 0700). Handed over are
    /// the files jtrace created (known by inode) and those of `writer`, the
    /// user who wrote the trace meanwhile (the agent's streams); a file
    /// anyone else owns (one the traced command moved in), and what is not
    /// a regular file with a single link (a symbolic link, a FIFO, a
    /// directory, a hard link to a file elsewhere), is left as it is, with
    /// a warning.
    pub(crate) fn hand_over(&self, owner: &User, writer: &User) -> anyhow::Result<()> {
        for name in self.entries()? {
            let shown = self.path.join(name.to_string_lossy().as_ref());
            if self.is_handed(&name, owner) {
                continue;
            }
            let file = self.open_regular(&name).and_then(|file| {
                let st = rustix::fs::fstat(&file)?;
                if !self.was_made(st.st_ino) && st.st_uid != writer.uid.as_raw() {
                    bail!(
                        "it belongs to uid {}, and neither jtrace nor the traced JVM made it",
                        st.st_uid
                    );
                }
                Ok(file)
            });
            match file {
                Ok(file) => {
                    rustix::fs::fchmod(&file, Mode::from_raw_mode(FILE_MODE))
                        .and_then(|()| rustix::fs::fchown(&file, Some(owner.uid), Some(owner.gid)))
                        .with_context(|| format!("cannot hand {} to uid {}", shown.display(), owner.uid.as_raw()))?;
                }
                Err(e) => eprintln!("jtrace: left {} as it is: {e:#}", shown.display()),
            }
        }
        rustix::fs::fchmod(&self.fd, Mode::from_raw_mode(DIR_MODE))
            .and_then(|()| rustix::fs::fchown(&self.fd, Some(owner.uid), Some(owner.gid)))
            .with_context(|| format!("cannot hand {} to uid {}", self.path.display(), owner.uid.as_raw()))
    }

    /// Whether `name` is a regular file `owner` has already, mode 0600:
    /// nothing to change, whatever its links (a chunk `jtrace dump` linked
    /// into a snapshot has two).
    fn is_handed(&self, name: &CStr, owner: &User) -> bool {
        rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
            FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
                && st.st_uid == owner.uid.as_raw()
                && st.st_gid == owner.gid.as_raw()
                && st.st_mode & 0o7777 == FILE_MODE
        })
    }

    /// Removes the directory after a failed start: its entries (unlinked
    /// relative to the descriptor, never followed), then the directory
    /// itself, by name but with its creator's rights. Best effort.
    pub(crate) fn discard(self) {
        if let Ok(names) = self.entries() {
            for name in names {
                let _ = rustix::fs::unlinkat(&self.fd, name.as_c_str(), AtFlags::empty());
            }
        }
        // Its creator may remove it from the parent (a sticky /tmp too) once
        // it is theirs again.
        let _ = rustix::fs::fchown(&self.fd, Some(self.creator.uid), Some(self.creator.gid));
        let path = self.path.clone();
        let _ = self.creator.run_as(move || Ok(std::fs::remove_dir(&path)?));
    }

    /// The names in the directory, without `.` and `..`.
    fn entries(&self) -> anyhow::Result<Vec<CString>> {
        entries(&self.fd).with_context(|| format!("cannot list {}", self.path.display()))
    }

    /// Opens `name` for reading if it is a regular file with one link,
    /// without following a link and without blocking on a FIFO.
    fn open_regular(&self, name: &CStr) -> anyhow::Result<File> {
        let before = rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)?;
        let kind = FileType::from_raw_mode(before.st_mode);
        if kind != FileType::RegularFile {
            bail!("it is a {}, not a file jtrace wrote", type_name(kind));
        }
        let fd = rustix::fs::openat(
            &self.fd,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let st = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || st.st_ino != before.st_ino {
            bail!("it was replaced while jtrace looked at it");
        }
        if st.st_nlink != 1 {
            bail!("it has {} hard links, so it is also elsewhere", st.st_nlink);
        }
        Ok(File::from(fd))
    }
}

/// The creator's side of [`TraceDir::prepare`], run with their credentials.
fn open_as_creator(path: &Path, creator: &User) -> anyhow::Result<(OwnedFd, OwnedFd)> {
    let uid = creator.uid.as_raw();
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {} as uid {uid}", parent.display()))?;
    }
    let created = match rustix::fs::mkdirat(CWD, path, Mode::from_raw_mode(DIR_MODE)) {
        Ok(()) => true,
        Err(Errno::EXIST) => false,
        Err(e) => bail!(
            "cannot create the output directory {} as uid {uid}: {e}",
            path.display()
        ),
    };
    let st = rustix::fs::statat(CWD, path, AtFlags::SYMLINK_NOFOLLOW)
        .with_context(|| format!("cannot look at {} as uid {uid}", path.display()))?;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => {}
        FileType::Symlink => bail!(
            "output {} is a symbolic link; refusing to write where it points (give the real directory)",
            path.display()
        ),
        _ => bail!("output {} exists and is not a directory", path.display()),
    }
    let not_theirs = |owner: u32| {
        anyhow::anyhow!(
            "output {} belongs to uid {owner}, not to uid {uid} who runs jtrace; refusing to take it over",
            path.display()
        )
    };
    if st.st_uid != uid {
        return Err(not_theirs(st.st_uid));
    }
    let fd = rustix::fs::openat(
        CWD,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .with_context(|| format!("cannot open the output directory {} as uid {uid}", path.display()))?;
    // Checked again on what was opened: it may have been replaced meanwhile.
    let st = rustix::fs::fstat(&fd)?;
    if st.st_uid != uid {
        return Err(not_theirs(st.st_uid));
    }
    let lock = lock_for_recording(&fd, path)?;
    if !created {
        empty_earlier_trace(&fd, path)?;
    }
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(DIR_MODE))
        .with_context(|| format!("cannot make {} private", path.display()))?;
    Ok((fd, lock))
}

/// Takes the directory's [`LOCK_FILE`] (made if missing, never through a
/// link), or says that another jtrace records there.
fn lock_for_recording(dir: &OwnedFd, path: &Path) -> anyhow::Result<OwnedFd> {
    use rustix::fs::FlockOperation;
    let lock = rustix::fs::openat(
        dir,
        LOCK_FILE,
        OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(FILE_MODE),
    )
    .with_context(|| format!("cannot open {}", path.join(LOCK_FILE).display()))?;
    match rustix::fs::flock(&lock, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(lock),
        Err(Errno::WOULDBLOCK) => bail!(
            "output {} is being recorded into by another jtrace; give this one another -o",
            path.display()
        ),
        Err(e) => bail!("cannot lock {}: {e}", path.join(LOCK_FILE).display()),
    }
}

/// Empties an existing output directory if it is empty, holds only what a
/// killed jtrace leaves of its own, or is a jtrace trace (it has a
/// meta.json file) with no subdirectory; refuses anything else before
/// removing a thing.
fn empty_earlier_trace(dir: &OwnedFd, path: &Path) -> anyhow::Result<()> {
    let mut names = entries(dir).with_context(|| format!("cannot list {}", path.display()))?;
    names.retain(|n| n.as_bytes() != LOCK_FILE.as_bytes());
    if names.is_empty() {
        return Ok(());
    }
    let jtraces = |n: &CString| [META_TMP, OLD_ROOM_FILE].iter().any(|o| n.as_bytes() == o.as_bytes());
    let is_trace = names.iter().all(jtraces)
        || rustix::fs::statat(dir, jtrace_format::META_FILE, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile);
    if !is_trace {
        bail!(
            "output {} exists, is not empty and is not a jtrace trace; refusing to overwrite it",
            path.display()
        );
    }
    for name in &names {
        let st = rustix::fs::statat(dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW)?;
        if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
            bail!(
                "output {} contains a directory {}; refusing to overwrite it",
                path.display(),
                name.to_string_lossy()
            );
        }
    }
    for name in &names {
        rustix::fs::unlinkat(dir, name.as_c_str(), AtFlags::empty())
            .with_context(|| format!("cannot remove {} from {}", name.to_string_lossy(), path.display()))?;
    }
    Ok(())
}

/// The names in an open directory, without `.` and `..`.
fn entries(dir: &OwnedFd) -> std::io::Result<Vec<CString>> {
    let mut names = Vec::new();
    for e in rustix::fs::Dir::read_from(dir)? {
        let name = e?.file_name().to_owned();
        if name.as_bytes() != b"." && name.as_bytes() != b".." {
            names.push(name);
        }
    }
    Ok(names)
}

fn type_name(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "file",
        FileType::Directory => "directory",
        FileType::Symlink => "symbolic link",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice | FileType::BlockDevice => "device",
        FileType::Unknown => "file of unknown type",
    }
}

#[cfg(test)]
#[path = "trace_dir_tests.rs"]
mod tests;
