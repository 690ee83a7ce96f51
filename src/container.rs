//! A JVM in a container (another mount namespace or root): what `jtrace
//! attach` places in the JVM's own file system, and takes back.
//!
//! The JVM sees neither jtrace's agent nor the trace directory, so the
//! session gets a private directory in the JVM's /tmp, made by the JVM's
//! user (host ids: a rootless container's users are high host uids):
//!
//! ```text
//! /tmp/.jtrace-<16 hex digits>/   0700  the session's directory
//!     libjtrace_agent.so         0500  a copy of the agent, while the JVM loads it
//!     agent.conf                 0400  the agent's configuration (`output`: this directory)
//!     jvm-<nspid>.bin                  the agent's stream (the agent creates it)
//! ```
//!
//! Every path there is opened from the JVM's root with `RESOLVE_IN_ROOT`,
//! then one name at a time relative to directory descriptors, without
//! following links (src/proc_root.rs). The library is immutable while the
//! JVM loads it (where the file system allows), and what the JVM then maps
//! under its name must be that very file: one the container's root put in
//! its place is reported, never trusted. Once loaded it is removed: the
//! JVM keeps its mapping and finds it by its name again (dlopen matches
//! loaded libraries by name), for `stop` and for later sessions. At the
//! end the agent's stream, held open since the agent created it, is copied
//! into the trace directory as a hostile file (src/stream_copy.rs); then
//! everything in the directory, and the directory, is removed, on every
//! path (failures included: [`Drop`]).

use crate::hotspot::Jvm;
use crate::proc_root::{open_in, ProcRoot};
use crate::stream_copy::copy_stream;
use crate::trace_dir::TraceDir;
use crate::user::User;
use anyhow::{bail, Context};
use rustix::fs::{AtFlags, FileType, IFlags, OFlags, StatVfsMountFlags};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// The agent's file name, in the session's directory.
pub(crate) const LIB_NAME: &str = "libjtrace_agent.so";
/// Names of the session directories: this, then 16 hex digits.
const DIR_PREFIX: &str = ".jtrace-";
/// How much of the agent's stream is read to see it start.
const HEAD_BYTES: usize = 1 << 20;

/// The copy of the agent placed for the JVM to load.
struct PlacedLib {
    /// Held open: its inode stays what it is, whatever its name.
    file: File,
    /// Its device and inode as /proc/PID/maps shows them ("fe:00 1234").
    maps_id: String,
}

/// The session's directory in the JVM's /tmp (see the module documentation).
pub(crate) struct ContainerDir {
    pid: u32,
    user: User,
    tmp: OwnedFd,
    name: String,
    dir: OwnedFd,
    lib: Option<PlacedLib>,
    /// The agent's stream: its name and the file, once it exists.
    stream: Option<(String, File)>,
    removed: bool,
}

impl ContainerDir {
    /// Makes the session's directory in the JVM's /tmp, as the JVM's user,
    /// with the agent's configuration (`conf` of the directory's path as the
    /// JVM sees it) and, unless the JVM maps the agent already (`agent`
    /// None), a copy of `agent`. Nothing is left behind on failure.
    pub(crate) fn create(
        jvm: &Jvm,
        agent: Option<&File>,
        conf: impl FnOnce(&str) -> String,
    ) -> anyhow::Result<ContainerDir> {
        let tmp = ProcRoot::open(jvm.pid)?.tmp()?;
        if agent.is_some() && rustix::fs::fstatvfs(&tmp).is_ok_and(|s| s.f_flag.contains(StatVfsMountFlags::NOEXEC)) {
            bail!(
                "the /tmp of the JVM {} is mounted noexec: the agent cannot be loaded from there",
                jvm.pid
            );
        }
        let name = format!("{DIR_PREFIX}{:016x}", random_u64()?);
        let dir = jvm.user.run_as(|| make_dir(&tmp, &name, &jvm.user))?;
        // From here on, Drop removes what is there.
        let mut placed = ContainerDir {
            pid: jvm.pid,
            user: jvm.user.clone(),
            tmp,
            name,
            dir,
            lib: None,
            stream: None,
            removed: false,
        };
        let text = conf(&placed.path());
        placed.write_new(jtrace_format::AGENT_CONFIG_FILE, 0o400, |f| {
            f.write_all(text.as_bytes())
        })?;
        if let Some(agent) = agent {
            placed.place_library(agent)?;
        }
        Ok(placed)
    }

    /// The directory's path as the JVM sees it.
    pub(crate) fn path(&self) -> String {
        format!("/tmp/{}", self.name)
    }

    /// The placed library's path as the JVM sees it.
    pub(crate) fn library(&self) -> String {
        format!("{}/{LIB_NAME}", self.path())
    }

    /// A path by which jtrace reaches the placed library's inode (for the
    /// uprobes on the agent's announcement functions), while this lives.
    pub(crate) fn library_for_probes(&self) -> Option<PathBuf> {
        self.lib.as_ref().map(|l| crate::proc_root::fd_path(&l.file))
    }

    /// The agent's options: the directory's identity (the inode the JVM
    /// sees too) and its configuration file.
    pub(crate) fn agent_options(&self) -> anyhow::Result<String> {
        let st = rustix::fs::fstat(&self.dir)?;
        Ok(format!(
            "dir={}:{},config={}/{}",
            st.st_dev,
            st.st_ino,
            self.path(),
            jtrace_format::AGENT_CONFIG_FILE
        ))
    }

    /// Creates the new file `name` (mode `mode`) as the JVM's user, fills
    /// it with `fill`, and returns it (open read-write: the inode written).
    fn write_new(
        &self,
        name: &str,
        mode: u32,
        fill: impl FnOnce(&mut File) -> std::io::Result<()>,
    ) -> anyhow::Result<File> {
        let fd = self.user.run_as(|| {
            Ok(open_in(
                &self.dir,
                name,
                OFlags::RDWR | OFlags::CREATE | OFlags::EXCL,
                mode,
            )?)
        });
        let mut f = File::from(fd.with_context(|| format!("cannot create {}/{name} in the container", self.path()))?);
        fill(&mut f).with_context(|| format!("cannot write {}/{name} in the container", self.path()))?;
        Ok(f)
    }

    /// Copies `agent` in, makes the copy immutable where the file system
    /// lets root, and notes its identity as the JVM's mapping will show it
    /// (all through the descriptor it was written through: a file put at
    /// its name meanwhile is not taken for it).
    fn place_library(&mut self, agent: &File) -> anyhow::Result<()> {
        let file = self.write_new(LIB_NAME, 0o500, |f| copy_file(agent, f))?;
        set_immutable(&file, true);
        let maps_id = maps_id(&file).context("cannot map the agent's copy")?;
        self.lib = Some(PlacedLib { file, maps_id });
        Ok(())
    }

    /// After the JVM loaded the library (`loaded`: it said so): checks that
    /// what it maps under the library's name is the copy jtrace wrote.
    pub(crate) fn check_loaded(&self, loaded: bool) -> anyhow::Result<()> {
        let Some(lib) = &self.lib else { return Ok(()) };
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", self.pid)).unwrap_or_default();
        let suffix = format!("/{}/{LIB_NAME}", self.name);
        let mut ours = false;
        for m in maps.lines().filter_map(MapLine::parse) {
            if m.id == lib.maps_id {
                ours = true;
            } else if m.path.ends_with(&suffix) {
                bail!(
                    "the agent library jtrace placed at {} in the container was replaced before the JVM {} \
                     loaded it (the JVM maps device and inode {}, jtrace wrote {}): code that is not jtrace's \
                     runs in the JVM; not tracing it",
                    self.library(),
                    self.pid,
                    m.id,
                    lib.maps_id
                );
            }
        }
        if loaded && !ours {
            bail!(
                "the JVM {} says it loaded the agent, but it does not map the library jtrace placed at {}: \
                 it was replaced; not tracing it",
                self.pid,
                self.library()
            );
        }
        Ok(())
    }

    /// Removes the library once the JVM has it mapped.
    pub(crate) fn release_library(&mut self) {
        if let Some(lib) = self.lib.take() {
            set_immutable(&lib.file, false);
            let _ = self
                .user
                .run_as(|| Ok(rustix::fs::unlinkat(&self.dir, LIB_NAME, AtFlags::empty())?));
        }
    }

    /// The first bytes of the agent's stream `name`, which is from now on
    /// held open; None while it is not there, or is not a regular file of
    /// the JVM's user with one link.
    pub(crate) fn stream_head(&mut self, name: &str) -> Option<Vec<u8>> {
        if self.stream.is_none() {
            let f = File::from(open_in(&self.dir, name, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY, 0).ok()?);
            let st = rustix::fs::fstat(&f).ok()?;
            let regular = FileType::from_raw_mode(st.st_mode) == FileType::RegularFile;
            if !regular || st.st_uid != self.user.uid.as_raw() || st.st_nlink != 1 {
                return None;
            }
            self.stream = Some((name.to_string(), f));
        }
        let (_, f) = self.stream.as_ref()?;
        let mut buf = vec![0u8; HEAD_BYTES];
        let n = f.read_at(&mut buf, 0).ok()?;
        buf.truncate(n);
        Some(buf)
    }

    /// Copies the agent's stream `name` into `trace` (as
    /// [`TraceDir::create_file`] creates files) within the free-space floor
    /// `min_free`; what to warn of, if anything.
    pub(crate) fn collect_into(&mut self, trace: &TraceDir, name: &str, min_free: u64) -> Option<String> {
        self.collect_as(trace, name, name, min_free)
    }

    /// [`ContainerDir::collect_into`], the copy named `dest` in the trace.
    pub(crate) fn collect_as(&mut self, trace: &TraceDir, name: &str, dest: &str, min_free: u64) -> Option<String> {
        self.stream_head(name)?;
        let (_, src) = self.stream.as_ref()?;
        let copied = trace
            .create_file(dest)
            .and_then(|mut dst| copy_stream(src, &mut dst, min_free));
        match copied {
            Ok(c) => c.stopped.map(|why| {
                format!(
                    "the copy of {name} from the container stopped after {} MiB: {why}",
                    c.bytes >> 20
                )
            }),
            Err(e) => Some(format!("{name} was not copied from the container: {e:#}")),
        }
    }

    /// Removes everything in the directory, then the directory; says on
    /// stderr what could not be removed.
    pub(crate) fn remove(mut self) {
        self.remove_all();
    }

    fn remove_all(&mut self) {
        if std::mem::replace(&mut self.removed, true) {
            return;
        }
        self.release_library();
        self.stream = None;
        if let Ok(lib) = open_in(&self.dir, LIB_NAME, OFlags::RDONLY | OFlags::NONBLOCK, 0) {
            set_immutable(&lib, false);
        }
        let left = self
            .user
            .run_as(|| Ok(empty_and_remove(&self.tmp, &self.name, &self.dir)));
        for w in left.unwrap_or_else(|e| vec![format!("{e:#}")]) {
            eprintln!("jtrace: in the container of JVM {}: {w}", self.pid);
        }
    }
}

impl Drop for ContainerDir {
    fn drop(&mut self) {
        self.remove_all();
    }
}

/// Makes the directory `name` in `tmp` (mode 0700, as `user`) and opens
/// it, checked to be the new directory of `user`.
fn make_dir(tmp: &OwnedFd, name: &str, user: &User) -> anyhow::Result<OwnedFd> {
    let uid = user.uid.as_raw();
    rustix::fs::mkdirat(tmp, name, rustix::fs::Mode::from_raw_mode(0o700))
        .with_context(|| format!("cannot create /tmp/{name} in the JVM's /tmp as uid {uid}"))?;
    let dir = open_in(tmp, name, OFlags::RDONLY | OFlags::DIRECTORY, 0);
    let checked = dir.map_err(anyhow::Error::from).and_then(|d| {
        let st = rustix::fs::fstat(&d)?;
        if st.st_uid != uid {
            bail!("it was replaced as it was made");
        }
        Ok(d)
    });
    checked.map_err(|e| {
        let _ = rustix::fs::unlinkat(tmp, name, AtFlags::REMOVEDIR);
        e.context(format!("cannot open /tmp/{name} in the JVM's /tmp"))
    })
}

/// Unlinks every entry of `dir` (never following one), then the directory
/// (by its name `name` in `tmp` if that is still it, else by the name it
/// was moved to in `tmp`); what was left.
fn empty_and_remove(tmp: &OwnedFd, name: &str, dir: &OwnedFd) -> Vec<String> {
    let mut left = Vec::new();
    // Listed first: unlinking while reading the directory may skip names.
    let names: Vec<std::ffi::CString> = rustix::fs::Dir::read_from(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_owned())
        .filter(|n| n.to_bytes() != b"." && n.to_bytes() != b"..")
        .collect();
    for n in &names {
        if let Err(err) = rustix::fs::unlinkat(dir, n, AtFlags::empty()) {
            left.push(format!("cannot remove {}/{}: {err}", name, n.to_string_lossy()));
        }
    }
    let Ok(me) = rustix::fs::fstat(dir) else {
        left.push(format!("cannot look at /tmp/{name}"));
        return left;
    };
    if me.st_nlink == 0 {
        // Removed with the container (it ended with its JVM).
        return left;
    }
    let is_me = |n: &std::ffi::CStr| {
        rustix::fs::statat(tmp, n, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| (st.st_dev, st.st_ino) == (me.st_dev, me.st_ino))
    };
    let cname = std::ffi::CString::new(name).unwrap_or_default();
    let at = if is_me(&cname) {
        Some(cname)
    } else {
        // Moved within /tmp (by the container's root): found by its inode.
        rustix::fs::Dir::read_from(tmp)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_owned())
            .find(|n| is_me(n))
    };
    match at {
        Some(n) => {
            if let Err(e) = rustix::fs::unlinkat(tmp, &n, AtFlags::REMOVEDIR) {
                left.push(format!("cannot remove /tmp/{}: {e}", n.to_string_lossy()));
            }
        }
        None => left.push(format!("/tmp/{name} was moved out of /tmp; left where it is")),
    }
    left
}

/// One line of /proc/PID/maps: device and inode, and path.
struct MapLine {
    id: String,
    range: String,
    path: String,
}

impl MapLine {
    fn parse(line: &str) -> Option<MapLine> {
        let mut f = line.splitn(6, ' ');
        let range = f.next()?;
        let (_perms, _offset, dev, inode) = (f.next()?, f.next()?, f.next()?, f.next()?);
        let path = f.next().unwrap_or("").trim_start();
        Some(MapLine {
            id: format!("{dev} {inode}"),
            range: range.to_string(),
            path: path.strip_suffix(" (deleted)").unwrap_or(path).to_string(),
        })
    }
}

/// The jtrace agent that process `pid` maps already, loaded by an earlier
/// session from a session directory: its path as the JVM knows it (the
/// name it is loaded by again), and the mapped file
/// (`/proc/PID/map_files/…`, whatever the path has become).
pub(crate) fn mapped_agent(pid: u32) -> Option<(String, PathBuf)> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    maps.lines().filter_map(MapLine::parse).find_map(|m| {
        let (dir, file) = m.path.rsplit_once('/')?;
        let session = dir.rsplit('/').next()?;
        (file == LIB_NAME && is_session_name(session)).then(|| {
            (
                m.path.clone(),
                PathBuf::from(format!("/proc/{pid}/map_files/{}", m.range)),
            )
        })
    })
}

/// The session directories process `pid` has files of open or mapped
/// (as it sees their paths): those of a session whose jtrace was killed.
pub(crate) fn open_session_dirs(pid: u32) -> Vec<String> {
    let mut paths: Vec<String> = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap_or_default()
        .lines()
        .filter_map(MapLine::parse)
        .map(|m| m.path)
        .collect();
    for e in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
    {
        if let Ok(p) = std::fs::read_link(e.path()) {
            let p = p.to_string_lossy();
            paths.push(p.strip_suffix(" (deleted)").unwrap_or(&p).to_string());
        }
    }
    let mut dirs: Vec<String> = paths
        .iter()
        .filter_map(|p| p.rsplit_once('/').map(|(d, _)| d))
        .filter(|d| d.rsplit('/').next().is_some_and(is_session_name) && d.starts_with('/'))
        .map(str::to_string)
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// Removes the session directory `path` (as the JVM sees it) that a
/// killed jtrace left in the JVM's file system, if it is the JVM's user's.
pub(crate) fn remove_left_dir(jvm: &Jvm, path: &str) -> anyhow::Result<()> {
    let (parent, name) = path.rsplit_once('/').context("not a path")?;
    let tmp = ProcRoot::open(jvm.pid)?.open_dir(if parent.is_empty() { "/" } else { parent })?;
    let dir = open_in(&tmp, name, OFlags::RDONLY | OFlags::DIRECTORY, 0)
        .with_context(|| format!("cannot open {path} in the container"))?;
    if rustix::fs::fstat(&dir)?.st_uid != jvm.user.uid.as_raw() {
        bail!("{path} does not belong to the JVM's user; left as it is");
    }
    let placed = ContainerDir {
        pid: jvm.pid,
        user: jvm.user.clone(),
        tmp,
        name: name.to_string(),
        dir,
        lib: None,
        stream: None,
        removed: false,
    };
    placed.remove();
    Ok(())
}

fn is_session_name(n: &str) -> bool {
    n.strip_prefix(DIR_PREFIX)
        .is_some_and(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Whether the files `a` and `b` hold the same bytes.
pub(crate) fn same_bytes(a: &File, b: &File) -> std::io::Result<bool> {
    let (mut x, mut y) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    let mut at = 0u64;
    loop {
        let (n, m) = (read_full(a, &mut x, at)?, read_full(b, &mut y, at)?);
        if n != m || x[..n] != y[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
        at += n as u64;
    }
}

fn read_full(f: &File, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], at + done as u64)? {
            0 => break,
            n => done += n,
        }
    }
    Ok(done)
}

/// Copies all of `src` (from its start) to `dst`.
fn copy_file(src: &File, dst: &mut File) -> std::io::Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    loop {
        let n = read_full(src, &mut buf, at)?;
        if n == 0 {
            return Ok(());
        }
        dst.write_all(&buf[..n])?;
        at += n as u64;
    }
}

/// Sets or clears FS_IMMUTABLE_FL on `file` (as root); whether it is so
/// now. Best effort: not every file system has the flag, and a rootless
/// container's overlay refuses it.
fn set_immutable(file: &impl AsFd, on: bool) -> bool {
    let Ok(flags) = rustix::fs::ioctl_getflags(file) else {
        return false;
    };
    let want = if on {
        flags | IFlags::IMMUTABLE
    } else {
        flags - IFlags::IMMUTABLE
    };
    want == flags || rustix::fs::ioctl_setflags(file, want).is_ok()
}

/// The device and inode of `file` as /proc/PID/maps shows a mapping of it:
/// read from a mapping of jtrace's own (so that both sides are the
/// kernel's same view, overlay file systems included).
fn maps_id(file: &File) -> Option<String> {
    use std::os::fd::AsRawFd;
    const LEN: usize = 4096;
    // SAFETY: a private read-only mapping of one page, never read, unmapped below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            LEN,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return None;
    }
    let start = format!("{:x}-", addr as usize);
    let id = std::fs::read_to_string("/proc/self/maps").ok().and_then(|maps| {
        maps.lines()
            .filter(|l| l.starts_with(&start))
            .find_map(MapLine::parse)
            .map(|m| m.id)
    });
    // SAFETY: the mapping made above, of that length.
    unsafe { libc::munmap(addr, LEN) };
    id
}

fn random_u64() -> anyhow::Result<u64> {
    let mut b = [0u8; 8];
    // SAFETY: `b` is valid for 8 bytes of writes.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        bail!("cannot get random bytes: {}", std::io::Error::last_os_error());
    }
    Ok(u64::from_ne_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_and_session_names() {
        let m = MapLine::parse(
            "7f12e1e00000-7f12e2051000 r--p 00000000 00:29 868477                     /tmp/.jtrace-00112233aabbccdd/libjtrace_agent.so (deleted)",
        )
        .unwrap();
        assert_eq!(m.id, "00:29 868477");
        assert_eq!(m.range, "7f12e1e00000-7f12e2051000");
        assert_eq!(m.path, "/tmp/.jtrace-00112233aabbccdd/libjtrace_agent.so");
        assert_eq!(MapLine::parse("7f00-7f10 rw-p 00000000 00:00 0 ").unwrap().path, "");
        assert!(is_session_name(".jtrace-00112233aabbccdd"));
        assert!(!is_session_name(".jtrace-0011"));
        assert!(!is_session_name(".jtrace-00112233aabbccdg"));
    }

    /// jtrace's own mapping of a file shows its inode.
    #[test]
    fn a_mapping_shows_the_files_inode() {
        let exe = File::open(std::env::current_exe().unwrap()).unwrap();
        let id = maps_id(&exe).unwrap();
        let ino = rustix::fs::fstat(&exe).unwrap().st_ino;
        assert!(id.ends_with(&format!(" {ino}")), "{id}");
        assert!(same_bytes(&exe, &File::open(std::env::current_exe().unwrap()).unwrap()).unwrap());
        let other = File::open("/proc/self/status").unwrap();
        assert!(!same_bytes(&exe, &other).unwrap());
    }
}
