//! Processes that join the traced set while recording: those that enter
//! the followed cgroup subtree ([`RecorderConfig::cgroup`]) and those the
//! caller adds ([`crate::KernelRecorder::follow`]).
//!
//! The BPF side (tasks.bpf.c) sees a process enter the subtree on the
//! tracepoint `cgroup:cgroup_attach_task` (and, on cgroup v2, a clone
//! into it) and traces it from that instant if the trace's viewer
//! ([`RecorderConfig::viewer`]; none: root, who may trace any) may trace
//! it by its credentials alone (`viewer_may_trace` in viewer.bpf.h, the
//! check an exec gets too); either way it notes the join in the map
//! `cgroup_joins`. The consumer, between two polls of the ring buffer,
//! takes the notes: a process not traced yet is traced once
//! [`FollowCgroup::admit`] says the user may (the kernel's own ptrace
//! check); each joined process's tasks in a pid namespace get their
//! TASK_NS records and its cgroup is read, as for the processes traced
//! from the start. The subtree is read once more as the recording starts
//! (for a process that entered between the caller's listing and the
//! tracepoint's attach); a kernel without the tracepoint is served by
//! reading it again every [`RESCAN_EVERY`]: a joiner is then traced from
//! when it is found.
//!
//! [`RecorderConfig::cgroup`]: crate::RecorderConfig::cgroup
//! [`RecorderConfig::viewer`]: crate::RecorderConfig::viewer

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, MapFlags};

use crate::sink::Sink;
use crate::stack_names::now_ns;
use crate::{skel, CgroupSubtree};

/// How often the subtree is read again where the kernel has no tracepoint.
pub const RESCAN_EVERY: Duration = Duration::from_millis(250);

/// The cgroup subtree whose joiners the recorder follows, and who decides
/// on a joiner the BPF side leaves undecided (it decides as the recording's
/// viewer would be answered: [`crate::RecorderConfig::viewer`]).
pub struct FollowCgroup {
    /// The subtree.
    pub subtree: CgroupSubtree,
    /// Asks whether the invoking user may trace process `pid` (a joiner the
    /// BPF side could not decide on): `Err(why)` keeps it out. Called on the
    /// recorder's thread.
    pub admit: Box<dyn Fn(u32) -> Result<(), String> + Send>,
}

impl std::fmt::Debug for FollowCgroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FollowCgroup").field("subtree", &self.subtree).finish()
    }
}

/// A process that joined the traced set while recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// The process.
    pub pid: u32,
    /// When it entered the subtree, as the kernel saw it (CLOCK_MONOTONIC
    /// ns); for one found by a rescan or added by the caller, when it was.
    pub entered_ns: u64,
    /// From when it is recorded, or why it is not.
    pub recorded_from: Result<u64, String>,
}

/// What the consumer shares with [`crate::KernelRecorder`]'s callers.
#[derive(Default)]
pub(crate) struct Shared {
    /// Processes to trace from now on ([`crate::KernelRecorder::follow`]).
    pub(crate) requests: Vec<u32>,
    /// Joiners not yet taken ([`crate::KernelRecorder::take_joined`]).
    pub(crate) joined: Vec<Joined>,
}

/// Whether the BPF side sees processes enter a cgroup: the kernel has the
/// tracepoint `cgroup:cgroup_attach_task`, and the environment variable
/// `JTRACE_CGROUP_RESCAN` (which lets the tests run the fallback) is not
/// set.
pub(crate) fn kernel_sees_joins() -> bool {
    crate::features::missing_tracepoints(&["cgroup_attach_task"]).is_empty()
        && std::env::var_os("JTRACE_CGROUP_RESCAN").is_none()
}

/// How the recorder follows a subtree, for messages.
pub(crate) fn how(exact: bool) -> String {
    if exact {
        "from the instant each enters (tracepoint cgroup:cgroup_attach_task)".into()
    } else {
        format!(
            "from when a read of its cgroup.procs finds each, every {} ms (this kernel has no tracepoint \
             cgroup:cgroup_attach_task)",
            RESCAN_EVERY.as_millis()
        )
    }
}

/// The consumer's side (see the module documentation).
pub(crate) struct Joins {
    follow: Option<FollowCgroup>,
    /// Whether the BPF side sees the joins (else: rescans).
    exact: bool,
    shared: Arc<Mutex<Shared>>,
    last_rescan: Option<Instant>,
    /// Joiners kept out: not asked about again.
    refused: HashSet<u32>,
}

impl Joins {
    pub(crate) fn new(follow: Option<FollowCgroup>, exact: bool, shared: Arc<Mutex<Shared>>) -> Joins {
        Joins {
            follow,
            exact,
            shared,
            last_rescan: None,
            refused: HashSet::new(),
        }
    }

    /// Takes what joined since the last call (see the module documentation).
    pub(crate) fn poll(&mut self, sk: &mut skel::JtraceSkel<'_>, sink: &mut Sink) {
        let mut found = Vec::new();
        if self.follow.is_some() && self.exact {
            found.extend(take_kernel_joins(sk));
        }
        let requests = std::mem::take(&mut lock(&self.shared).requests);
        let now = now_ns();
        found.extend(requests.into_iter().map(|pid| Found::new(pid, now).admitted()));
        if let Some(f) = &self.follow {
            // Once at the start too, quietly: a process that was there but
            // not yet traced when the tracepoint attached (one the caller's
            // listing missed, or a child forked meanwhile).
            let first = self.last_rescan.is_none();
            let due = self
                .last_rescan
                .is_some_and(|t| !self.exact && t.elapsed() >= RESCAN_EVERY);
            if first || due {
                self.last_rescan = Some(Instant::now());
                for pid in f.subtree.members().unwrap_or_default() {
                    if !is_traced(sk, pid) && !self.refused.contains(&pid) {
                        found.push(Found {
                            quiet: first,
                            ..Found::new(pid, now)
                        });
                    }
                }
            }
        }
        let mut seen = HashSet::new();
        for j in found {
            // Once each (a join the kernel noted, found again by a rescan).
            if !seen.insert(j.pid) {
                continue;
            }
            let recorded_from = match j.traced {
                true => Ok(j.entered_ns),
                // Traced already (asked for twice, or forked by a traced process).
                false if is_traced(sk, j.pid) => continue,
                false => self.admit(sk, j.pid, j.admitted),
            };
            if recorded_from.is_ok() {
                sink.sample(&crate::pid_ns::existing_tasks(j.pid, now_ns()));
                sink.cgroups.note(j.pid);
            }
            if !j.quiet || recorded_from.is_err() {
                lock(&self.shared).joined.push(Joined {
                    pid: j.pid,
                    entered_ns: j.entered_ns,
                    recorded_from,
                });
            }
        }
    }

    /// Traces `pid` from now on if `admitted` already or the invoking user
    /// may trace it; when, or why not.
    fn admit(&mut self, sk: &mut skel::JtraceSkel<'_>, pid: u32, admitted: bool) -> Result<u64, String> {
        if !admitted {
            if let Some(f) = &self.follow {
                if let Err(why) = (f.admit)(pid) {
                    self.refused.insert(pid);
                    return Err(why);
                }
            }
        }
        set_traced(sk, pid)?;
        Ok(now_ns())
    }
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// A process found to have joined.
struct Found {
    pid: u32,
    /// When it joined, or was found.
    entered_ns: u64,
    /// The BPF side traces it already.
    traced: bool,
    /// The caller checked that it may be traced.
    admitted: bool,
    /// Not a joiner to tell of (see [`Joins::poll`]).
    quiet: bool,
}

impl Found {
    fn new(pid: u32, entered_ns: u64) -> Found {
        Found {
            pid,
            entered_ns,
            traced: false,
            admitted: false,
            quiet: false,
        }
    }

    fn admitted(self) -> Found {
        Found { admitted: true, ..self }
    }
}

/// The joins the BPF side noted, removed from its map.
fn take_kernel_joins(sk: &skel::JtraceSkel<'_>) -> Vec<Found> {
    let map = &sk.maps.cgroup_joins;
    let keys: Vec<Vec<u8>> = map.keys().collect();
    let mut out = Vec::new();
    for key in keys {
        let value = map.lookup(&key, MapFlags::ANY).ok().flatten();
        let _ = map.delete(&key);
        let (Some(pid), Some(v)) = (key.get(..4), value) else {
            continue;
        };
        let pid = u32::from_ne_bytes(pid.try_into().expect("4 bytes"));
        let (Some(ts), Some(traced)) = (v.get(..8), v.get(8..12)) else {
            continue;
        };
        let ts = u64::from_ne_bytes(ts.try_into().expect("8 bytes"));
        let traced = u32::from_ne_bytes(traced.try_into().expect("4 bytes")) != 0;
        out.push(Found {
            traced,
            ..Found::new(pid, ts)
        });
    }
    // In the order they joined.
    out.sort_by_key(|j| j.entered_ns);
    out
}

/// The filter's word of `tgid`, shared with the BPF programs (which set
/// its bits atomically too).
fn filter_word<'a>(sk: &'a mut skel::JtraceSkel<'_>, tgid: u32) -> Option<&'a AtomicU64> {
    let bss = sk.maps.bss_data.as_deref_mut()?;
    let word = bss.traced_bits.get_mut((tgid / 64) as usize)?;
    // SAFETY: a u64 of the mapped .bss, aligned, which lives as long as
    // the skeleton; every access to it from here on is atomic.
    Some(unsafe { AtomicU64::from_ptr(word) })
}

fn is_traced(sk: &mut skel::JtraceSkel<'_>, tgid: u32) -> bool {
    filter_word(sk, tgid).is_some_and(|w| w.load(Ordering::Acquire) & (1 << (tgid % 64)) != 0)
}

fn set_traced(sk: &mut skel::JtraceSkel<'_>, tgid: u32) -> Result<(), String> {
    let word = filter_word(sk, tgid).ok_or_else(|| format!("pid {tgid} is beyond the filter"))?;
    word.fetch_or(1 << (tgid % 64), Ordering::AcqRel);
    Ok(())
}
