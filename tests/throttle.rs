//! The causes `throttled` and `steal` end to end: real JVMs in real
//! cgroups under the real eBPF programs.
//!
//! * A method that spins for 1 s of wall time in a cgroup whose CPU quota
//!   is 20 % of one CPU spends most of its off-CPU time `throttled`, and
//!   the trace says what the quota did (meta.json, the report).
//! * The same method with real contention (two spinners on one CPU) in a
//!   cgroup without a quota spends it on the `runqueue`, none `throttled`.
//! * A thread spinning alone on a CPU gets that CPU's steal (/proc/stat)
//!   as `steal`, within what /proc/stat can tell.
//!
//! The JVM is put into its cgroup by a wrapper: `jtrace run` runs the
//! command as the invoking user (SUDO_UID), who may not write a root
//! cgroup's `cgroup.procs` (v2 also asks for the common ancestor's), so the
//! wrapper writes its pid into a file, the test (root) moves it into the
//! cgroup, and only then does the wrapper exec the JVM.

mod common;

use common::*;
use jtrace_merge::{analyze, Cause, Evidence, OffCpuInterval, ThreadInfo, Trace, Visitor};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const MS: u64 = 1_000_000;

/// A cgroup of the CPU controller for one test (v2 where the host's root
/// cgroup offers the cpu controller, else v1's cpu hierarchy), removed
/// when dropped.
struct CpuCgroup {
    dir: PathBuf,
}

impl CpuCgroup {
    /// `jtrace-test-<pid>-<name>`, with a quota of `quota_us` per
    /// `period_us` if given.
    fn new(name: &str, quota: Option<(u64, u64)>) -> CpuCgroup {
        let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
            .is_ok_and(|c| c.split_whitespace().any(|x| x == "cpu"));
        let root = if v2 { "/sys/fs/cgroup" } else { "/sys/fs/cgroup/cpu" };
        let dir = Path::new(root).join(format!("jtrace-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("cannot create the cgroup {}: {e}", dir.display()));
        let cg = CpuCgroup { dir };
        if let Some((q, p)) = quota {
            if v2 {
                cg.write("cpu.max", &format!("{q} {p}"));
            } else {
                cg.write("cpu.cfs_period_us", &p.to_string());
                cg.write("cpu.cfs_quota_us", &q.to_string());
            }
        }
        cg
    }

    fn write(&self, file: &str, value: &str) {
        let p = self.dir.join(file);
        std::fs::write(&p, value).unwrap_or_else(|e| panic!("writing {value:?} to {}: {e}", p.display()));
    }

    /// The cgroup's name in its hierarchy (`/jtrace-test-…`).
    fn name(&self) -> String {
        format!("/{}", self.dir.file_name().unwrap().to_string_lossy())
    }

    /// `jtrace run <args> -- <cmd>` with `cmd` moved into this cgroup
    /// before it starts (see the module doc).
    fn jtrace_run(&self, out: &Path, args: &[&str], cmd: &[&str]) -> Output {
        ensure_agent();
        let work = out.parent().unwrap();
        let (pid_file, go_file) = (work.join("wrapper.pid"), work.join("go"));
        let script = r#"echo $$ > "$1" && while [ ! -e "$2" ]; do sleep 0.01; done && shift 2 && exec "$@""#;
        let child = Command::new(jtrace())
            .arg("run")
            .arg("-o")
            .arg(out)
            .args(args)
            .args(["--", "sh", "-c", script, "sh"])
            .arg(&pid_file)
            .arg(&go_file)
            .args(cmd)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run jtrace");
        let deadline = Instant::now() + Duration::from_secs(30);
        let pid = loop {
            if let Some(pid) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
            {
                break pid;
            }
            assert!(Instant::now() < deadline, "the wrapper never started");
            std::thread::sleep(Duration::from_millis(10));
        };
        self.write("cgroup.procs", &pid.to_string());
        std::fs::write(&go_file, "").unwrap();
        let o = child.wait_with_output().unwrap();
        eprintln!("--- jtrace stdout\n{}", String::from_utf8_lossy(&o.stdout));
        eprintln!("--- jtrace stderr\n{}", String::from_utf8_lossy(&o.stderr));
        o
    }
}

impl Drop for CpuCgroup {
    fn drop(&mut self) {
        // Its last process may still be on its way out.
        for _ in 0..100 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("cannot remove the cgroup {}", self.dir.display());
    }
}

/// The invocations of WallSpin.spin in a trace, with their threads.
fn spins(trace: &Trace) -> Vec<(ThreadInfo, jtrace_merge::Invocation)> {
    invocations(trace)
        .into_iter()
        .filter(|(_, inv)| trace.methods[inv.method as usize].qualified() == "WallSpin.spin")
        .collect()
}

/// The last CPU: where the pinned tests run (CPU 0 takes more interrupts).
fn last_cpu() -> String {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (n - 1).to_string()
}

/// A method spinning for 1 s of wall time in a cgroup allowed 20 ms of CPU
/// per 100 ms: at least 70 % of its off-CPU time is `throttled` (the rest
/// is the run queue after each unthrottle, while the JVM's other threads
/// run, and safepoints the throttled VM thread held up), and the trace
/// holds the quota and the periods it throttled.
#[test]
fn a_cpu_quota_is_throttled_time() {
    // They spin on the CPUs they measure: one at a time.
    let _serial = one_at_a_time();
    let classes = classes();
    for jdk in [JDK17, JDK25] {
        let cg = CpuCgroup::new("quota", Some((20_000, 100_000)));
        let out = tempdir("throttle").join("t.jtrace");
        let java = java(jdk);
        let o = cg.jtrace_run(
            &out,
            &["--methods", "WallSpin.spin"],
            &[
                java.to_str().unwrap(),
                "-cp",
                classes.to_str().unwrap(),
                "WallSpin",
                "1000",
                "1",
            ],
        );
        assert!(o.status.success(), "{jdk}: jtrace run failed");
        let trace = Trace::open(&out).unwrap();
        assert!(trace.meta.complete);
        assert_eq!(trace.losses.kernel + trace.losses.jvm, 0, "{jdk}: events lost");
        assert_exact(&trace);
        assert!(trace.meta.throttled_timing.as_ref().is_some_and(|t| t.measured));
        let spins = spins(&trace);
        assert_eq!(spins.len(), 1, "{jdk}: one spin");
        let b = spins[0].1.breakdown;
        let off = b.off.total();
        let throttled = b.off.get(Cause::Throttled);
        eprintln!(
            "{jdk}: wall {} ms, cpu {} ms, off {} ms: throttled {} ms ({} %), runqueue {} ms, steal {} ms, \
             untimed throttles {}",
            b.wall / MS,
            b.cpu / MS,
            off / MS,
            throttled / MS,
            throttled * 100 / off.max(1),
            b.off.get(Cause::Runqueue) / MS,
            b.off.get(Cause::Steal) / MS,
            trace.meta.kernel_throttles_untimed
        );
        assert!(b.wall >= 1000 * MS);
        // 20 % of 1 s, give or take the periods the call straddles.
        assert!(b.cpu < 400 * MS, "{jdk}: cpu {} ms under a 20 % quota", b.cpu / MS);
        assert!(
            throttled * 100 >= off * 70,
            "{jdk}: throttled {} ms is under 70 % of the {} ms off CPU",
            throttled / MS,
            off / MS
        );
        // What the quota did, read by the recorder.
        let limit = trace
            .meta
            .cpu_limits
            .iter()
            .find(|l| l.cgroup == cg.name())
            .unwrap_or_else(|| panic!("{jdk}: no quota of {} in {:?}", cg.name(), trace.meta.cpu_limits));
        assert_eq!((limit.quota_us, limit.period_us), (20_000, 100_000));
        assert!(limit.throttled_periods >= 5, "{jdk}: {limit:?}");
        assert!(limit.throttled_ns >= throttled, "{jdk}: {limit:?}");
        let jvm = trace.jvm_pids[0];
        let pc = trace.meta.process_cgroups.iter().find(|p| p.pid == jvm).unwrap();
        assert_eq!(pc.cgroup, cg.name());
        assert_eq!(pc.cpu_limited_by, [cg.name()]);
        // The views say it: the report's process section, `--cause throttled`.
        let report = String::from_utf8(jtrace_stdout(&["report", "--cause", "throttled"], &out)).unwrap();
        assert!(report.contains("WallSpin.spin"), "{report}");
        // Read as one text: the report wraps its lines at 120 columns.
        let flat = report.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains(&format!(
                "cgroup: pid {jvm} in {}: CPU quota 20.000 ms per 100.000 ms",
                cg.name()
            )),
            "{report}"
        );
        let json: serde_json::Value =
            serde_json::from_slice(&jtrace_stdout(&["report", "--json", "--cause", "steal"], &out)).unwrap();
        let p = &json["processes"].as_array().unwrap()[0];
        assert_eq!(p["cpu_limits"][0]["quota_us"], 20_000, "{p}");
        let info = String::from_utf8(jtrace_stdout(&["info"], &out)).unwrap();
        assert!(info.contains("throttled  timed per thread"), "{info}");
    }
}

/// Two spinners on one CPU in a cgroup without a quota: their off-CPU
/// time is the run queue (each waits for the other), nothing `throttled`.
#[test]
fn contention_without_a_quota_is_runqueue() {
    let _serial = one_at_a_time();
    let classes = classes();
    let cg = CpuCgroup::new("noquota", None);
    let out = tempdir("contention").join("t.jtrace");
    let java = java(JDK17);
    let cpu = last_cpu();
    let o = cg.jtrace_run(
        &out,
        &["--methods", "WallSpin.spin"],
        &[
            "taskset",
            "-c",
            &cpu,
            java.to_str().unwrap(),
            "-cp",
            classes.to_str().unwrap(),
            "WallSpin",
            "1000",
            "2",
        ],
    );
    assert!(o.status.success(), "jtrace run failed");
    let trace = Trace::open(&out).unwrap();
    assert_eq!(trace.losses.kernel + trace.losses.jvm, 0, "events lost");
    assert_exact(&trace);
    let spins = spins(&trace);
    assert_eq!(spins.len(), 2);
    for (t, inv) in &spins {
        let b = inv.breakdown;
        let waited = b.off.total() - b.off.get(Cause::Steal);
        eprintln!(
            "{}: wall {} ms, cpu {} ms, runqueue {} ms, throttled {} ns, steal {} ms",
            t.display_name(),
            b.wall / MS,
            b.cpu / MS,
            b.off.get(Cause::Runqueue) / MS,
            b.off.get(Cause::Throttled),
            b.off.get(Cause::Steal) / MS
        );
        // The other spinner's turns: a large part of the second.
        assert!(
            waited >= 200 * MS,
            "{}: off CPU only {} ms",
            t.display_name(),
            waited / MS
        );
        assert!(
            b.off.get(Cause::Runqueue) * 100 >= waited * 85,
            "{}: runqueue {} ms is under 85 % of the {} ms off CPU",
            t.display_name(),
            b.off.get(Cause::Runqueue) / MS,
            waited / MS
        );
    }
    for t in jtrace_merge::build_report(&trace, &Default::default()).threads {
        assert_eq!(t.off_cpu_ns.get(Cause::Throttled), 0, "{} throttled", t.name);
    }
    assert!(trace.meta.cpu_limits.is_empty(), "{:?}", trace.meta.cpu_limits);
    let pc = trace
        .meta
        .process_cgroups
        .iter()
        .find(|p| p.pid == trace.jvm_pids[0])
        .unwrap();
    assert_eq!((pc.cgroup.as_str(), pc.cpu_limited_by.len()), (cg.name().as_str(), 0));
}

/// Each thread's steal intervals.
#[derive(Default)]
struct Steals(BTreeMap<u32, Vec<(u64, u64)>>);

impl Visitor for Steals {
    fn off_cpu(&mut self, t: &ThreadInfo, _depth: usize, iv: &OffCpuInterval) {
        if iv.evidence == Evidence::Steal {
            assert_eq!(iv.split.off.get(Cause::Steal), iv.end - iv.start);
            self.0.entry(t.tid).or_default().push((iv.start, iv.end));
        }
    }
}

/// A CPU's time and steal column (/proc/stat, in USER_HZ = 10 ms ticks)
/// as WallSpin printed them: (nanoTime, steal ns).
fn stat_line(stdout: &str, tag: &str, cpu: &str) -> (u64, u64) {
    let at = stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{tag}-time ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {tag}-time line:\n{stdout}"));
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("{tag} cpu{cpu} ")))
        .unwrap_or_else(|| panic!("no {tag} cpu{cpu} line:\n{stdout}"));
    let steal: u64 = line.split_whitespace().nth(9).and_then(|v| v.parse().ok()).unwrap();
    (at, steal * 10 * MS)
}

/// A spinner alone on a CPU for 3 s gets the steal of that CPU, as
/// /proc/stat counts it between two readings right before it starts and
/// right after it ends: within 20 ms (each reading is cut to 10 ms ticks,
/// USER_HZ; and /proc/stat counts steal at the scheduler tick, up to a tick
/// (4 ms at HZ 250) behind the steal clock at each reading), less at most
/// the time the CPU spent on other tasks meanwhile (their steal is
/// theirs). Every traced thread's steal inside the window together is at
/// most the CPU's. When the host steals nothing the bounds still hold.
#[test]
fn a_lone_spinner_gets_its_cpus_steal() {
    let _serial = one_at_a_time();
    let classes = classes();
    let out = tempdir("steal").join("t.jtrace");
    let java = java(JDK17);
    let cpu = last_cpu();
    let o = jtrace_run(
        &out,
        &["--methods", "WallSpin.spin"],
        &[
            "taskset",
            "-c",
            &cpu,
            java.to_str().unwrap(),
            "-cp",
            classes.to_str().unwrap(),
            "WallSpin",
            "3000",
            "1",
            "stat",
        ],
    );
    assert!(o.status.success(), "jtrace run failed");
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let (t0, s0) = stat_line(&stdout, "before", &cpu);
    let (t1, s1) = stat_line(&stdout, "after", &cpu);
    let cpu_steal = s1.saturating_sub(s0);
    let trace = Trace::open(&out).unwrap();
    assert_eq!(trace.losses.kernel + trace.losses.jvm, 0, "events lost");
    assert_exact(&trace);
    assert!(trace.meta.steal_timing.as_ref().is_some_and(|t| t.measured));
    let spins = spins(&trace);
    assert_eq!(spins.len(), 1);
    let (spinner, inv) = &spins[0];
    assert!(t0 <= inv.entry && inv.exit <= t1, "the spin is inside the readings");
    let mut steals = Steals::default();
    analyze(&trace, &mut steals);
    let in_window = |v: &[(u64, u64)]| -> u64 { v.iter().map(|&(a, b)| b.min(t1).saturating_sub(a.max(t0))).sum() };
    let mine = in_window(steals.0.get(&spinner.tid).map_or(&[][..], |v| v));
    let all: u64 = steals.0.values().map(|v| in_window(v)).sum();
    let report = jtrace_merge::build_report(&trace, &Default::default());
    let th = report.threads.iter().find(|t| t.tid == spinner.tid).unwrap();
    // The CPU was the spinner's, on CPU or stolen, but for this long.
    let others = (t1 - t0).saturating_sub(th.cpu_ns + th.off_cpu_ns.get(Cause::Steal));
    const TOLERANCE: u64 = 20 * MS;
    eprintln!(
        "cpu{cpu}: /proc/stat steal {} ms over {} ms; the spinner's steal {} ms (its spin's {} ms), every \
         traced thread's {} ms; the CPU ran others {} ms",
        cpu_steal / MS,
        (t1 - t0) / MS,
        mine as f64 / MS as f64,
        inv.breakdown.off.get(Cause::Steal) as f64 / MS as f64,
        all as f64 / MS as f64,
        others / MS
    );
    assert_eq!(
        th.off_cpu_ns.get(Cause::Steal),
        steals.0.get(&spinner.tid).map_or(0, |v| in_window(v))
    );
    assert!(
        all <= cpu_steal + TOLERANCE,
        "traced threads' steal {} ms is more than cpu{cpu}'s {} ms",
        all / MS,
        cpu_steal / MS
    );
    assert!(
        mine + TOLERANCE + others >= cpu_steal,
        "the spinner's steal {} ms is short of cpu{cpu}'s {} ms by more than the {} ms the CPU ran others",
        mine / MS,
        cpu_steal / MS,
        others / MS
    );
}
