//! What `record --cgroup` and `attach --cgroup` share: the cgroup subtree
//! they follow (its processes at the start, and whose rights decide which
//! processes entering it later are traced), what they say of those
//! joiners, and when such a recording ends: at `--duration`, at Ctrl-C, or
//! when no process is left in the subtree.
//!
//! A process that enters the subtree while recording (moved in, by a
//! write of its pid to a `cgroup.procs`: `podman exec`, `kubectl exec`;
//! on cgroup v2 also one cloned into it) is traced by the kernel recorder from the instant it
//! enters when the invoking user may trace it by its credentials alone
//! (root; or the same uid and gid and a dumpable process), else from when
//! the kernel's ptrace check for that user says so (the recorder asks it
//! within a poll, ≈ 50 ms); one that user may not trace is not recorded,
//! and said so (bpf/src/joins.rs).

use crate::session::{Session, EXIT_USAGE};
use crate::signals;
use crate::user::User;
use jtrace_bpf::{CgroupSubtree, FollowCgroup, Joined, KernelRecorder};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How often the wait looks at the joiners and the subtree.
pub(crate) const TICK: Duration = Duration::from_millis(200);

/// Opens cgroup `path` with its processes now; the error is a usage error
/// (said, exit code 2): no such cgroup, or none of its processes.
pub(crate) fn open(path: &str) -> Result<(CgroupSubtree, Vec<u32>), ExitCode> {
    let usage = |e: String| {
        eprintln!("jtrace: {e}");
        ExitCode::from(EXIT_USAGE)
    };
    let subtree = CgroupSubtree::open(path).map_err(|e| usage(format!("{e:#}")))?;
    match subtree.members() {
        Ok(pids) if pids.is_empty() => Err(usage(format!("no process in cgroup {path}"))),
        Ok(pids) => Ok((subtree, pids)),
        Err(e) => Err(usage(format!("{e:#}"))),
    }
}

/// What the kernel recorder is to follow of `subtree`: its joiners, traced
/// as far as `owner` (the invoking user) may trace them.
pub(crate) fn follow(subtree: CgroupSubtree, owner: &User) -> FollowCgroup {
    let who = owner.clone();
    FollowCgroup {
        subtree,
        admit: Box::new(move |pid| who.check_may_trace(pid).map_err(|e| format!("{e:#}"))),
    }
}

/// The name of process `pid`, for messages ("?" once it is gone).
pub(crate) fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).map_or_else(|_| "?".into(), |c| c.trim_end().to_string())
}

/// Says what became of each joiner; returns how many are recorded.
fn report(joined: &[Joined]) -> usize {
    let mut recorded = 0;
    for j in joined {
        let who = format!("process {} ({})", j.pid, comm(j.pid));
        match &j.recorded_from {
            Ok(from) if from.saturating_sub(j.entered_ns) < 1_000_000 => {
                recorded += 1;
                eprintln!("jtrace: {who} entered the cgroup; recorded from then on");
            }
            Ok(from) => {
                recorded += 1;
                eprintln!(
                    "jtrace: {who} entered the cgroup; recorded from {} ms later on (once the kernel said \
                     the invoking user may trace it)",
                    (from - j.entered_ns) / 1_000_000
                );
            }
            Err(why) => eprintln!("jtrace: {who} entered the cgroup and is NOT recorded: {why}"),
        }
    }
    recorded
}

/// Why a recording of a cgroup stopped, and how many processes joined it
/// (recorded) meanwhile.
pub(crate) struct Stopped {
    /// For the closing message.
    pub(crate) why: &'static str,
    /// Joiners recorded.
    pub(crate) joined: usize,
}

/// Waits until `duration` has passed, a stop signal came or (without a
/// duration) no process is left in `subtree`, saying what becomes of the
/// joiners, and calling `tick` with the kernel recorder every [`TICK`]
/// (`attach --cgroup` attaches the JVMs that appeared).
pub(crate) fn wait(
    session: &Session,
    subtree: &CgroupSubtree,
    duration: Option<Duration>,
    mut tick: impl FnMut(Option<&KernelRecorder>),
) -> Stopped {
    let deadline = duration.map(|d| Instant::now() + d);
    let mut joined = 0;
    let why = loop {
        if signals::stop_requested() {
            break "interrupted";
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break "duration reached";
        }
        if let Some(k) = session.kernel() {
            joined += report(&k.take_joined());
        }
        tick(session.kernel());
        if duration.is_none() && subtree.members().is_ok_and(|m| m.is_empty()) {
            break "no process is left in the cgroup";
        }
        let left = deadline.map_or(TICK, |d| d.saturating_duration_since(Instant::now()).min(TICK));
        std::thread::sleep(left);
    };
    if let Some(k) = session.kernel() {
        joined += report(&k.take_joined());
    }
    Stopped { why, joined }
}
