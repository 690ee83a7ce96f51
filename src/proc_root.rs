//! A process's own view of the file system: its root directory
//! (`/proc/PID/root`) and paths resolved inside it by the kernel.
//!
//! A JVM in a container has a root of its own, and whoever is root in that
//! container can plant links there: an absolute link (its /tmp → /etc, say)
//! that a walk of the string `/proc/PID/root/tmp/…` on the host would
//! follow onto the host's own files. So a path in the process's tree is
//! never joined onto `/proc/PID/root`: it is opened with openat2 from a
//! descriptor of that root, `RESOLVE_IN_ROOT` (links resolve inside it, as
//! they do for the process) and `RESOLVE_NO_MAGICLINKS` (no /proc link
//! leads out of it); names below it are opened relative to directory
//! descriptors, one component at a time, without following links.

use anyhow::Context;
use rustix::fs::{Mode, OFlags, ResolveFlags, CWD};
use rustix::io::Errno;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;

/// The root directory of a process, held open.
pub(crate) struct ProcRoot {
    fd: OwnedFd,
    pid: u32,
}

impl ProcRoot {
    /// Opens the root of process `pid` (the kernel follows the /proc link
    /// to the directory itself; nothing of the process's tree is walked).
    pub(crate) fn open(pid: u32) -> anyhow::Result<ProcRoot> {
        let fd = rustix::fs::openat(
            CWD,
            format!("/proc/{pid}/root"),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .with_context(|| format!("cannot open the root directory of process {pid}"))?;
        Ok(ProcRoot { fd, pid })
    }

    /// Opens the directory `path` as the process sees it (links resolve
    /// inside its root), for reading and for `*at` calls.
    pub(crate) fn open_dir(&self, path: &str) -> anyhow::Result<OwnedFd> {
        self.open_path(path, OFlags::RDONLY | OFlags::DIRECTORY)
            .with_context(|| format!("cannot open {path} of process {}", self.pid))
    }

    /// Opens `path` as the process sees it with `flags` (plus CLOEXEC).
    pub(crate) fn open_path(&self, path: &str, flags: OFlags) -> rustix::io::Result<OwnedFd> {
        let resolve = ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS;
        retry_again(|| rustix::fs::openat2(&self.fd, path, flags | OFlags::CLOEXEC, Mode::empty(), resolve))
    }

    /// The process's /tmp, where HotSpot keeps its attach socket.
    pub(crate) fn tmp(&self) -> anyhow::Result<OwnedFd> {
        self.open_dir("/tmp")
    }

    /// Whether this is jtrace's own root too (same device and inode).
    pub(crate) fn is_ours(&self) -> bool {
        let ours = rustix::fs::stat("/");
        let theirs = rustix::fs::fstat(&self.fd);
        matches!((ours, theirs), (Ok(a), Ok(b)) if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino))
    }
}

/// Opens the single name `name` in the directory `dir` with `flags`,
/// never following a link (at it or anywhere) and never leaving `dir`.
pub(crate) fn open_in(dir: &impl AsFd, name: &str, flags: OFlags, mode: u32) -> rustix::io::Result<OwnedFd> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(Errno::INVAL);
    }
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    retry_again(|| {
        rustix::fs::openat2(
            dir,
            name,
            flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
            resolve,
        )
    })
}

/// A path to the file open as `fd` that the kernel resolves from the
/// descriptor (`/proc/self/fd/N`), for the calls that take only a path
/// (connect(2) of a Unix socket, the kernel's uprobes). Valid while `fd`
/// is open, in every thread of jtrace.
pub(crate) fn fd_path(fd: &impl AsFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd()))
}

/// openat2 fails with EAGAIN when a rename elsewhere raced with a lookup
/// it must keep inside the root: it is tried again.
fn retry_again(mut open: impl FnMut() -> rustix::io::Result<OwnedFd>) -> rustix::io::Result<OwnedFd> {
    let mut tries = 0;
    loop {
        match open() {
            Err(Errno::AGAIN) if tries < 100 => tries += 1,
            r => return r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// A tree standing in for a container's root: an absolute link in it
    /// resolves inside it, never to jtrace's own directory of that name.
    #[test]
    fn absolute_links_resolve_inside_the_root() {
        let base = std::env::temp_dir().join(format!("jtrace-procroot-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("root");
        std::fs::create_dir_all(root.join("real-tmp")).unwrap();
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::os::unix::fs::symlink("/real-tmp", root.join("tmp")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("real-tmp/up")).unwrap();
        let r = ProcRoot {
            fd: rustix::fs::open(&root, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap(),
            pid: 0,
        };
        let tmp = r.tmp().unwrap();
        let want = std::fs::metadata(root.join("real-tmp")).unwrap().ino();
        assert_eq!(rustix::fs::fstat(&tmp).unwrap().st_ino, want);
        let etc = r.open_dir("/tmp/up").unwrap();
        assert_eq!(
            rustix::fs::fstat(&etc).unwrap().st_ino,
            std::fs::metadata(root.join("etc")).unwrap().ino(),
            "/tmp/up left the root"
        );
        // One name at a time: a link is not followed, `..` not taken.
        assert!(open_in(&tmp, "up", OFlags::RDONLY, 0).is_err());
        assert!(open_in(&tmp, "..", OFlags::RDONLY, 0).is_err());
        assert!(open_in(&tmp, "a/b", OFlags::RDONLY, 0).is_err());
        assert!(!r.is_ours());
        let _ = std::fs::remove_dir_all(&base);
    }
}
