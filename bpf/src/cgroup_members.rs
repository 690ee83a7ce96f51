//! The processes of a cgroup subtree (`record --cgroup`, `attach
//! --cgroup`): every `cgroup.procs` beneath the cgroup, read as root in the
//! hierarchy of the CPU controller (the one the report's `cgroup` paths
//! are in), and what identifies the subtree to the BPF side, which follows
//! the processes that enter it while recording ([`CgroupSubtree`]).
//!
//! The path is the invoking user's, and a delegated subtree is theirs to
//! shape: every directory is opened beneath the mount with no symbolic
//! link followed and no other file system crossed, and only cgroup files
//! are read (docs/SECURITY.md), so the path cannot lead root's reads
//! anywhere else.

use crate::cgroups::{is_cgroup_fs, open_hierarchies, Hierarchy};
use anyhow::{bail, Context};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use std::collections::BTreeSet;
use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;

/// Bounds on what one subtree may make jtrace read.
const MAX_CGROUPS: usize = 100_000;
const MAX_DEPTH: usize = 64;
const MAX_PROCS_BYTES: u64 = 16 << 20;

/// The processes in cgroup `path` and its descendants (`path` as in
/// `/proc/PID/cgroup`, e.g. `/machine.slice/libpod-<id>.scope`, in the v1
/// `cpu` hierarchy where it is mounted, else in v2), smallest pid first.
/// An error if no such cgroup exists there.
pub fn cgroup_members(path: &str) -> anyhow::Result<Vec<u32>> {
    CgroupSubtree::open(path)?.members()
}

/// A cgroup subtree, held open: its processes, read again at will
/// ([`CgroupSubtree::members`]), and its identity in the kernel, by which
/// the recorder follows the processes that enter it
/// ([`crate::RecorderConfig::cgroup`]).
#[derive(Debug)]
pub struct CgroupSubtree {
    /// Its path, as given.
    pub path: String,
    /// In the cgroup v2 hierarchy (else v1's `cpu` one).
    pub v2: bool,
    /// The hierarchy's id (`/proc/PID/cgroup`'s first field: 0 for v2).
    pub hierarchy: u32,
    /// The cgroup's id: its kernfs node's, the inode number of its directory.
    pub id: u64,
    /// Its depth below the hierarchy's root (`/` is 0).
    pub level: u32,
    top: OwnedFd,
}

impl CgroupSubtree {
    /// Opens cgroup `path` (as [`cgroup_members`] names it); an error if
    /// no such cgroup exists.
    pub fn open(path: &str) -> anyhow::Result<CgroupSubtree> {
        if !path.starts_with('/') || path.split('/').any(|c| c == "..") {
            bail!("cgroup {path:?}: give its path from the hierarchy's root, as /proc/PID/cgroup shows it");
        }
        let (v1, v2) = open_hierarchies();
        let hierarchies: Vec<&Hierarchy> = [v1.as_ref(), v2.as_ref()].into_iter().flatten().collect();
        if hierarchies.is_empty() {
            bail!("no cgroup hierarchy with the cpu controller is mounted");
        }
        let Some((h, top)) = hierarchies
            .iter()
            .find_map(|h| open_dir_beneath(&h.dir, path).map(|top| (h, top)))
        else {
            let kind = |h: &Hierarchy| if h.v2 { "v2" } else { "v1 cpu" };
            let looked: Vec<&str> = hierarchies.iter().map(|h| kind(h)).collect();
            bail!("no cgroup {path} in the {} hierarchy", looked.join(" or the "));
        };
        let hierarchy = if h.v2 {
            0
        } else {
            let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
            cpu_hierarchy_id(&own).context("no cpu hierarchy in /proc/self/cgroup")?
        };
        let id = rustix::fs::fstat(&top)?.st_ino;
        Ok(CgroupSubtree {
            path: path.to_string(),
            v2: h.v2,
            hierarchy,
            id,
            level: path.split('/').filter(|c| !c.is_empty()).count() as u32,
            top,
        })
    }

    /// A second handle on the same cgroup.
    pub fn try_clone(&self) -> anyhow::Result<CgroupSubtree> {
        Ok(CgroupSubtree {
            path: self.path.clone(),
            top: rustix::io::dup(&self.top)?,
            ..*self
        })
    }

    /// The processes in the cgroup and its descendants now, smallest pid
    /// first (none once the cgroup is removed).
    pub fn members(&self) -> anyhow::Result<Vec<u32>> {
        let path = &self.path;
        let mut pids = BTreeSet::new();
        let mut stack = vec![(rustix::io::dup(&self.top)?, 0usize)];
        let mut seen = 0;
        while let Some((dir, depth)) = stack.pop() {
            seen += 1;
            if seen > MAX_CGROUPS {
                bail!("cgroup {path} has more than {MAX_CGROUPS} cgroups beneath it");
            }
            let procs = match read_procs(&dir) {
                Ok(p) => p,
                // Removed meanwhile (a container that ended): no process in it.
                Err(e) if removed(&e) => continue,
                Err(e) => return Err(e.context(format!("reading the processes of {path}"))),
            };
            for line in procs.lines() {
                if let Ok(pid) = line.trim().parse::<u32>() {
                    pids.insert(pid);
                }
            }
            if depth == MAX_DEPTH {
                continue;
            }
            for entry in rustix::fs::Dir::read_from(&dir)? {
                let entry = entry?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if entry.file_type() != rustix::fs::FileType::Directory || name == "." || name == ".." {
                    continue;
                }
                if let Some(child) = open_dir_beneath(&dir, &name) {
                    stack.push((child, depth + 1));
                }
            }
        }
        Ok(pids.into_iter().collect())
    }
}

/// Whether reading a cgroup failed because it was removed.
fn removed(e: &anyhow::Error) -> bool {
    let errno = e.downcast_ref::<rustix::io::Errno>().copied().or_else(|| {
        e.downcast_ref::<std::io::Error>()
            .map(rustix::io::Errno::from_io_error)?
    });
    matches!(errno, Some(rustix::io::Errno::NOENT | rustix::io::Errno::NODEV))
}

/// The id of the v1 hierarchy of the cpu controller in a
/// `/proc/PID/cgroup` text (`1:cpu,cpuacct:/…`).
fn cpu_hierarchy_id(text: &str) -> Option<u32> {
    text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (id, controllers) = (f.next()?, f.next()?);
        controllers.split(',').any(|c| c == "cpu").then(|| id.parse().ok())?
    })
}

/// Directory `rel` beneath `dir`, a cgroup one, or None.
fn open_dir_beneath(dir: &OwnedFd, rel: &str) -> Option<OwnedFd> {
    let rel = rel.trim_matches('/');
    let rel = if rel.is_empty() { "." } else { rel };
    let fd = rustix::fs::openat2(
        dir,
        rel,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_XDEV,
    )
    .ok()?;
    is_cgroup_fs(&fd).then_some(fd)
}

/// The `cgroup.procs` of cgroup directory `dir`, bounded.
fn read_procs(dir: &OwnedFd) -> anyhow::Result<String> {
    let fd = rustix::fs::openat2(
        dir,
        "cgroup.procs",
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_XDEV,
    )?;
    if !is_cgroup_fs(&fd) {
        bail!("cgroup.procs is not a cgroup file");
    }
    let mut text = String::new();
    File::from(fd).take(MAX_PROCS_BYTES).read_to_string(&mut text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_hierarchy_of_a_cgroup_file() {
        let v1 = "10:hugetlb:/\n2:cpuacct:/\n1:cpu:/a/b\n0::/\n";
        assert_eq!(cpu_hierarchy_id(v1), Some(1));
        assert_eq!(cpu_hierarchy_id("4:cpu,cpuacct:/x\n0::/\n"), Some(4));
        assert_eq!(cpu_hierarchy_id("3:cpuset:/\n0::/\n"), None);
    }

    /// The root of the host's hierarchy: every process, this one among them,
    /// and its identity (level 0, the inode of the mount's root).
    #[test]
    fn the_root_cgroup_holds_this_process() {
        let root = CgroupSubtree::open("/").unwrap();
        assert_eq!(root.level, 0);
        assert!(root.members().unwrap().contains(&std::process::id()));
        assert!(CgroupSubtree::open("/jtrace-no-such-cgroup").is_err());
    }
}
