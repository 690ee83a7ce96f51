//! Shared set-up of the agent's end-to-end tests: the JDKs (both required,
//! never skipped), the agent library built in the tests' own profile,
//! scratch directories, javac, and decoding a JVM stream.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use jtrace_format::{FileHeader, Record, FILE_HEADER_LEN, JVM_MAGIC};

/// The JDKs every test runs on: Debian's OpenJDK 17 (first: its javac
/// compiles the test programs), JDK 11 and 21 (the Temurin runtimes
/// scripts/test-jdks.sh installs into target/jdks) and Temurin 25.
pub const JVMS: [&str; 4] = [
    JDK17,
    concat!(env!("CARGO_MANIFEST_DIR"), "/../target/jdks/11"),
    JDK21,
    "/usr/lib/jvm/temurin-25-jdk-amd64",
];

/// Debian's OpenJDK 17, the system's `java` and `javac`.
pub const JDK17: &str = "/usr/lib/jvm/java-17-openjdk-amd64";
/// JDK 21, the first with virtual threads.
pub const JDK21: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/jdks/21");

/// The `java` launchers of [`JVMS`]; a missing JDK fails the test.
pub fn jvms() -> Vec<PathBuf> {
    JVMS.iter().map(|h| launcher(h)).collect()
}

/// The `java` launcher of the JDK at `home`; a missing JDK fails the test.
pub fn launcher(home: &str) -> PathBuf {
    let j = Path::new(home).join("bin/java");
    assert!(
        j.is_file(),
        "JDK missing: {} (the tests need JDK 11, 17, 21 and 25; scripts/setup.sh installs 11 and 21)",
        j.display()
    );
    j
}

/// The feature release of the JDK a `java` launcher belongs to (11, 17...).
pub fn feature_version(java: &Path) -> u32 {
    let home = java.parent().and_then(Path::parent).expect("<home>/bin/java");
    let release = std::fs::read_to_string(home.join("release")).unwrap_or_default();
    release
        .lines()
        .find_map(|l| l.strip_prefix("JAVA_VERSION="))
        .and_then(|v| v.trim_matches('"').split('.').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no JAVA_VERSION in {}/release", home.display()))
}

/// Builds the agent cdylib in the profile of the running test binary (so a
/// release test never loads a stale library) and returns its path.
pub fn agent_so() -> &'static Path {
    static SO: OnceLock<PathBuf> = OnceLock::new();
    SO.get_or_init(|| {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "-p", "jtrace-agent"]).current_dir(manifest);
        if !cfg!(debug_assertions) {
            cmd.arg("--release");
        }
        assert!(
            cmd.status().expect("run cargo build").success(),
            "cargo build -p jtrace-agent failed"
        );
        // The test binary lives in <target>/<profile>/deps/, the cdylib in <target>/<profile>/.
        let exe = std::env::current_exe().expect("current_exe");
        let so = exe
            .parent()
            .and_then(Path::parent)
            .expect("target dir")
            .join("libjtrace_agent.so");
        assert!(so.is_file(), "{} not found after building", so.display());
        so
    })
}

/// A fresh directory under cargo's per-target temp dir.
pub fn scratch_dir(tag: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "jtrace-agent-test-{}-{}-{tag}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}

/// Compiles `sources` into `out` for Java `release` with the JDK 17 javac
/// (release 11 or lower: every JVM of [`JVMS`] runs the classes).
pub fn compile(out: &Path, release: &str, sources: &[PathBuf]) {
    let javac = Path::new(JDK17).join("bin/javac");
    let st = Command::new(javac)
        .args(["--release", release, "-Xlint:-options", "-nowarn", "-cp"])
        .arg(out)
        .arg("-d")
        .arg(out)
        .args(sources)
        .status()
        .expect("run javac");
    assert!(st.success(), "javac failed on {sources:?}");
}

/// Compiles one test program of tests/java once per test binary.
pub fn program(cell: &'static OnceLock<PathBuf>, source: &str) -> &'static Path {
    cell.get_or_init(|| {
        let out = scratch_dir("classes");
        compile(
            &out,
            "11",
            &[Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java").join(source)],
        );
        out
    })
}

/// How many records of each kind the one JVM stream in `out` holds, as
/// written (a METHOD_BATCH counts once, not expanded). Empty if there is none.
pub fn stream_kinds(out: &Path) -> std::collections::HashMap<u16, usize> {
    let mut kinds = std::collections::HashMap::new();
    let Some(file) = std::fs::read_dir(out).ok().and_then(|mut d| d.next()) else {
        return kinds;
    };
    let data = std::fs::read(file.expect("dir entry").path()).expect("read stream");
    let mut d = jtrace_format::Decoder::new(&data[FILE_HEADER_LEN..], FILE_HEADER_LEN);
    while let Some(Ok(r)) = d.next_raw() {
        *kinds.entry(r.kind).or_default() += 1;
    }
    kinds
}

/// The records of the one JVM stream the agent wrote into `out`, checked:
/// its file name, mode 0600, header and every record decodable. `None` if
/// the agent wrote nothing (the directory does not exist).
pub fn read_stream(out: &Path, what: &str) -> Option<Vec<Record>> {
    let files: Vec<PathBuf> = std::fs::read_dir(out)
        .ok()?
        .map(|e| e.expect("dir entry").path())
        .collect();
    assert_eq!(
        files.len(),
        1,
        "{what}: expected one stream in {}: {files:?}",
        out.display()
    );
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("jvm-") && name.ends_with(".bin"), "{what}: {name}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{what}: stream file mode");
    let data = std::fs::read(&files[0]).expect("read stream");
    assert_eq!(
        FileHeader::parse(&data).expect("file header").magic,
        JVM_MAGIC,
        "{what}"
    );
    Some(
        jtrace_format::Decoder::new(&data[FILE_HEADER_LEN..], FILE_HEADER_LEN)
            .map(|r| r.unwrap_or_else(|e| panic!("{what}: decode error: {e}")))
            .collect(),
    )
}

/// Whether a record is one of a thread's events, written in that thread's
/// time order. METHOD_DEFs are written ahead of the thread chunks (so they
/// precede every use), and the records that describe code for stacks
/// (CODE_BLOB, COMPILED_INLINE, METHOD_ADDRS, NATIVE_BIND) straight away by whichever
/// thread saw the code: neither is in a thread's time order. Nor are the
/// TRACER_WAIT spans of a thread's writes, which begin its next buffer
/// while events from before the write may still come (docs/FORMAT.md).
pub fn in_thread_order(p: &jtrace_format::Payload) -> bool {
    use jtrace_format::{kind, Payload};
    !matches!(
        p,
        Payload::MethodDef(_)
            | Payload::CodeBlob(_)
            | Payload::CompiledInline(_)
            | Payload::MethodAddrs(_)
            | Payload::NativeBind(_)
            | Payload::Jvm(kind::TRACER_WAIT_BEGIN | kind::TRACER_WAIT_END, _)
    )
}
