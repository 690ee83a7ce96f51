//! A recording session: what `run`, `record` and `attach` share. The
//! trace directory with its metadata (written first as incomplete), the
//! kernel recorder writing kernel.bin into it, and the end: the recorder
//! stopped, the metadata rewritten, the files handed to the user.

use crate::clock::clock_ns;
use crate::disk::{DiskArgs, DiskPlan};
use crate::options::KernelArgs;
use crate::trace_dir::TraceDir;
use crate::user::User;
use anyhow::Context;
use jtrace_bpf::safepoints::Libjvm;
use jtrace_bpf::{KernelRecorder, KernelStats, RecorderConfig, ResolvedLibCall};
use jtrace_merge::{Measured, Meta};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit code for usage and permission errors.
pub(crate) const EXIT_USAGE: u8 = 2;

/// What every recording command checks first: root (to load eBPF), then
/// the kernel options; the library calls to trace (their files opened
/// with the invoking user's rights), or the exit code.
pub(crate) fn prepare(kernel: &KernelArgs, disk: &DiskArgs, command: &str) -> Result<Vec<ResolvedLibCall>, ExitCode> {
    if !rustix::process::geteuid().is_root() {
        eprintln!(
            "jtrace: `jtrace {command}` needs root to load eBPF programs (CAP_BPF and CAP_PERFMON); run it with sudo"
        );
        return Err(ExitCode::from(EXIT_USAGE));
    }
    let usage = |e: anyhow::Error| {
        eprintln!("jtrace: {e:#}");
        ExitCode::from(EXIT_USAGE)
    };
    disk.validate().map_err(usage)?;
    // The library calls are opened as the invoking user.
    let user = User::invoking().map_err(failed)?;
    kernel.validate(&user).map_err(usage)
}

/// Reports a recording command's error; exit code 1.
pub(crate) fn failed(e: anyhow::Error) -> ExitCode {
    eprintln!("jtrace: {e:#}");
    ExitCode::from(1)
}

/// The metadata of a recording that starts now: incomplete until
/// [`Session::finish`] says otherwise.
pub(crate) fn new_meta(command: Vec<String>, pid: u32, methods: &[String]) -> Meta {
    Meta {
        format: "jtrace".into(),
        version: jtrace_format::FORMAT_VERSION,
        complete: false,
        jtrace_version: env!("CARGO_PKG_VERSION").into(),
        start_realtime_ns: clock_ns(rustix::time::ClockId::Realtime),
        start_monotonic_ns: clock_ns(rustix::time::ClockId::Monotonic),
        command,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        pid,
        methods: methods.to_vec(),
        ..Default::default()
    }
}

/// The command line of a running process (empty if it cannot be read).
pub(crate) fn command_line(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// "N kernel events", and how many were lost if any: for closing messages.
pub(crate) fn kernel_events(stats: &KernelStats) -> String {
    let unwritten: u64 = stats.unwritten.values().sum();
    match stats.lost_total + unwritten {
        0 => format!("{} kernel events", stats.records),
        lost => format!("{} kernel events, {lost} LOST", stats.records),
    }
}

/// Says at once that kernel.bin cannot be written (the recorder's thread
/// calls it when it happens; the recording goes on).
fn kernel_write_failed(message: &str) {
    eprintln!("jtrace: {message}");
}

/// Which processes the kernel side follows.
pub(crate) enum Traced {
    /// Those jtrace forks from now on, with their descendants (`run`).
    OurChildren,
    /// A running process, with those it forks from now on.
    Pid(u32),
    /// Running processes (a cgroup's), with those they fork from now on.
    Pids(Vec<u32>),
    /// A cgroup's running processes, and those that enter it while
    /// recording, with those they fork (src/cgroup_watch.rs).
    Cgroup(Vec<u32>, jtrace_bpf::FollowCgroup),
}

/// The JVM's libraries the kernel recorder probes.
#[derive(Default)]
pub(crate) struct JvmLibraries {
    /// Its `libjvm.so` (safepoints), open; None: of every installed JDK.
    pub(crate) libjvm: Option<Libjvm>,
    /// The agent's library as jtrace reaches the file the JVM maps, when
    /// that is not the installed one (the copy in a container); its
    /// announcement functions name the stacks' Java frames.
    pub(crate) agent: Option<PathBuf>,
}

/// A recording in progress (see the module documentation).
pub(crate) struct Session {
    /// The trace directory.
    pub(crate) dir: TraceDir,
    /// The metadata, rewritten by [`Session::finish`].
    pub(crate) meta: Meta,
    recorder: Option<KernelRecorder>,
    /// A ring recording's keeper.
    keeper: Option<crate::ring::Keeper>,
    /// Who writes the trace meanwhile (the traced command's or the JVM's
    /// user): their files in it are handed over at the end.
    writer: User,
}

impl Session {
    /// Writes the incomplete metadata into `dir` and starts the kernel
    /// recorder on `traced` (the library calls of `kernel` plus the
    /// probes of `libs`); `recording_user` writes the trace meanwhile (the
    /// traced command's or the JVM's user), whose files in it are handed
    /// over at the end. What jtrace writes is the invoking user's from
    /// the start ([`TraceDir::create_file`]). On failure the directory is
    /// removed.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        dir: TraceDir,
        meta: Meta,
        kernel: &KernelArgs,
        disk: &DiskPlan,
        lib_calls: Vec<ResolvedLibCall>,
        libs: JvmLibraries,
        traced: Traced,
        recording_user: &User,
    ) -> anyhow::Result<Session> {
        let mut meta = meta;
        meta.cpu_sample_hz = kernel.cpu_sample_hz();
        meta.stack_min_block_ns = kernel.stack_min_block_ns();
        meta.short_block_stacks_hz = kernel.short_block_stacks_hz();
        let measures = jtrace_bpf::kernel_measures();
        let measured = |m: jtrace_bpf::Measure| Measured {
            measured: m.measured,
            how: m.how,
        };
        meta.throttled_timing = Some(measured(measures.throttled));
        meta.steal_timing = Some(measured(measures.steal));
        meta.max_size = disk.ring.as_ref().and_then(|r| r.max_size);
        meta.max_age_ns = disk.ring.as_ref().and_then(|r| r.max_age_ns);
        let viewer = viewer()?;
        meta.kernel_addresses_hidden = kernel.stacks() && viewer.is_some_and(|v| !v.kernel_addresses);
        let started = dir.store_meta(&meta).and_then(|()| {
            let name = crate::ring::first_stream_file(jtrace_format::KERNEL_STREAM, disk);
            let mut cfg = RecorderConfig::new(dir.create_file(&name)?, dir.path().join(jtrace_format::KERNEL_FILE));
            cfg.on_write_error = Some(kernel_write_failed);
            cfg.min_free = disk.min_free;
            if let Some(r) = &disk.ring {
                let chunks_dir = dir.try_clone()?;
                cfg.chunks = Some(jtrace_bpf::KernelChunks {
                    bytes: r.chunk_bytes,
                    max_ns: r.chunk_ns,
                    create: Box::new(move |seq| {
                        chunks_dir.create_file(&jtrace_format::chunk_file(jtrace_format::KERNEL_STREAM, seq))
                    }),
                });
            }
            kernel.apply(&mut cfg, with_safepoints(lib_calls, libs.libjvm));
            cfg.viewer = viewer;
            if let Some(agent) = libs.agent {
                cfg.agent_library = Some(agent);
            }
            match traced {
                Traced::OurChildren => cfg.launcher_tgid = Some(std::process::id()),
                Traced::Pid(pid) => cfg.pids = vec![pid],
                Traced::Pids(ref pids) => cfg.pids = pids.clone(),
                Traced::Cgroup(pids, follow) => (cfg.pids, cfg.cgroup) = (pids, Some(follow)),
            }
            KernelRecorder::start(cfg).context("cannot start kernel tracing")
        });
        let recorder = match started {
            Ok(r) => r,
            Err(e) => {
                dir.discard();
                return Err(e);
            }
        };
        dir.keep_room();
        let keeper = match &disk.ring {
            Some(r) => Some(crate::ring::Keeper::start(dir.try_clone()?, r.clone())?),
            None => None,
        };
        Ok(Session {
            dir,
            meta,
            recorder: Some(recorder),
            keeper,
            writer: recording_user.clone(),
        })
    }

    /// Records the traced process's id in the (still incomplete) metadata
    /// at once, so that a recording cut off later still names it.
    pub(crate) fn set_pid(&mut self, pid: u32) {
        self.meta.pid = pid;
        if let Err(e) = self.dir.store_meta(&self.meta) {
            eprintln!("jtrace: {e:#}");
        }
    }

    /// The kernel recorder, until [`Session::stop_kernel`].
    pub(crate) fn kernel(&self) -> Option<&KernelRecorder> {
        self.recorder.as_ref()
    }

    /// Stops the kernel recorder and stores what it says in the metadata:
    /// its counters, and whether kernel.bin was written to its end. Never
    /// fails: a recorder that could not write or stop cleanly leaves the
    /// metadata saying so ([`KernelStats::write_error`]) and a message on
    /// stderr, and the trace is finished all the same.
    pub(crate) fn stop_kernel(&mut self) -> KernelStats {
        let Some(recorder) = self.recorder.take() else {
            return KernelStats::default();
        };
        // The recording ends here. The tracepoints go on for 20 ms while the
        // uprobes detach: the last exits' switches may still be on their
        // way to the ring buffer.
        self.meta.end_monotonic_ns = clock_ns(rustix::time::ClockId::Monotonic);
        let stats = recorder
            .stop_after(std::time::Duration::from_millis(20))
            .unwrap_or_else(|e| {
                let error = format!("stopping kernel tracing: {e:#}");
                eprintln!("jtrace: {error}");
                KernelStats {
                    write_error: Some(error),
                    ..Default::default()
                }
            });
        let m = &mut self.meta;
        m.kernel_records = stats.records;
        m.kernel_lost = stats.lost.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        m.kernel_inferred_switch_ins = stats.inferred_switch_ins;
        m.kernel_throttles_untimed = stats.throttles_untimed;
        m.process_cgroups = stats
            .process_cgroups
            .iter()
            .map(|p| jtrace_merge::ProcessCgroup {
                pid: p.pid,
                cgroup: p.path.clone(),
                cgroup_v2: p.v2,
                cpu_limited_by: p.limited_by.clone(),
            })
            .collect();
        m.cpu_limits = stats
            .cpu_limits
            .iter()
            .map(|l| jtrace_merge::CpuLimit {
                cgroup: l.path.clone(),
                cgroup_v2: l.v2,
                quota_us: l.quota.quota_us,
                period_us: l.quota.period_us,
                periods: l.end.periods.saturating_sub(l.start.periods),
                throttled_periods: l.end.throttled_periods.saturating_sub(l.start.throttled_periods),
                throttled_ns: l.end.throttled_ns.saturating_sub(l.start.throttled_ns),
            })
            .collect();
        m.kernel_unwritten = stats.unwritten.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        m.kernel_covered_until_ns = stats.unwritten_since;
        m.kernel_write_error = stats.write_error.clone();
        m.kernel_complete = Some(stats.write_error.is_none());
        if let Some(k) = self.keeper.take() {
            let d = k.stop();
            self.meta.ring_dropped_chunks = d.chunks;
            self.meta.ring_dropped_bytes = d.bytes;
        }
        stats
    }

    /// Rewrites the metadata (into the room kept for it) and hands the
    /// trace to `owner`.
    pub(crate) fn finish(self, owner: &User) -> anyhow::Result<()> {
        self.dir.release_room();
        self.dir.store_meta(&self.meta)?;
        self.dir.hand_over(owner, &self.writer)
    }

    /// Ends a session that failed to get going: the recorder stopped, the
    /// directory removed.
    pub(crate) fn abandon(mut self) {
        if let Some(r) = self.recorder.take() {
            let _ = r.stop();
        }
        if let Some(k) = self.keeper.take() {
            k.stop();
        }
        self.dir.discard();
    }
}

/// What to say about the JVM streams of `dir` at the end of a recording:
/// those without their end record (the JVM was killed, or its agent could
/// not finish), and the events agents could not record. Reads only each
/// stream's last bytes (the agent writes JVM_END last).
pub(crate) fn jvm_stream_problems(dir: &TraceDir) -> Vec<String> {
    let mut problems = Vec::new();
    for name in dir.jvm_streams() {
        let end = dir
            .read_tail(&name, jtrace_format::JVM_END_TAIL as u64)
            .ok()
            .and_then(|tail| jtrace_format::jvm_end_in_tail(&tail));
        match end {
            None => problems.push(format!(
                "{name} has no end record: the JVM was killed, or its agent could not finish the stream"
            )),
            Some(e) if e.lost_events > 0 => problems.push(format!(
                "{name}: the agent could not record {} events (`jtrace info` says which threads and from when)",
                e.lost_events
            )),
            Some(_) => {}
        }
    }
    problems
}

/// What to say when kernel.bin could not be written to its end: the error,
/// the records not written and how much of the recording it covers.
pub(crate) fn kernel_stream_problem(stats: &KernelStats, meta: &Meta) -> Option<String> {
    let error = stats.write_error.as_ref()?;
    let unwritten: u64 = stats.unwritten.values().sum();
    let covered = match stats.unwritten_since {
        Some(t) => format!(
            "; it covers the first {} ms of the recording",
            jtrace_timeline::text::ms(t.saturating_sub(meta.start_monotonic_ns))
        ),
        None => String::new(),
    };
    Some(format!(
        "the kernel stream is incomplete: {error}; {unwritten} kernel records not written{covered} \
         (later time is reported as not covered)"
    ))
}

/// Who the trace is for, unless root: the invoking user, whose files
/// the trace's are (docs/SECURITY.md, "What a trace reveals"). Nothing
/// of a process they could not ptrace is recorded, and no kernel address
/// unless the kernel shows them its addresses.
fn viewer() -> anyhow::Result<Option<jtrace_bpf::Viewer>> {
    let user = User::invoking()?;
    Ok((!user.uid.is_root()).then(|| jtrace_bpf::Viewer {
        uid: user.uid.as_raw(),
        gid: user.gid.as_raw(),
        kernel_addresses: jtrace_symbols::kallsyms::shown_to_unprivileged(),
    }))
}

/// The requested library calls plus the probes that record the safepoints
/// of the traced JVM (`libjvm`; if not known, of the JDKs in the system's
/// JVM directory): JVMTI does not report safepoints. A `libjvm.so` whose
/// probes cannot be found (stripped, no ELF file, past the bounds of what
/// jtrace reads of one) is said and left out: the recording goes on
/// without its safepoints.
fn with_safepoints(mut lib_calls: Vec<ResolvedLibCall>, libjvm: Option<Libjvm>) -> Vec<ResolvedLibCall> {
    let (calls, unprobed) = jtrace_bpf::safepoints::safepoint_calls(libjvm);
    for why in unprobed {
        eprintln!("jtrace: {why}: its safepoints will not be recorded");
    }
    lib_calls.extend(calls);
    lib_calls
}
