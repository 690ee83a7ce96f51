//! Shared set-up of the end-to-end tests: the JDKs, compiled Java test
//! programs, the agent library next to the jtrace binary, and helpers to run
//! `jtrace run` and check the merged result.
#![allow(dead_code)]

pub mod browser;
pub mod cgroup;
pub mod containers;
pub mod hostile;

use jtrace_merge::{analyze, Invocation, ThreadInfo, Trace, Visitor};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The JDKs every JVM test runs on: Debian's OpenJDK 17 (first: the
/// default, whose javac compiles the test programs), JDK 11 and 21 (the
/// Temurin runtimes scripts/test-jdks.sh installs into target/jdks) and
/// Temurin 25.
pub const JDKS: [&str; 4] = [
    JDK17,
    concat!(env!("CARGO_MANIFEST_DIR"), "/target/jdks/11"),
    JDK21,
    JDK25,
];

/// Debian's OpenJDK 17, the system's `java` and `javac`.
pub const JDK17: &str = "/usr/lib/jvm/java-17-openjdk-amd64";
/// JDK 21 (Temurin runtime, no javac), the first with virtual threads.
pub const JDK21: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/target/jdks/21");
/// Temurin 25.
pub const JDK25: &str = "/usr/lib/jvm/temurin-25-jdk-amd64";

/// The `--lib-calls` spec of zlib's `inflate` as `jdk` calls it: the
/// system's libz.so.1 when its libzip.so links it (Debian's 17, Temurin
/// 11), else the copy inside libzip.so (Temurin 21 and 25).
pub fn inflate_spec(jdk: &str) -> String {
    let libzip = Path::new(jdk).join("lib/libzip.so");
    let data = std::fs::read(&libzip).unwrap_or_else(|e| panic!("{}: {e}", libzip.display()));
    // The dynamic section names the libraries it needs in .dynstr.
    if data.windows(10).any(|w| w == b"libz.so.1\0") {
        "libz.so.1:inflate".to_string()
    } else {
        format!("{}:inflate", libzip.display())
    }
}

/// The JDKs with virtual threads.
pub const VIRTUAL_THREAD_JDKS: [&str; 2] = [JDK21, JDK25];

/// The `java` launcher of `jdk`; a missing JDK fails the test.
pub fn java(jdk: &str) -> PathBuf {
    let p = Path::new(jdk).join("bin/java");
    assert!(
        p.is_file(),
        "JDK missing: {} (the tests need JDK 11, 17, 21 and 25; scripts/setup.sh installs 11 and 21)",
        p.display()
    );
    p
}

/// A short name of `jdk` for messages: "jdk11", "jdk17", ...
pub fn jdk_name(jdk: &str) -> String {
    let release = std::fs::read_to_string(Path::new(jdk).join("release")).unwrap_or_default();
    let version = release
        .lines()
        .find_map(|l| l.strip_prefix("JAVA_VERSION="))
        .map(|v| v.trim_matches('"').split('.').next().unwrap_or("").to_string())
        .unwrap_or_default();
    format!("jdk{version}")
}

pub fn jtrace() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_jtrace"))
}

/// Builds the agent cdylib in the same profile as the jtrace binary, once.
pub fn ensure_agent() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let release = jtrace().components().any(|c| c.as_os_str() == "release");
        let mut cmd = Command::new(env!("CARGO"));
        // The features of the workspace's test build (scripts/test.sh), so
        // that the library is not built anew for them.
        cmd.args(["build", "-q", "-p", "jtrace-agent", "--all-features"]);
        if release {
            cmd.arg("--release");
        }
        let st = cmd.current_dir(env!("CARGO_MANIFEST_DIR")).status().expect("run cargo");
        assert!(st.success(), "building the agent failed");
        let so = jtrace().parent().unwrap().join("libjtrace_agent.so");
        assert!(so.is_file(), "agent not at {}", so.display());
    });
}

/// A fresh directory under the system temp dir, shared like /tmp (mode
/// 1777): a test's invoking user (SUDO_UID) creates its trace directory
/// there, as jtrace only creates one its user could create. It is removed
/// when the test process exits, unless a test of the process failed
/// (then it stays, to be looked at: see [`remove_at_exit`]).
pub fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jtrace-test-{}-{}-{}", name, std::process::id(), rand_suffix()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o1777)).unwrap();
    remove_at_exit(&d);
    d
}

/// One test of this binary at a time, for tests that measure delays on
/// CPUs that the others would load (spinners, JVMs, block I/O): hold the
/// guard for the test's length. A test that panicked does not poison it.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Directories to remove when the test process exits.
static AT_EXIT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
/// A test of this process panicked (failed): its directories stay.
static PANICKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Removes `dir` when the test process exits (traces take hundreds of
/// megabytes a test), unless a test panicked: then every directory of the
/// process stays and their paths are printed. A guard per directory would
/// not do: most tests give away only a path inside theirs.
pub fn remove_at_exit(dir: &Path) {
    static HOOKED: OnceLock<()> = OnceLock::new();
    HOOKED.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICKED.store(true, std::sync::atomic::Ordering::SeqCst);
            previous(info)
        }));
        // libtest leaves through exit(3) (or returns from main), which runs these.
        unsafe { libc::atexit(clean_up_at_exit) };
    });
    AT_EXIT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(dir.to_path_buf());
}

extern "C" fn clean_up_at_exit() {
    let dirs = std::mem::take(&mut *AT_EXIT.lock().unwrap_or_else(|e| e.into_inner()));
    if PANICKED.load(std::sync::atomic::Ordering::SeqCst) {
        for d in &dirs {
            eprintln!("kept for inspection: {}", d.display());
        }
        return;
    }
    for d in dirs {
        let _ = std::fs::remove_dir_all(d);
    }
}

fn rand_suffix() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_nsec as u64
}

/// The Java test programs of tests/java and the demo, compiled once for
/// Java 11 (JDK 17's javac), so every JDK of [`JDKS`] runs them.
pub fn classes() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = tempdir("classes");
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut srcs: Vec<PathBuf> = std::fs::read_dir(root.join("tests/java"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "java"))
            .collect();
        srcs.push(root.join("examples/demo/Demo.java"));
        let javac = Path::new(JDK17).join("bin/javac");
        let st = Command::new(javac)
            .args(["--release", "11", "-Xlint:-options", "-nowarn"])
            .arg("-d")
            .arg(&out)
            .args(&srcs)
            .status()
            .expect("run javac");
        assert!(st.success(), "javac failed");
        out
    })
    .clone()
}

/// Runs `jtrace run <args> -- <cmd>` and returns its output.
pub fn jtrace_run(out: &Path, args: &[&str], cmd: &[&str]) -> Output {
    jtrace_run_env(out, args, cmd, &[])
}

/// [`jtrace_run`] with extra environment variables for jtrace.
pub fn jtrace_run_env(out: &Path, args: &[&str], cmd: &[&str], env: &[(&str, &str)]) -> Output {
    ensure_agent();
    let o = Command::new(jtrace())
        .envs(env.iter().copied())
        .arg("run")
        .arg("-o")
        .arg(out)
        .args(args)
        .arg("--")
        .args(cmd)
        .output()
        .expect("run jtrace");
    eprintln!("--- jtrace stdout\n{}", String::from_utf8_lossy(&o.stdout));
    eprintln!("--- jtrace stderr\n{}", String::from_utf8_lossy(&o.stderr));
    o
}

/// Every invocation of a trace, with its thread.
#[derive(Default)]
pub struct Invocations(pub Vec<(ThreadInfo, Invocation)>);

impl Visitor for Invocations {
    fn exit(&mut self, t: &ThreadInfo, _depth: usize, inv: &Invocation) {
        self.0.push((t.clone(), *inv));
    }
}

pub fn invocations(trace: &Trace) -> Vec<(ThreadInfo, Invocation)> {
    let mut v = Invocations::default();
    analyze(trace, &mut v);
    v.0
}

/// Checks docs/ARCHITECTURE.md invariant 3 on every invocation and thread of a trace.
pub fn assert_exact(trace: &Trace) {
    for (t, inv) in invocations(trace) {
        let b = inv.breakdown;
        assert!(
            b.is_exact(),
            "wall {} != cpu {} + off {} for {} on tid {}",
            b.wall,
            b.cpu,
            b.off.total(),
            trace.methods[inv.method as usize].qualified(),
            t.tid
        );
        assert_eq!(b.wall, inv.exit - inv.entry);
    }
    assert_threads_exact(&jtrace_merge::build_report(trace, &Default::default()));
}

/// Checks that every thread of a report splits its wall time exactly.
pub fn assert_threads_exact(r: &jtrace_merge::report::Report) {
    for th in &r.threads {
        assert_eq!(
            th.wall_ns,
            th.cpu_ns + th.off_cpu_ns.total() + th.not_covered_ns,
            "thread {} not exact",
            th.tid
        );
    }
}

/// Standard output of `jtrace <args> TRACE`, which must succeed.
pub fn jtrace_stdout(args: &[&str], trace: &Path) -> Vec<u8> {
    let o = Command::new(jtrace()).args(args).arg(trace).output().unwrap();
    assert!(
        o.status.success(),
        "jtrace {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// `jtrace text` of `trace_dir`.
pub fn text(trace_dir: &Path) -> String {
    String::from_utf8(jtrace_stdout(&["text"], trace_dir)).unwrap()
}

/// Records GroundTruth `scenario` (50 ms delays) on `jdk` with its methods
/// and java.util traced and every syscall recorded (`--syscalls all`), plus
/// `extra` jtrace options: a real trace rich in every kind of record.
pub fn record_ground_truth(jdk: &str, scenario: &str, extra: &[&str]) -> PathBuf {
    let classes = classes();
    let out = tempdir(&format!("gt-rich-{scenario}")).join("t.jtrace");
    let mut args = vec![
        "--methods",
        "GroundTruth.*,java.util.*",
        "--syscalls",
        "all",
        "--complete",
    ];
    args.extend_from_slice(extra);
    let java = java(jdk);
    let o = jtrace_run(
        &out,
        &args,
        &[
            java.to_str().unwrap(),
            "-cp",
            classes.to_str().unwrap(),
            "GroundTruth",
            scenario,
            "50",
        ],
    );
    assert!(o.status.success(), "{jdk} {scenario}: jtrace run failed");
    out
}

/// The output of `program args…` and its peak resident set in KiB, as
/// GNU time measures it (`/usr/bin/time`, Debian's `time`): the rusage of
/// a child forked from a large test process would count the test's own
/// memory, from before the exec.
pub fn run_measured(program: &Path, args: &[&std::ffi::OsStr]) -> (Output, u64) {
    let report = tempdir("rss").join("time");
    let o = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&report)
        .arg(program)
        .args(args)
        .output()
        .expect("run /usr/bin/time (Debian package `time`)");
    let kib = std::fs::read_to_string(&report)
        .ok()
        .and_then(|s| s.lines().last().and_then(|l| l.trim().parse().ok()))
        .expect("GNU time's report");
    let _ = std::fs::remove_file(&report);
    (o, kib)
}

/// The unprivileged test account `jtrace-test` (scripts/test-user.sh
/// creates it): (uid, gid).
pub fn test_user_ids() -> (u32, u32) {
    static IDS: OnceLock<(u32, u32)> = OnceLock::new();
    *IDS.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test-user.sh");
        let st = Command::new("bash").arg(script).status().expect("run test-user.sh");
        assert!(st.success(), "cannot create the test account jtrace-test");
        let id = |flag: &str| -> u32 {
            let o = Command::new("id").args([flag, "jtrace-test"]).output().unwrap();
            String::from_utf8(o.stdout).unwrap().trim().parse().unwrap()
        };
        (id("-u"), id("-g"))
    })
}

/// A tmpfs of a given size mounted on a fresh directory (mode 1777), for
/// the full-disk tests (root); unmounted when dropped.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    pub fn new(name: &str, size: &str) -> Tmpfs {
        let dir = tempdir(name).join("fs");
        std::fs::create_dir_all(&dir).unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=1777"), "tmpfs"])
            .arg(&dir)
            .status()
            .expect("run mount");
        assert!(
            st.success(),
            "cannot mount a tmpfs on {} (the test needs root)",
            dir.display()
        );
        Tmpfs(dir)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
    }
}

/// The three counts a test program's summary line prints
/// (`FIRST n1 name2 n2 name3 n3`): Demotion.java's tiny, napper and
/// socketWait; Trivial.java's value, crunch and napper.
pub fn summary_counts(stdout: &[u8], first: &str) -> (u64, u64, u64) {
    let s = String::from_utf8_lossy(stdout);
    let line = s
        .lines()
        .find(|l| l.starts_with(&format!("{first} ")))
        .unwrap_or_else(|| panic!("no summary line starting with {first}:\n{s}"));
    let w: Vec<&str> = line.split_whitespace().collect();
    (w[1].parse().unwrap(), w[3].parse().unwrap(), w[5].parse().unwrap())
}

/// Calls of each method in a report, by method name.
pub fn calls_by_name(r: &jtrace_merge::report::Report) -> std::collections::HashMap<String, u64> {
    r.methods.iter().map(|m| (m.name.clone(), m.calls)).collect()
}

/// Runs the Python script `script` (a path from the repository's root)
/// with `args` and its packages from target/pydeps (scripts/test-python.sh
/// installs them, and runs first), and returns its standard output. Fails
/// the test if either fails.
pub fn python_script(script: &str, args: &[&std::ffi::OsStr]) -> Vec<u8> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let setup = Command::new("bash")
        .arg(root.join("scripts/test-python.sh"))
        .status()
        .unwrap();
    assert!(setup.success(), "scripts/test-python.sh failed");
    let out = Command::new("python3")
        .arg(root.join(script))
        .args(args)
        .env("PYTHONPATH", root.join("target/pydeps"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `jtrace report` of `trace`: its text (the command must succeed).
pub fn report_text(trace: &Path) -> String {
    String::from_utf8(jtrace_stdout(&["report"], trace)).unwrap()
}

/// `jtrace report --json` of `trace`, parsed (the command must succeed).
pub fn report_json(trace: &Path) -> serde_json::Value {
    serde_json::from_slice(&jtrace_stdout(&["report", "--json"], trace)).unwrap()
}
