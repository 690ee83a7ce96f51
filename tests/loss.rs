//! Loss is never silent, memory is bounded:
//! a full disk under the agent's stream and under kernel.bin, jtrace killed
//! while the JVM runs on, `jtrace info` and `jtrace report` on a long
//! trace, and the agent's mapping of a long stream. Real JVMs, real eBPF, real tmpfs mounts; as
//! root (the agent test as the unprivileged `jtrace-test`). The runs are
//! `--complete`: adaptive demotion would soon remove the probes of Busy's
//! hot, short methods, and these tests need their events.

mod common;

use jtrace_testkit::synth;

/// The agent's own sizes of its stream mapping.
#[path = "../agent/src/stream/limits.rs"]
#[allow(dead_code)]
mod stream_limits;

use common::*;
use jtrace_merge::{build_report, Trace};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `jtrace info` of a trace.
fn info(dir: &Path) -> String {
    let o = Command::new(jtrace()).arg("info").arg(dir).output().unwrap();
    assert!(o.status.success(), "jtrace info: {}", stderr(&o));
    String::from_utf8(o.stdout).unwrap()
}

/// The agent's stream fills the disk (a 12 MiB tmpfs) early in a
/// busy run. The JVM and the command run on; the agent says so when it
/// happens, counts per thread what it could not write, and still ends its
/// stream with what it lost and JVM_END; jtrace exits with the command's
/// code and warns; `info` and `report` say which threads lost what from
/// when, and the lost threads' invocations end there, unfinished.
#[test]
fn a_full_disk_under_the_agent_is_counted_and_said() {
    let (uid, gid) = test_user_ids();
    let fs = Tmpfs::new("agent-full", "12m");
    let out = fs.0.join("t.jtrace");
    let classes = classes();
    ensure_agent();
    let o = Command::new(jtrace())
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .args([
            "run",
            "--complete",
            "--methods",
            "Busy.*",
            "--syscalls",
            "none",
            // The disk itself, not the free-space floor (tested below).
            "--min-free",
            "0",
            "-o",
            s(&out),
            "--",
        ])
        .args([s(&java(JDK17)), "-cp", s(&classes), "Busy", "2500", "2"])
        .output()
        .unwrap();
    let err = stderr(&o);
    eprintln!("{err}");
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("jtrace agent: cannot grow the trace's JVM stream (No space left on device"),
        "{err}"
    );
    assert!(err.contains("could not record") && err.contains("events"), "{err}");
    let t = Trace::open(&out).unwrap();
    assert!(t.meta.complete && t.meta.exit_code == Some(0));
    assert!(t.losses.jvm > 0);
    let lost: u64 = t.losses.jvm_lost_threads.iter().map(|l| l.2).sum();
    assert!(lost > 0 && lost <= t.losses.jvm, "{:?}", t.losses.jvm_lost_threads);
    // Both busy threads lost events, and their JVM coverage ends at the first.
    for name in ["busy-0", "busy-1"] {
        let th = t
            .threads
            .values()
            .find(|th| th.java_name.as_deref() == Some(name))
            .unwrap();
        let &(_, first, _) = t.losses.jvm_lost_threads.iter().find(|l| l.0 == th.tid).unwrap();
        assert_eq!(th.jvm_until, Some(first), "{name}");
        // Its invocation of Busy.work, if open then, ends there unfinished
        // (on a loaded machine a thread may lose only its last events,
        // written after the call returned).
        let work = invocations(&t)
            .into_iter()
            .find(|(x, i)| x.tid == th.tid && t.methods[i.method as usize].name == "work")
            .unwrap()
            .1;
        assert!(
            (work.unfinished && work.exit == first) || (!work.unfinished && work.exit <= first),
            "{name}: first lost at {first}, {work:?}"
        );
    }
    assert_exact(&t);
    let r = build_report(&t, &Default::default());
    let problems = r.trace.problems.join("\n");
    assert!(
        problems.contains("the agent could not write") && problems.contains("thread(s) from +"),
        "{problems}"
    );
    assert!(problems.contains("No space left on device"), "{problems}");
    let i = info(&out);
    assert!(i.contains("jvm lost tid") && i.contains("(busy-0)"), "{i}");
    assert!(!i.contains("lost       kernel 0  jvm 0"), "{i}");
    // Handed to the user like any trace.
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&out).unwrap().uid(), uid);
}

/// `kernel.bin` fills the disk (an 8 MiB tmpfs, every syscall of a
/// dd recorded). The failure is said while the command still runs, the
/// recorder keeps draining and counts what it could not write, meta.json
/// is finished (pid, exit code, where the kernel data ends), and jtrace
/// exits with the command's own code.
#[test]
fn a_full_disk_under_kernel_bin_keeps_the_exit_code_and_finishes_meta() {
    let fs = Tmpfs::new("kernel-full", "8m");
    let out = fs.0.join("t.jtrace");
    let o = jtrace_run(
        &out,
        &["--syscalls", "all", "--min-free", "0"],
        &[
            "sh",
            "-c",
            "dd if=/dev/zero of=/dev/null bs=1 count=400000 2>/dev/null; echo command-still-running >&2; exit 3",
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    let said = err
        .find("kernel.bin: No space left on device")
        .expect("the failure is said");
    let running = err.find("command-still-running").unwrap();
    assert!(said < running, "said only at the end:\n{err}");
    assert!(err.contains("WARNING: the kernel stream is incomplete"), "{err}");
    let t = Trace::open(&out).unwrap();
    let m = &t.meta;
    assert!(m.complete, "meta.json not finished");
    assert_eq!(m.exit_code, Some(3));
    assert!(m.pid != 0 && m.end_monotonic_ns > m.start_monotonic_ns);
    assert_eq!(m.kernel_complete, Some(false));
    assert!(m
        .kernel_write_error
        .as_deref()
        .is_some_and(|e| e.contains("No space left")));
    let unwritten: u64 = m.kernel_unwritten.values().sum();
    assert!(
        m.kernel_unwritten.get("syscall").is_some_and(|&n| n > 0),
        "{:?}",
        m.kernel_unwritten
    );
    let until = m.kernel_covered_until_ns.unwrap();
    assert!(until > m.start_monotonic_ns && until < m.end_monotonic_ns);
    assert_eq!(t.losses.kernel_covered_until, Some(until));
    assert!(t.losses.kernel >= unwritten);
    let r = build_report(&t, &Default::default());
    assert!(r.trace.duration_ns > 0 && r.trace.pid == m.pid);
    assert!(r
        .trace
        .problems
        .iter()
        .any(|p| p.contains("covers the recording only up to")));
    let i = info(&out);
    assert!(i.contains("kernel not written syscall"), "{i}");
}

/// Free bytes on the file system of `path` (as an unprivileged user sees them).
fn free_bytes(path: &Path) -> u64 {
    let st = rustix::fs::statvfs(path).unwrap();
    st.f_bavail * st.f_frsize
}

/// Bounded disk: the free-space floor under the agent. On a
/// 64 MiB tmpfs with `--min-free 40M`, a busy JVM's stream stops growing
/// when the file system gets down to 40 MiB free: the agent says so when
/// it happens, the JVM runs to its end, the lost events are counted per
/// thread, and the file system keeps (almost: the room the end records
/// and meta.json were given) its 40 MiB.
#[test]
fn the_free_space_floor_stops_the_agent_before_the_disk_fills() {
    let (uid, gid) = test_user_ids();
    let fs = Tmpfs::new("agent-floor", "64m");
    let out = fs.0.join("t.jtrace");
    let classes = classes();
    ensure_agent();
    let o = Command::new(jtrace())
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .args(["run", "--complete", "--methods", "Busy.*", "--syscalls", "none"])
        .args(["--min-free", "40M", "-o", s(&out), "--"])
        .args([s(&java(JDK17)), "-cp", s(&classes), "Busy", "2500", "2"])
        .output()
        .unwrap();
    let err = stderr(&o);
    eprintln!("{err}");
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains(
            "jtrace agent: cannot grow the trace's JVM stream (the trace's file system is down to its free-space floor"
        ) && err.contains("--min-free 40 MiB"),
        "{err}"
    );
    assert!(!err.contains("No space left"), "{err}");
    let free = free_bytes(&fs.0);
    assert!(free >= (40 << 20) - (1 << 20), "{} KiB free", free >> 10);
    let t = Trace::open(&out).unwrap();
    assert!(t.meta.complete && t.meta.exit_code == Some(0));
    let lost: u64 = t.losses.jvm_lost_threads.iter().map(|l| l.2).sum();
    assert!(lost > 0 && lost <= t.losses.jvm, "{:?}", t.losses.jvm_lost_threads);
    assert_exact(&t);
    let r = build_report(&t, &Default::default());
    assert!(
        r.trace.problems.iter().any(|p| p.contains("free-space floor")),
        "{:?}",
        r.trace.problems
    );
}

/// The free-space floor under kernel.bin (written by root, who could also
/// take the blocks kept for root): a 16 MiB tmpfs, `--min-free 12M`, every
/// syscall of a dd recorded. The recorder stops writing at the floor, says
/// so while the command runs, counts what it did not write, and jtrace
/// exits with the command's code; 12 MiB stay free.
#[test]
fn the_free_space_floor_stops_kernel_bin_before_the_disk_fills() {
    let fs = Tmpfs::new("kernel-floor", "16m");
    let out = fs.0.join("t.jtrace");
    let o = jtrace_run(
        &out,
        &["--syscalls", "all", "--min-free", "12M"],
        &[
            "sh",
            "-c",
            "dd if=/dev/zero of=/dev/null bs=1 count=400000 2>/dev/null; echo command-still-running >&2; exit 3",
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    let said = err.find("kernel.bin: the trace's file system is down to its free-space floor");
    let running = err.find("command-still-running").unwrap();
    assert!(said.is_some_and(|s| s < running), "not said while running:\n{err}");
    let free = free_bytes(&fs.0);
    assert!(free >= (12 << 20) - (1 << 20), "{} KiB free", free >> 10);
    let t = Trace::open(&out).unwrap();
    assert_eq!(t.meta.kernel_complete, Some(false));
    assert!(t.meta.kernel_unwritten.get("syscall").is_some_and(|&n| n > 0));
    assert!(t.meta.kernel_covered_until_ns.is_some());
}

/// jtrace is killed (SIGKILL) while the JVM runs on. The kernel
/// data ends there; the JVM's invocations after that are not covered —
/// no CPU time, no cause — where the report used to show CPU 0 and made-up
/// `lock_native`/`runqueue` time. meta.json, never finished, still names
/// the JVM.
#[test]
fn after_jtrace_is_killed_time_is_not_covered() {
    let out = tempdir("killed").join("t.jtrace");
    let classes = classes();
    ensure_agent();
    let mut child = Command::new(jtrace())
        .args(["run", "--complete", "--methods", "Busy.*", "-o", s(&out), "--"])
        .args([s(&java(JDK17)), "-cp", s(&classes), "Busy", "2500", "2"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let pid: u32 = loop {
        let l = lines.next().expect("the JVM's pid").unwrap();
        if let Some(p) = l.strip_prefix("pid ") {
            break p.trim().parse().unwrap();
        }
    };
    std::thread::sleep(Duration::from_millis(800));
    child.kill().unwrap();
    child.wait().unwrap();
    // The JVM runs to its end, its agent writing on.
    let t0 = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(t0.elapsed() < Duration::from_secs(30), "the JVM did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Streamed, in bounded memory: on a fast host the JVM writes gigabytes
    // in its 2.5 s, which a trace held in memory, with every invocation
    // collected, would not fit.
    let (t, events) = jtrace_merge::stream::open(&out, &Default::default()).unwrap();
    assert!(!t.meta.complete);
    assert_eq!(t.meta.pid, pid, "meta.json names the JVM from the start");
    let k = t.losses.kernel_covered_until.expect("the kernel coverage ends");
    /// Every invocation exact; those that began after `k` counted, and
    /// not covered at all.
    struct AfterKill(u64, u64);
    impl jtrace_merge::Visitor for AfterKill {
        fn exit(&mut self, t: &jtrace_merge::ThreadInfo, _: usize, i: &jtrace_merge::Invocation) {
            let b = i.breakdown;
            assert!(b.is_exact() && b.wall == i.exit - i.entry, "tid {}: {i:?}", t.tid);
            if i.entry > self.0 {
                self.1 += 1;
                assert_eq!((b.cpu, b.off.total(), b.not_covered), (0, 0, b.wall), "{i:?}");
            }
        }
    }
    let mut after = AfterKill(k, 0);
    jtrace_merge::stream::analyze(&t, events, &mut after).unwrap();
    assert!(after.1 > 0, "no invocation after jtrace was killed");
    let r = jtrace_merge::build_report_streaming(&out, &Default::default(), &Default::default()).unwrap();
    assert_threads_exact(&r);
    let work = r.methods.iter().find(|m| m.name == "work").unwrap();
    assert!(work.not_covered_ns > work.wall_ns / 2, "{work:?}");
    assert_eq!(r.trace.kernel_covered_ns, Some(k - t.meta.start_monotonic_ns));
    assert!(r.trace.duration_ns > 2_000_000_000 && r.trace.pid == pid);
    let text = Command::new(jtrace()).arg("report").arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("not covered") && text.contains("NOTE: kernel data ends at"),
        "{text}"
    );
}

/// `jtrace info` streams. On a synthetic trace of ~150 MB its peak
/// resident set stays a small fraction of it (it used to read it whole:
/// 4.7 GB on a 1.2 GB trace), and it says the same as before.
#[test]
fn info_memory_does_not_grow_with_the_trace() {
    let dir = tempdir("info-mem").join("t.jtrace");
    synth::generate(&dir, 5_000_000, 8).unwrap();
    let size: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(size > 100 << 20, "{size}");
    let (o, rss_kib) = run_measured(&jtrace(), &["info".as_ref(), dir.as_os_str()]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    let t = Trace::scan(&dir).unwrap();
    assert!(
        text.contains(&format!(
            "events     kernel {}  jvm {}",
            t.kernel_records, t.jvm_records
        )),
        "{text}"
    );
    eprintln!("jtrace info: {} MiB trace, peak RSS {} MiB", size >> 20, rss_kib >> 10);
    assert!(
        rss_kib < 64 << 10,
        "jtrace info used {rss_kib} KiB on a {size}-byte trace"
    );
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

/// The streamed readers: `jtrace report` over a synthetic trace
/// about 25 times its memory budget keeps its peak resident set (VmHWM,
/// file pages of mapped streams included) within the budget and a fixed
/// margin. It read every JVM stream whole into memory for its first pass
/// (the virtual threads' mounts): 7.2 GiB VmHWM on a 7.2 GB trace.
#[test]
fn report_memory_does_not_grow_with_the_trace() {
    let dir = tempdir("report-mem").join("t.jtrace");
    synth::generate(&dir, 10_000_000, 8).unwrap();
    let size = |name: &str| std::fs::metadata(dir.join(name)).unwrap().len();
    let jvm = size("jvm-4242.bin");
    let total = jvm + size("kernel.bin");
    let budget: u64 = 16 << 20;
    assert!(jvm > 150 << 20 && total > 25 * budget, "{jvm} {total}");
    let (o, rss_kib) = run_measured(
        &jtrace(),
        &[
            "report".as_ref(),
            dir.as_os_str(),
            "--memory-budget".as_ref(),
            "16M".as_ref(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("com.example.C0.m0 "), "{text}");
    eprintln!(
        "jtrace report: {} MiB trace, budget {} MiB, peak RSS {} MiB",
        total >> 20,
        budget >> 20,
        rss_kib >> 10
    );
    // The budget, the runs' read buffers (an eighth of it), the tables and
    // the binary: about 31 MiB measured.
    assert!(
        rss_kib < (budget >> 10) + (48 << 10),
        "jtrace report used {rss_kib} KiB on a {total}-byte trace with a {budget}-byte budget"
    );
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

/// The resident part of the mappings of `path` in process `pid`, in KiB.
fn mapped_rss_kib(pid: u32, path: &str) -> Option<u64> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
    let mut rss = None;
    let mut inside = false;
    for l in smaps.lines() {
        if l.split_whitespace().nth(5).is_some() && l.contains('-') && !l.ends_with(" kB") {
            inside = l.ends_with(path);
        } else if inside {
            if let Some(v) = l.strip_prefix("Rss:") {
                *rss.get_or_insert(0) += v.trim().trim_end_matches(" kB").trim().parse::<u64>().unwrap();
            }
        }
    }
    rss
}

/// The agent unmaps what it has written. After a busy run that
/// wrote hundreds of MB, the JVM's mapping of its stream holds no more than
/// the agent's own bound for a stream at rest
/// ([`stream_limits::MAX_RESIDENT_AT_REST`]: the last 64 MiB, a release
/// step, the grow steps ahead and the reserve), whatever the write rate (it
/// held the whole file: 7.1 GB after a 3-minute soak).
#[test]
fn the_agent_unmaps_what_it_has_written() {
    let out = tempdir("unmap").join("t.jtrace");
    let classes = classes();
    ensure_agent();
    let mut child = Command::new(jtrace())
        .args([
            "run",
            "--complete",
            "--methods",
            "Busy.*",
            "--syscalls",
            "none",
            "-o",
            s(&out),
            "--",
        ])
        // 6 s: over 300 MB even on a loaded 2-core machine (3 s wrote 245 MB
        // at load 12).
        .args([s(&java(JDK17)), "-cp", s(&classes), "Busy", "6000", "2", "3000"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut pid = 0u32;
    for l in lines.by_ref() {
        let l = l.unwrap();
        if let Some(p) = l.strip_prefix("pid ") {
            pid = p.trim().parse().unwrap();
        }
        if l == "busy done" {
            break;
        }
    }
    // Lingering: its stream is written, still mapped.
    std::thread::sleep(Duration::from_millis(500));
    let stream = out.join(format!("jvm-{pid}.bin"));
    let size = std::fs::metadata(&stream).unwrap().len();
    let rss = mapped_rss_kib(pid, s(&stream)).expect("the stream is mapped");
    for l in lines {
        l.unwrap();
    }
    assert!(child.wait().unwrap().success());
    eprintln!("stream {} MiB, mapped resident {} MiB", size >> 20, rss >> 10);
    assert!(size > 300 << 20, "the run wrote only {size} bytes");
    let bound = stream_limits::MAX_RESIDENT_AT_REST;
    assert!(
        rss << 10 <= bound,
        "{rss} KiB of the {size}-byte stream still mapped, more than the agent's {bound} bytes"
    );
    // Read in bounded memory: on a fast host the run writes gigabytes,
    // which a trace held in memory would not fit.
    let (t, _events) = jtrace_merge::stream::open(&out, &Default::default()).unwrap();
    assert_eq!(t.losses.jvm, 0);
    std::fs::remove_dir_all(out.parent().unwrap()).unwrap();
}
