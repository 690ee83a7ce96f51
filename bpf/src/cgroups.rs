//! The CPU quota (CFS bandwidth) of the traced processes' cgroups: read as
//! root when a traced process execs (an attached one: when recording
//! starts), with each quota's cpu.stat then, and the cpu.stat again when
//! recording ends, so that the trace says how often a quota throttled them.
//!
//! The files are the kernel's, under the cgroup file system's mount: the
//! path comes from `/proc/<pid>/cgroup`, and every file is opened beneath
//! the mount with no symbolic link followed and no other file system
//! crossed, then checked to be a cgroup file (docs/SECURITY.md), so a
//! cgroup name cannot lead root's reads into a user's files.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;

use rustix::fs::{Mode, OFlags, ResolveFlags};

/// `statfs.f_type` of cgroup v1 and v2 files.
const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// A cgroup's CPU quota: `quota_us` of CPU time per `period_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// CPU time allowed per period (µs).
    pub quota_us: u64,
    /// The period (µs).
    pub period_us: u64,
}

/// A cgroup's bandwidth counters (cpu.stat).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuStat {
    /// Periods with runnable tasks (`nr_periods`).
    pub periods: u64,
    /// Periods in which the quota ran out (`nr_throttled`).
    pub throttled_periods: u64,
    /// Time its run queues were throttled, summed over CPUs (ns).
    pub throttled_ns: u64,
}

/// A cgroup with a CPU quota, and its counters over the recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuLimit {
    /// The cgroup, as its hierarchy names it (`/jtrace-test-1`).
    pub path: String,
    /// In the cgroup v2 hierarchy (else v1's `cpu` one).
    pub v2: bool,
    /// Its quota.
    pub quota: Quota,
    /// Its counters when a traced process was first seen in it.
    pub start: CpuStat,
    /// Its counters when recording ended (or its last reading, if it was
    /// gone by then).
    pub end: CpuStat,
}

/// A traced process's cgroup and the quotas over it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessCgroup {
    /// The process.
    pub pid: u32,
    /// Its cgroup in the hierarchy of the CPU controller (`/` the root).
    pub path: String,
    /// cgroup v2 (else v1).
    pub v2: bool,
    /// Paths of the cgroups with a CPU quota among it and its ancestors,
    /// innermost first (keys of the limits).
    pub limited_by: Vec<String>,
}

/// The CPU controller's hierarchy: where it is mounted (an open directory)
/// and how its files are named.
pub(crate) struct Hierarchy {
    pub(crate) dir: OwnedFd,
    pub(crate) v2: bool,
}

/// What the recorder found of the traced processes' cgroups.
#[derive(Default)]
pub(crate) struct Cgroups {
    /// The v1 hierarchy with the `cpu` controller, the v2 one: opened on
    /// first use (None inside: not mounted).
    hierarchies: Option<(Option<Hierarchy>, Option<Hierarchy>)>,
    processes: BTreeMap<u32, ProcessCgroup>,
    /// By (v2, path).
    limits: BTreeMap<(bool, String), CpuLimit>,
}

impl Cgroups {
    /// Process `pid` exec'd (or is attached to): its cgroup now, and the
    /// quotas over it, read now unless read before.
    pub(crate) fn note(&mut self, pid: u32) {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            return;
        };
        let (v1, v2) = self.hierarchies.get_or_insert_with(open_hierarchies);
        let Some((h, path)) = cpu_cgroup(&text, v1.is_some(), v2.is_some()).and_then(|(is_v2, path)| {
            let h = if is_v2 { v2.as_ref() } else { v1.as_ref() };
            Some((h?, path))
        }) else {
            return;
        };
        let mut limited_by = Vec::new();
        for p in ancestry(&path) {
            if let std::collections::btree_map::Entry::Vacant(e) = self.limits.entry((h.v2, p.clone())) {
                let Some(quota) = read_quota(h, &p) else { continue };
                let stat = read_stat(h, &p).unwrap_or_default();
                e.insert(CpuLimit {
                    path: p.clone(),
                    v2: h.v2,
                    quota,
                    start: stat,
                    end: stat,
                });
            }
            limited_by.push(p);
        }
        let pc = ProcessCgroup {
            pid,
            path,
            v2: h.v2,
            limited_by,
        };
        self.processes.insert(pid, pc);
    }

    /// Recording ends: the counters of every quota read again; the
    /// processes and the quotas over them.
    pub(crate) fn finish(mut self) -> (Vec<ProcessCgroup>, Vec<CpuLimit>) {
        if let Some((v1, v2)) = &self.hierarchies {
            for ((is_v2, path), limit) in self.limits.iter_mut() {
                let h = if *is_v2 { v2.as_ref() } else { v1.as_ref() };
                if let Some(s) = h.and_then(|h| read_stat(h, path)) {
                    limit.end = s;
                }
            }
        }
        (
            self.processes.into_values().collect(),
            self.limits.into_values().collect(),
        )
    }
}

/// The cgroup v1 hierarchy of the `cpu` controller and the v2 one, from
/// this process's mount table.
pub(crate) fn open_hierarchies() -> (Option<Hierarchy>, Option<Hierarchy>) {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let (mut v1, mut v2) = (None, None);
    for line in text.lines() {
        // id parent major:minor root mount-point options ... - fstype source super-options
        let Some((head, tail)) = line.split_once(" - ") else {
            continue;
        };
        let head: Vec<&str> = head.split(' ').collect();
        let tail: Vec<&str> = tail.split(' ').collect();
        let (Some(&root), Some(&point), Some(&fstype)) = (head.get(3), head.get(4), tail.first()) else {
            continue;
        };
        // A mount of a sub-tree would shift every path: not used.
        if root != "/" {
            continue;
        }
        let cpu = tail.get(2).is_some_and(|o| o.split(',').any(|x| x == "cpu"));
        if fstype == "cgroup" && cpu && v1.is_none() {
            v1 = open_dir(point).map(|dir| Hierarchy { dir, v2: false });
        } else if fstype == "cgroup2" && v2.is_none() {
            v2 = open_dir(point).map(|dir| Hierarchy { dir, v2: true });
        }
    }
    (v1, v2)
}

/// A mount point (octal escapes as mountinfo writes them), opened.
fn open_dir(point: &str) -> Option<OwnedFd> {
    let path = unescape(point);
    let fd = rustix::fs::open(
        path.as_str(),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    is_cgroup_fs(&fd).then_some(fd)
}

/// mountinfo's `\040`-style escapes undone.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn is_cgroup_fs(fd: &OwnedFd) -> bool {
    rustix::fs::fstatfs(fd).is_ok_and(|s| {
        // f_type's integer type differs by architecture.
        #[allow(clippy::unnecessary_cast)]
        let t = s.f_type as i64;
        t == CGROUP_SUPER_MAGIC || t == CGROUP2_SUPER_MAGIC
    })
}

/// The cgroup of a `/proc/<pid>/cgroup` text that the CPU controller
/// governs: its v1 `cpu` line if that hierarchy is mounted, else its v2
/// line; (v2, path). A path that leaves the hierarchy's root (`..`: this
/// process is in a cgroup namespace that does not hold it) is none.
fn cpu_cgroup(text: &str, have_v1: bool, have_v2: bool) -> Option<(bool, String)> {
    let mut v2 = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if path.split('/').any(|c| c == "..") || !path.starts_with('/') {
            continue;
        }
        if have_v1 && controllers.split(',').any(|c| c == "cpu") {
            return Some((false, path.to_string()));
        }
        if id == "0" && controllers.is_empty() {
            v2 = Some(path.to_string());
        }
    }
    v2.filter(|_| have_v2).map(|p| (true, p))
}

/// `path` and its ancestors, innermost first, the root (`/`) last.
fn ancestry(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut p = path.trim_end_matches('/').to_string();
    while !p.is_empty() {
        out.push(p.clone());
        p.truncate(p.rfind('/').unwrap_or(0));
    }
    out.push("/".to_string());
    out
}

/// A file of cgroup `path` (beneath the hierarchy's mount: no symbolic
/// link, no other file system), at most 4 KiB of it.
fn read_file(h: &Hierarchy, path: &str, name: &str) -> Option<String> {
    let fd = open_beneath(h, path, name)?;
    if !is_cgroup_fs(&fd) {
        return None;
    }
    let mut text = String::new();
    File::from(fd).take(4096).read_to_string(&mut text).ok()?;
    Some(text)
}

/// File `name` of cgroup `path`, opened beneath the hierarchy's mount.
fn open_beneath(h: &Hierarchy, path: &str, name: &str) -> Option<OwnedFd> {
    let rel = format!("{}/{name}", path.trim_matches('/'));
    rustix::fs::openat2(
        &h.dir,
        rel.trim_start_matches('/'),
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_XDEV,
    )
    .ok()
}

/// The quota of cgroup `path`, if it has one.
fn read_quota(h: &Hierarchy, path: &str) -> Option<Quota> {
    if h.v2 {
        // "max 100000", or "20000 100000".
        let text = read_file(h, path, "cpu.max")?;
        let mut f = text.split_whitespace();
        let (quota, period) = (f.next()?, f.next()?);
        return Some(Quota {
            quota_us: quota.parse().ok()?,
            period_us: period.parse().ok()?,
        });
    }
    let quota: i64 = read_file(h, path, "cpu.cfs_quota_us")?.trim().parse().ok()?;
    let period: u64 = read_file(h, path, "cpu.cfs_period_us")?.trim().parse().ok()?;
    (quota > 0).then_some(Quota {
        quota_us: quota as u64,
        period_us: period,
    })
}

/// The counters of cgroup `path`.
fn read_stat(h: &Hierarchy, path: &str) -> Option<CpuStat> {
    parse_stat(&read_file(h, path, "cpu.stat")?, h.v2)
}

/// cpu.stat's bandwidth counters: `throttled_time` (ns) in v1,
/// `throttled_usec` in v2.
fn parse_stat(text: &str, v2: bool) -> Option<CpuStat> {
    let mut s = CpuStat::default();
    let mut seen = false;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(' ') else { continue };
        let Ok(v) = v.trim().parse::<u64>() else { continue };
        match (k, v2) {
            ("nr_periods", _) => {
                s.periods = v;
                seen = true;
            }
            ("nr_throttled", _) => s.throttled_periods = v,
            ("throttled_time", false) => s.throttled_ns = v,
            ("throttled_usec", true) => s.throttled_ns = v.saturating_mul(1000),
            _ => {}
        }
    }
    seen.then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_controllers_cgroup_of_a_process() {
        let hybrid = "12:cpu,cpuacct:/jt/a\n4:memory:/x\n0::/user.slice\n";
        assert_eq!(cpu_cgroup(hybrid, true, true), Some((false, "/jt/a".into())));
        assert_eq!(cpu_cgroup(hybrid, false, true), Some((true, "/user.slice".into())));
        assert_eq!(cpu_cgroup("1:cpuacct:/a\n", true, false), None);
        assert_eq!(cpu_cgroup("0::/../elsewhere\n", false, true), None);
        assert_eq!(ancestry("/a/b"), ["/a/b", "/a", "/"]);
        assert_eq!(ancestry("/"), ["/"]);
        assert_eq!(unescape("/sys/fs/cg\\040roup"), "/sys/fs/cg roup");
    }

    #[test]
    fn cpu_stat_of_both_versions() {
        let v1 = "nr_periods 15\nnr_throttled 11\nthrottled_time 853483821\nnr_bursts 0\n";
        let want = CpuStat {
            periods: 15,
            throttled_periods: 11,
            throttled_ns: 853_483_821,
        };
        assert_eq!(parse_stat(v1, false), Some(want));
        let v2 = "usage_usec 9\nnr_periods 15\nnr_throttled 11\nthrottled_usec 853483\n";
        assert_eq!(parse_stat(v2, true).unwrap().throttled_ns, 853_483_000);
        assert_eq!(parse_stat("usage_usec 1\n", true), None);
    }

    /// Root never reads a file the cgroup path leads to through a
    /// symbolic link, outside the mount, or not on a cgroup file system.
    #[test]
    fn only_cgroup_files_beneath_the_mount_are_read() {
        let base = std::env::temp_dir().join(format!("jtrace-cgroups-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("mnt/a")).unwrap();
        std::fs::write(base.join("secret"), "nr_periods 1\n").unwrap();
        std::fs::write(base.join("mnt/a/cpu.stat"), "nr_periods 1\n").unwrap();
        std::os::unix::fs::symlink(base.join("secret"), base.join("mnt/a/cpu.max")).unwrap();
        std::os::unix::fs::symlink(&base, base.join("mnt/up")).unwrap();
        let dir = rustix::fs::open(base.join("mnt"), OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        let h = Hierarchy { dir, v2: true };
        // A plain file beneath the mount opens, but is not a cgroup file.
        assert!(open_beneath(&h, "/a", "cpu.stat").is_some());
        assert_eq!(read_file(&h, "/a", "cpu.stat"), None);
        // A symbolic link, to a file or a directory; a path that climbs out.
        assert!(open_beneath(&h, "/a", "cpu.max").is_none());
        assert!(open_beneath(&h, "/up", "secret").is_none());
        assert!(open_beneath(&h, "/..", "secret").is_none());
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// This process's own cgroup, read as the recorder reads a traced
    /// one's (as root: the files are root's).
    #[test]
    #[cfg_attr(
        not(feature = "system-tests"),
        ignore = "needs root and a mounted cgroup file system"
    )]
    fn this_process_has_a_cgroup() {
        let mut c = Cgroups::default();
        c.note(std::process::id());
        let (procs, _) = c.finish();
        assert_eq!(procs.len(), 1, "no cgroup found for this process");
        assert!(procs[0].path.starts_with('/'));
    }
}
