//! End-to-end tests of `jtrace run`: real JVMs (17 and 25) under real eBPF
//! programs, asserting on the merged result. They need root, as CI has.

mod common;

use common::*;
use jtrace_merge::{Cause, Trace};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const MS: u64 = 1_000_000;

/// Two threads pinned to one CPU each burn 300 ms of CPU inside Spin.burn:
/// both invocations must show involuntary switches, CPU ≈ 300 ms, and
/// `runqueue` must explain most of wall − CPU.
#[test]
fn preempted_spinners_on_one_cpu() {
    let classes = classes();
    for jdk in JDKS {
        let out = tempdir("spin").join("spin.jtrace");
        let steal_before = cpu0_steal_ms();
        let o = jtrace_run(
            &out,
            &["--methods", "Spin.burn"],
            &[
                "taskset",
                "-c",
                "0",
                java(jdk).to_str().unwrap(),
                "-cp",
                classes.to_str().unwrap(),
                "Spin",
                "300",
            ],
        );
        assert!(o.status.success(), "{jdk}: jtrace run failed");
        // On a VM the hypervisor may stop CPU 0 while a spinner is on it:
        // the scheduler still has the thread running (jtrace's `steal`),
        // its thread CPU clock (the program's 300 ms) does not count it;
        // jtrace's CPU leaves it out too, give or take what /proc/stat
        // and the steal records can tell apart.
        let steal = cpu0_steal_ms() - steal_before + 10; // a tick's rounding
        let trace = Trace::open(&out).unwrap();
        assert!(trace.meta.complete);
        assert_eq!(trace.losses.kernel + trace.losses.jvm, 0, "{jdk}: events lost");
        assert_exact(&trace);
        let burns: Vec<_> = invocations(&trace)
            .into_iter()
            .filter(|(_, inv)| trace.methods[inv.method as usize].qualified() == "Spin.burn")
            .collect();
        let names: Vec<_> = burns.iter().map(|(t, _)| t.display_name().to_string()).collect();
        assert_eq!(burns.len(), 2, "{jdk}: one burn per thread, got {names:?}");
        assert!(
            names.contains(&"spin-a".to_string()) && names.contains(&"spin-b".to_string()),
            "{names:?}"
        );
        for (t, inv) in &burns {
            let b = inv.breakdown;
            eprintln!(
                "{jdk} {}: wall {} cpu {} runqueue {} unknown {} invol {} vol {}",
                t.display_name(),
                b.wall / MS,
                b.cpu / MS,
                b.off.get(Cause::Runqueue) / MS,
                b.off.get(Cause::Unknown) / MS,
                b.involuntary,
                b.voluntary
            );
            assert!(
                b.involuntary > 0,
                "{jdk}: no involuntary switch inside burn on {}",
                t.display_name()
            );
            assert!(
                (270 * MS..=(330 + steal) * MS).contains(&b.cpu),
                "{jdk}: burn CPU {} ms not within 10% of 300 (+ {steal} ms stolen by the hypervisor)",
                b.cpu / MS
            );
            // The injected delay is the other spinner's turn on the CPU:
            // runqueue must hold ≥ 85 % of wall − CPU − steal (ground
            // truth's bar; steal is the hypervisor's, not the other's turn).
            let gap = b.wall - b.cpu - b.off.get(Cause::Steal);
            assert!(
                b.off.get(Cause::Runqueue) * 100 >= gap * 85,
                "{jdk}: runqueue {} ms is under 85 % of wall-cpu {} ms",
                b.off.get(Cause::Runqueue) / MS,
                gap / MS
            );
            assert!(b.off.get(Cause::Unknown) * 20 < b.wall, "{jdk}: unknown ≥ 5 % of wall");
        }
        // The text trace shows the involuntary switches inside the method.
        let txt = text(&out);
        let inside = txt
            .split("→ Spin.burn")
            .skip(1)
            .map(|s| s.split("← Spin.burn").next().unwrap())
            .filter(|s| s.contains("preempted (involuntary)"))
            .count();
        assert_eq!(inside, 2, "{jdk}: text trace lacks preemptions inside burn:\n{txt}");
    }
}

/// A method that sleeps 100 ms: wall ≥ 100 ms, CPU < 10 ms, the off-CPU
/// interval nested inside it; an exception exit is recorded; the exit code
/// of the command becomes jtrace's.
#[test]
fn sleeping_method_and_exit_code() {
    let classes = classes();
    for jdk in JDKS {
        let out = tempdir("sleep").join("sleep.jtrace");
        let o = jtrace_run(
            &out,
            &["--methods", "Sleeper.nap,Sleeper.fail"],
            &[
                java(jdk).to_str().unwrap(),
                "-cp",
                classes.to_str().unwrap(),
                "Sleeper",
                "100",
                "3",
            ],
        );
        assert_eq!(o.status.code(), Some(3), "{jdk}: exit code not propagated");
        let trace = Trace::open(&out).unwrap();
        assert_exact(&trace);
        let invs = invocations(&trace);
        let nap = invs
            .iter()
            .find(|(_, i)| trace.methods[i.method as usize].name == "nap")
            .expect("nap traced");
        let b = nap.1.breakdown;
        eprintln!("{jdk}: nap wall {} µs cpu {} µs", b.wall / 1000, b.cpu / 1000);
        assert!(b.wall >= 100 * MS, "{jdk}: nap wall {} < 100 ms", b.wall);
        assert!(b.cpu < 10 * MS, "{jdk}: nap CPU {} >= 10 ms", b.cpu);
        assert!(b.voluntary >= 1);
        assert_eq!(nap.0.display_name(), "main");
        let fail = invs
            .iter()
            .find(|(_, i)| trace.methods[i.method as usize].name == "fail")
            .expect("fail traced");
        assert!(fail.1.exception, "{jdk}: exit by exception not recorded");
        let txt = text(&out);
        let body = txt
            .split("→ Sleeper.nap")
            .nth(1)
            .unwrap()
            .split("← Sleeper.nap")
            .next()
            .unwrap();
        assert!(
            body.contains("⇣ switch-out blocked (voluntary"),
            "{jdk}: no blocked interval inside nap:\n{txt}"
        );
        assert!(txt.contains("[threw]"));
    }
}

/// Overloads read apart: the report's rows and the text trace name each
/// overloaded method with its parameter types (two rows are never one
/// name twice), and a method that is not overloaded by its name alone;
/// each overload keeps its own sleep.
#[test]
fn overloaded_methods_are_named_with_their_parameters() {
    let out = tempdir("overloads").join("o.jtrace");
    let o = jtrace_run(
        &out,
        &["--methods", "Overloads.nap,Overloads.once"],
        &[
            java(JDK17).to_str().unwrap(),
            "-cp",
            classes().to_str().unwrap(),
            "Overloads",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = report_text(&out);
    let row = |label: &str| {
        let line = (report.lines())
            .find(|l| l.split("  ").next() == Some(label))
            .unwrap_or_else(|| panic!("no row {label:?} in:\n{report}"));
        // calls, then wall ms.
        let fields: Vec<&str> = line[label.len()..].split_whitespace().collect();
        (fields[0].parse::<u64>().unwrap(), fields[1].parse::<f64>().unwrap())
    };
    let (calls, by_int) = row("Overloads.nap(int)");
    assert_eq!(calls, 1);
    let (calls, by_string) = row("Overloads.nap(String)");
    assert_eq!(calls, 1);
    assert!((5.0..20.0).contains(&by_int), "nap(int) wall {by_int} ms");
    assert!((40.0..200.0).contains(&by_string), "nap(String) wall {by_string} ms");
    row("Overloads.once");
    assert!(!report.contains("Overloads.once("), "{report}");
    assert!(!report.lines().any(|l| l.starts_with("Overloads.nap ")), "{report}");
    let txt = text(&out);
    for label in ["→ Overloads.once", "→ Overloads.nap(int)", "→ Overloads.nap(String)"] {
        assert!(txt.contains(label), "no {label:?} in:\n{txt}");
    }
}

/// A bad line in `--config`: the agent names it by its line number in the
/// user's file, and the JVM runs on untraced with its own exit code.
#[test]
fn config_error_names_the_users_line_and_the_jvm_runs_on() {
    let classes = classes();
    let dir = tempdir("badconf");
    let conf = dir.join("my.conf");
    std::fs::write(&conf, "# my settings\ninclude_method Sleeper.nap\nbogus_directive 1\n").unwrap();
    let out = dir.join("t.jtrace");
    let o = jtrace_run(
        &out,
        &["--config", conf.to_str().unwrap()],
        &["java", "-cp", classes.to_str().unwrap(), "Sleeper", "10", "4"],
    );
    assert_eq!(o.status.code(), Some(4), "the JVM's exit code");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stdout.contains("caught expected"), "the program ran: {stdout}");
    assert!(
        stderr.contains(":3: unknown directive `bogus_directive`"),
        "line 3 of my.conf: {stderr}"
    );
    let trace = Trace::open(&out).unwrap();
    let java_methods: Vec<_> = trace
        .methods
        .iter()
        .filter(|m| m.qualified().starts_with("Sleeper"))
        .collect();
    assert!(
        java_methods.is_empty(),
        "traced despite the bad config: {java_methods:?}"
    );
    assert!(invocations(&trace)
        .iter()
        .all(|(_, i)| trace.methods[i.method as usize].native));
}

/// Without root: a clear message, exit 2, and no trace left behind.
#[test]
fn not_root_is_refused() {
    let dir = tempdir("noroot");
    let out = dir.join("t.jtrace");
    let o = Command::new(jtrace())
        .args(["run", "-o"])
        .arg(&out)
        .args(["--", "true"])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains("CAP_BPF") && err.contains("CAP_PERFMON"), "{err}");
    assert!(!out.exists(), "a trace was left behind");
}

/// Under sudo the command runs as the invoking user, who owns the trace.
#[test]
fn command_runs_as_invoking_user_who_owns_the_trace() {
    let out = tempdir("sudo").join("t.jtrace");
    ensure_agent();
    let o = Command::new(jtrace())
        .args(["run", "-o"])
        .arg(&out)
        .args(["--", "id", "-u"])
        .env("SUDO_UID", "65534")
        .env("SUDO_GID", "65534")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "65534");
    let md = std::fs::metadata(&out).unwrap();
    assert_eq!((md.uid(), md.mode() & 0o777), (65534, 0o700));
    for e in std::fs::read_dir(&out).unwrap() {
        let md = e.unwrap().metadata().unwrap();
        assert_eq!((md.uid(), md.mode() & 0o777), (65534, 0o600));
    }
    let trace = Trace::open(&out).unwrap();
    assert!(trace.meta.complete);
    // The short-lived `id` process was traced: it has kernel events.
    assert!(
        trace.threads.values().any(|t| t.comm == "id"),
        "no events of the traced command"
    );
}

/// Ctrl-C (SIGINT to jtrace) stops the command and still leaves a complete,
/// readable trace.
#[test]
fn sigint_stops_the_command_and_finalises_the_trace() {
    let classes = classes();
    let out = tempdir("sigint").join("t.jtrace");
    ensure_agent();
    let mut child = Command::new(jtrace())
        .args(["run", "--methods", "Sleeper.nap", "-o"])
        .arg(&out)
        .arg("--")
        .arg(java(JDKS[0]))
        .args(["-cp", classes.to_str().unwrap(), "Sleeper", "60000"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "jtrace did not stop after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130), "the JVM's exit on SIGINT is 130");
    let trace = Trace::open(&out).unwrap();
    assert!(trace.meta.complete);
    assert!(trace.threads.values().any(|t| t.java_name.as_deref() == Some("main")));
    // nap never returned: it shows as an unfinished invocation, still exact.
    assert_exact(&trace);
    assert!(text(&out).contains("[no exit recorded]"));
}

/// Bad input: an unknown command gives a clear error, not a panic.
#[test]
fn missing_command_is_a_clear_error() {
    let out = tempdir("nocmd").join("t.jtrace");
    let o = jtrace_run(&out, &[], &["/nonexistent/command"]);
    assert_eq!(o.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot run /nonexistent/command"));
    assert!(!out.exists());
    let o = Command::new(jtrace())
        .args(["text", "/nonexistent.jtrace"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    // Said as it is: the path does not exist.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("/nonexistent.jtrace does not exist"), "{err}");
    for view in [
        &["report"][..],
        &["info"],
        &["timeline", "-o", "/tmp/x.html"],
        &["export", "--format", "chrome"],
    ] {
        let o = Command::new(jtrace())
            .args(view)
            .arg("/nonexistent.jtrace")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{view:?}: {err}");
        assert!(err.contains("/nonexistent.jtrace does not exist"), "{view:?}: {err}");
    }
}

/// Whether a traced method had compiled code when each call began, from the
/// agent's JIT records: a hot method's first calls run interpreted, its last
/// ones compiled, and the report splits its calls accordingly; with the
/// JIT events switched off the report says it does not know (null).
#[test]
fn jit_state_at_entry() {
    let classes = classes();
    const CALLS: u64 = 200_000;
    for jdk in JDKS {
        let out = tempdir("jit").join("jit.jtrace");
        let java = java(jdk);
        // Foreground compilation: the call that triggers a compile waits for it,
        // so when compiled code runs does not depend on the machine's load.
        // Not inlined: inlined into main's OSR code, a call would run
        // compiled before `work` had code of its own (what the report's
        // "compiled" means), earlier or later with the compile queue's order.
        let cmd = [
            java.to_str().unwrap(),
            "-XX:-BackgroundCompilation",
            "-XX:CompileCommand=quiet",
            "-XX:CompileCommand=dontinline,JitWarm::work",
            "-cp",
            classes.to_str().unwrap(),
            "JitWarm",
        ];
        let n = CALLS.to_string();
        let o = jtrace_run(
            &out,
            &["--methods", "JitWarm.work", "--complete"],
            &[&cmd[..], &[n.as_str()]].concat(),
        );
        assert!(o.status.success(), "{jdk}: jtrace run failed");
        let trace = Trace::open(&out).unwrap();
        let work: Vec<_> = invocations(&trace)
            .into_iter()
            .filter(|(_, inv)| trace.methods[inv.method as usize].qualified() == "JitWarm.work")
            .map(|(t, inv)| (t.tgid, inv))
            .collect();
        assert_eq!(work.len() as u64, CALLS, "{jdk}");
        let (first, last) = (work[0], work[work.len() - 1]);
        assert_eq!(
            trace.jit.compiled_at(first.0, first.1.method, first.1.entry),
            Some(false),
            "{jdk}: first call"
        );
        assert_eq!(
            trace.jit.compiled_at(last.0, last.1.method, last.1.entry),
            Some(true),
            "{jdk}: last call"
        );
        let report = jtrace_merge::report::build_report(&trace, &Default::default());
        let m = report
            .methods
            .iter()
            .find(|m| m.name == "work")
            .expect("work in the report");
        let compiled = m.calls_compiled.expect("JIT state known");
        // Tiered compilation starts after ≈ 200 interpreted calls.
        assert!(
            compiled > CALLS / 2 && compiled < CALLS - 100,
            "{jdk}: {compiled} of {CALLS} compiled"
        );
        let first_compiled = m.first_compiled_ns.expect("compiled at some point");
        let since_start = first.1.entry - trace.meta.start_monotonic_ns;
        assert!(first_compiled > since_start, "{jdk}: compiled before the first call");
        let wall_compiled = m.wall_compiled_ns.unwrap();
        assert!(wall_compiled < m.wall_ns, "{jdk}");
        // Interpreted calls are slower: compared on the median CPU time of
        // a call, which a loaded machine's preemptions (in the wall, and
        // in a mean) do not move.
        let median_cpu = |compiled: bool| {
            let mut cpu: Vec<u64> = work
                .iter()
                .filter(|(pid, inv)| trace.jit.compiled_at(*pid, inv.method, inv.entry) == Some(compiled))
                .map(|(_, inv)| inv.breakdown.cpu)
                .collect();
            cpu.sort_unstable();
            cpu[cpu.len() / 2]
        };
        let (interp, jit) = (median_cpu(false), median_cpu(true));
        assert!(
            interp > jit,
            "{jdk}: interpreted calls are not slower ({interp} ns vs {jit} ns CPU)"
        );
        assert!(
            text_report(&out).contains("== JIT state at entry"),
            "{jdk}: no JIT section"
        );
        // The CSV export says it per call, the same way.
        let csv = Command::new(jtrace())
            .args(["export", "--format", "csv"])
            .arg(&out)
            .output()
            .expect("jtrace export");
        let csv = String::from_utf8_lossy(&csv.stdout);
        let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
        let col = header.iter().position(|h| *h == "compiled").expect("compiled column");
        let per_call = csv
            .lines()
            .filter(|l| l.contains(",JitWarm,work,"))
            .filter(|l| l.split(',').nth(col) == Some("true"))
            .count() as u64;
        assert_eq!(per_call, compiled, "{jdk}: CSV compiled calls");

        // The same with the agent's JIT events off: unknown, not "interpreted".
        let conf = tempdir("jit-off").join("jtrace.conf");
        std::fs::write(&conf, "include_method JitWarm work\njit off\n").unwrap();
        let out = tempdir("jit-off").join("jit.jtrace");
        let o = jtrace_run(
            &out,
            // --complete: work is trivial (a getter-like expression).
            &["--config", conf.to_str().unwrap(), "--complete"],
            &[&cmd[..], &["1000"]].concat(),
        );
        assert!(o.status.success(), "{jdk}: jtrace run failed");
        let trace = Trace::open(&out).unwrap();
        let report = jtrace_merge::report::build_report(&trace, &Default::default());
        let m = report
            .methods
            .iter()
            .find(|m| m.name == "work")
            .expect("work in the report");
        assert_eq!(
            (m.calls, m.calls_compiled, m.first_compiled_ns),
            (1000, None, None),
            "{jdk}"
        );
    }
}

/// `jtrace report` as text.
fn text_report(trace_dir: &std::path::Path) -> String {
    let o = Command::new(jtrace())
        .arg("report")
        .arg(trace_dir)
        .output()
        .expect("jtrace report");
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `--alloc-samples`: the report's allocation table names each sampled
/// class with the method and line that allocated it, and the bytes sampled
/// at each site follow what the program allocated there (int[64]: 272 bytes
/// × 10 000, byte[4096]: 4 112 × 1 000 per round, so about 40 % vs 60 %).
/// The streamed report agrees with the in-memory one.
#[test]
fn allocation_sites() {
    let classes = classes();
    for jdk in JDKS {
        let out = tempdir("alloc").join("alloc.jtrace");
        let java = java(jdk);
        let o = jtrace_run(
            &out,
            &["--alloc-samples"],
            &[
                java.to_str().unwrap(),
                "-cp",
                classes.to_str().unwrap(),
                "AllocSites",
                "100",
            ],
        );
        assert!(o.status.success(), "{jdk}: jtrace run failed");
        let trace = Trace::open(&out).unwrap();
        let report = jtrace_merge::report::build_report(&trace, &Default::default());
        let at = |class: &str| {
            report
                .allocations
                .iter()
                .filter(|a| a.class == class)
                .map(|a| (a.site.clone(), a.line, a.samples, a.sampled_bytes))
                .collect::<Vec<_>>()
        };
        let (ints, blocks) = (at("[I"), at("[B"));
        eprintln!("{jdk}: [I {ints:?}\n[B {blocks:?}");
        // ≈ 400 MB allocated: ≈ 800 samples.
        let (int_samples, block_samples): (u64, u64) =
            (ints.iter().map(|a| a.2).sum(), blocks.iter().map(|a| a.2).sum());
        assert!(
            int_samples + block_samples > 300,
            "{jdk}: {int_samples} + {block_samples} samples"
        );
        let main_site = |v: &[(String, i32, u64, u64)], site: &str, line: i32| {
            v.iter()
                .filter(|a| a.0 == site && a.1 == line)
                .map(|a| a.2)
                .sum::<u64>()
                * 10
                >= v.iter().map(|a| a.2).sum::<u64>() * 9
        };
        assert!(main_site(&ints, "AllocSites.ints", 14), "{jdk}: int[] sites {ints:?}");
        assert!(
            main_site(&blocks, "AllocSites.blocks", 20),
            "{jdk}: byte[] sites {blocks:?}"
        );
        // Sampling is by bytes: the byte[] share of samples ≈ 60 % (± 15).
        let share = block_samples * 100 / (int_samples + block_samples);
        assert!((45..=75).contains(&share), "{jdk}: byte[] {share} % of samples");
        assert!(text_report(&out).contains("AllocSites.blocks:20"), "{jdk}: text report");
        let streamed = jtrace_merge::report::build_report_streaming(
            &out,
            &Default::default(),
            &jtrace_merge::stream::StreamOptions {
                memory_budget: 1 << 20,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            serde_json::to_string(&streamed).unwrap(),
            serde_json::to_string(&report).unwrap(),
            "{jdk}: streamed report differs"
        );
    }
}

/// `trace` is a second name of the same program: `sudo trace run -- …`
/// records as `jtrace run` does, and its help and version say `trace`.
#[test]
fn trace_is_a_second_name_of_jtrace() {
    ensure_agent();
    let trace_bin = PathBuf::from(env!("CARGO_BIN_EXE_trace"));
    let v = Command::new(&trace_bin).arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&v.stdout).trim(),
        format!("trace {}", env!("CARGO_PKG_VERSION"))
    );
    let h = Command::new(&trace_bin).args(["run", "--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&h.stdout).contains("Usage: trace run"));
    let out = tempdir("trace-name").join("t.jtrace");
    let o = Command::new(&trace_bin)
        .args(["run", "-o"])
        .arg(&out)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let trace = Trace::open(&out).unwrap();
    assert!(trace.meta.complete && trace.meta.command == ["true"]);
}

/// CPU 0's steal time so far (ms): time the hypervisor ran something else
/// while this VM's CPU 0 had a task on it (/proc/stat, in USER_HZ ticks of
/// 10 ms).
fn cpu0_steal_ms() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let cpu0 = stat
        .lines()
        .find(|l| l.starts_with("cpu0 "))
        .expect("cpu0 in /proc/stat");
    let steal: u64 = cpu0
        .split_whitespace()
        .nth(8)
        .and_then(|v| v.parse().ok())
        .expect("steal column");
    steal * 10
}

/// A command that drops JAVA_TOOL_OPTIONS runs its JVM without the agent:
/// the run says so on stderr, and the report's problems say it too,
/// instead of suggesting `--methods` (which were given).
#[test]
fn a_jvm_without_the_agent_is_reported() {
    let out = tempdir("noagent").join("t.jtrace");
    let classes = classes();
    let o = jtrace_run(
        &out,
        &["--methods", "Sleeper.*"],
        &[
            "env",
            "-u",
            "JAVA_TOOL_OPTIONS",
            "java",
            "-cp",
            classes.to_str().unwrap(),
            "Sleeper",
            "50",
        ],
    );
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("WARNING: no JVM loaded jtrace's agent"), "{err}");
    let json: serde_json::Value = serde_json::from_slice(&jtrace_stdout(&["report", "--json"], &out)).unwrap();
    let problems = json["trace"]["problems"].as_array().unwrap();
    assert!(
        problems.iter().any(|p| p
            .as_str()
            .unwrap()
            .starts_with("no JVM wrote a stream though methods were asked for (Sleeper.*)")),
        "{problems:?}"
    );
    let text = String::from_utf8(jtrace_stdout(&["report"], &out)).unwrap();
    assert!(text.contains("no JVM wrote a stream"), "{text}");
    std::fs::remove_dir_all(out.parent().unwrap()).ok();
}

/// Two runs given one output: the second is refused while the first
/// records (it would have emptied the directory and mixed its streams
/// into the first's), and the first's trace is whole.
#[test]
fn a_second_run_into_a_recording_directory_is_refused() {
    ensure_agent();
    let out = tempdir("twice").join("t.jtrace");
    let first = Command::new(jtrace())
        .arg("run")
        .arg("-o")
        .arg(&out)
        .args(["--", "sleep", "3"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The first holds the directory (locked) before it writes meta.json.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !out.join("meta.json").exists() {
        assert!(Instant::now() < deadline, "the first run never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = jtrace_run(&out, &[], &["true"]);
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert!(err.contains("is being recorded into by another jtrace"), "{err}");
    let first = first.wait_with_output().unwrap();
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let trace = Trace::open(&out).unwrap();
    assert!(trace.meta.complete);
    assert_eq!(trace.meta.command, ["sleep", "3"]);
    // Once the first is done, the directory may be reused.
    let third = jtrace_run(&out, &[], &["true"]);
    assert!(third.status.success());
    assert_eq!(Trace::open(&out).unwrap().meta.command, ["true"]);
    std::fs::remove_dir_all(out.parent().unwrap()).ok();
}

/// A thread named to forge lines and drive the terminal (newline, a forged
/// `== Thread "main"` header, ESC, BEL, CR, a right-to-left override):
/// `text`, `report` and `info` print it escaped, inert, so no view carries
/// a control character or the forged line, and JSON keeps it visible.
#[test]
fn control_characters_in_names_are_escaped_in_every_view() {
    let out = tempdir("hostile").join("t.jtrace");
    let classes = classes();
    let o = jtrace_run(
        &out,
        &["--methods", "HostileNames.*"],
        &["java", "-cp", classes.to_str().unwrap(), "HostileNames"],
    );
    assert!(o.status.success());
    let escaped = "evil\\n== Thread \"main\" (forged)\\r\\x1b[2J\\x1b[31mred\\x07\\u{202e}txt";
    for view in [&["text"][..], &["report"], &["info"]] {
        let printed = jtrace_stdout(view, &out);
        let printed = String::from_utf8(printed).unwrap();
        let bad: Vec<char> = printed
            .chars()
            .filter(|&c| (c.is_control() && c != '\n') || c == '\u{202e}')
            .collect();
        assert!(bad.is_empty(), "{view:?} prints control characters {bad:?}");
        assert!(
            !printed.lines().any(|l| l.starts_with("== Thread \"main\" (forged)")),
            "{view:?} prints the forged line"
        );
        if view != ["info"] {
            assert!(printed.contains("\\x1b[2J"), "{view:?} hides the name:\n{printed}");
        }
    }
    let json: serde_json::Value = serde_json::from_slice(&jtrace_stdout(&["report", "--json"], &out)).unwrap();
    let names: Vec<&str> = (json["threads"].as_array().unwrap().iter())
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&escaped), "{names:?}");
    std::fs::remove_dir_all(out.parent().unwrap()).ok();
}
