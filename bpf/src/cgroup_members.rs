//! The processes of a cgroup subtree (`record --cgroup`): every
//! `cgroup.procs` beneath the cgroup, read as root in the hierarchy of the
//! CPU controller (the one the report's `cgroup` paths are in).
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
    if !path.starts_with('/') || path.split('/').any(|c| c == "..") {
        bail!("cgroup {path:?}: give its path from the hierarchy's root, as /proc/PID/cgroup shows it");
    }
    let (v1, v2) = open_hierarchies();
    let hierarchies: Vec<&Hierarchy> = [v1.as_ref(), v2.as_ref()].into_iter().flatten().collect();
    if hierarchies.is_empty() {
        bail!("no cgroup hierarchy with the cpu controller is mounted");
    }
    let Some(top) = hierarchies.iter().find_map(|h| open_dir_beneath(&h.dir, path)) else {
        let kind = |h: &Hierarchy| if h.v2 { "v2" } else { "v1 cpu" };
        let looked: Vec<&str> = hierarchies.iter().map(|h| kind(h)).collect();
        bail!("no cgroup {path} in the {} hierarchy", looked.join(" or the "));
    };
    let mut pids = BTreeSet::new();
    let mut stack = vec![(top, 0usize)];
    let mut seen = 0;
    while let Some((dir, depth)) = stack.pop() {
        seen += 1;
        if seen > MAX_CGROUPS {
            bail!("cgroup {path} has more than {MAX_CGROUPS} cgroups beneath it");
        }
        for line in read_procs(&dir)
            .with_context(|| format!("reading the processes of {path}"))?
            .lines()
        {
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
