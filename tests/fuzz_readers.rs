//! The readers against damaged traces: a real trace
//! (the demo, recorded here with every syscall and its methods) mutated a
//! few hundred ways — bytes flipped, streams cut, record lengths and times
//! garbled, ranges zeroed or repeated, meta.json broken, streams emptied or
//! removed — and every reading command run on each mutant under a time
//! limit and an address-space limit. Each must end with status 0 or 1 (a
//! clear error), never a panic, a hang or a signal.
//!
//! Deterministic: the mutants come from a fixed seed (JTRACE_FUZZ_SEED
//! picks another, JTRACE_FUZZ_MUTANTS another count).

mod common;

use common::*;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// xorshift64*: small, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// The demo, recorded once: a real trace with every record kind jtrace
/// writes on a plain run (methods in batches, monitors, waits, sleeps,
/// sockets, files, GC, JIT, every syscall).
fn real_trace() -> PathBuf {
    let out = tempdir("fuzz-src").join("demo.jtrace");
    let classes = classes();
    let o = jtrace_run(
        &out,
        &["--methods", "Demo.*", "--syscalls", "all"],
        &[java(JDK17).to_str().unwrap(), "-cp", classes.to_str().unwrap(), "Demo"],
    );
    assert!(o.status.success(), "recording the demo failed");
    out
}

/// The stream files of a trace directory.
fn streams(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    v.sort();
    v
}

/// Applies one random mutation to the trace in `dir`; returns what it did.
fn mutate(dir: &Path, rng: &mut Rng) -> String {
    let files = streams(dir);
    let Some(f) = files.get(rng.below(files.len())).cloned() else {
        std::fs::write(dir.join("meta.json"), b"{").unwrap();
        return "no stream left; meta.json broken".into();
    };
    let name = f.file_name().unwrap().to_string_lossy().into_owned();
    let mut b = std::fs::read(&f).unwrap();
    let len = b.len().max(1);
    let what = match rng.below(11) {
        0 => {
            let n = 1 + rng.below(20);
            for _ in 0..n {
                let i = rng.below(len);
                if i < b.len() {
                    b[i] ^= 1 << rng.below(8);
                }
            }
            format!("{name}: {n} bits flipped")
        }
        1 => {
            let at = rng.below(len);
            b.truncate(at);
            format!("{name}: cut at {at}")
        }
        2 => {
            // A record length (at an 8-byte boundary past the header).
            let at = 16 + rng.below(len.saturating_sub(16) / 8) * 8;
            let v = rng.next() as u16;
            if at + 4 <= b.len() {
                b[at + 2..at + 4].copy_from_slice(&v.to_le_bytes());
            }
            format!("{name}: length {v} at {at}")
        }
        3 => {
            // A timestamp far away.
            let at = 16 + rng.below(len.saturating_sub(16) / 8) * 8;
            let v = rng.next() >> rng.below(64);
            if at + 16 <= b.len() {
                b[at + 8..at + 16].copy_from_slice(&v.to_le_bytes());
            }
            format!("{name}: ts {v} at {at}")
        }
        4 => {
            let at = rng.below(len).min(b.len());
            let n = rng.below(4096).min(b.len() - at);
            b[at..at + n].fill(0);
            format!("{name}: {n} bytes zeroed at {at}")
        }
        5 => {
            let n = rng.below(512);
            b.extend((0..n).map(|_| rng.next() as u8));
            format!("{name}: {n} random bytes appended")
        }
        6 => {
            // A chunk repeated elsewhere (times out of order, records twice).
            let from = rng.below(len);
            let n = rng.below(8192).min(b.len().saturating_sub(from));
            let chunk = b[from..from + n].to_vec();
            let to = rng.below(b.len() + 1);
            b.splice(to..to, chunk);
            format!("{name}: {n} bytes from {from} copied to {to}")
        }
        7 => {
            b.truncate(rng.below(16));
            format!("{name}: shorter than its header")
        }
        8 => {
            // The header: magic, version or flags.
            let i = rng.below(16);
            if i < b.len() {
                b[i] = rng.next() as u8;
            }
            format!("{name}: header byte {i}")
        }
        9 => {
            let meta = dir.join("meta.json");
            let mut m = std::fs::read(&meta).unwrap_or_default();
            let what = match rng.below(4) {
                0 => {
                    m.truncate(rng.below(m.len().max(1)));
                    "meta.json cut"
                }
                1 => {
                    let s = String::from_utf8_lossy(&m).replace("\"version\": 1", "\"version\": 99");
                    m = s.into_bytes();
                    "meta.json version 99"
                }
                2 => {
                    let s = String::from_utf8_lossy(&m)
                        .replace("\"complete\": true", "\"complete\": false")
                        .replace("\"end_monotonic_ns\"", "\"end_monotonic_ns_\"");
                    m = s.into_bytes();
                    "meta.json incomplete, no end"
                }
                _ => {
                    let i = rng.below(m.len().max(1));
                    if i < m.len() {
                        m[i] = rng.next() as u8;
                    }
                    "meta.json byte"
                }
            };
            std::fs::write(&meta, m).unwrap();
            return what.into();
        }
        _ => {
            std::fs::remove_file(&f).unwrap();
            return format!("{name}: removed");
        }
    };
    std::fs::write(&f, b).unwrap();
    what
}

/// Runs `jtrace args` with a time and an address-space limit; panics on
/// anything but status 0 or 1 without a panic message.
fn run_checked(args: &[&std::ffi::OsStr], what: &str) {
    let mut cmd = Command::new(jtrace());
    cmd.args(args).stdout(Stdio::null()).stderr(Stdio::piped());
    // SAFETY: setrlimit only, in the child before exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 4 << 30,
                rlim_max: 4 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let mut child = cmd.spawn().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: jtrace {args:?} hung (killed after 20 s)");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let err = reader.join().unwrap();
    assert!(
        status.signal().is_none() && matches!(status.code(), Some(0 | 1)),
        "{what}: jtrace {args:?} ended with {status:?}\n{err}"
    );
    assert!(!err.contains("panicked"), "{what}: jtrace {args:?} panicked\n{err}");
    if status.code() == Some(1) {
        assert!(err.starts_with("jtrace: "), "{what}: an error without a message: {err}");
    }
}

#[test]
fn damaged_traces_never_crash_the_readers() {
    let src = real_trace();
    let seed: u64 = std::env::var("JTRACE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1515);
    let mutants: usize = std::env::var("JTRACE_FUZZ_MUTANTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let mut rng = Rng(seed | 1);
    let work = tempdir("fuzz");
    let out = work.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let t0 = Instant::now();
    for i in 0..mutants {
        let dir = work.join(format!("m{i}.jtrace"));
        std::fs::create_dir_all(&dir).unwrap();
        for e in std::fs::read_dir(&src).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
        }
        let mut what = Vec::new();
        for _ in 0..1 + rng.below(3) {
            what.push(mutate(&dir, &mut rng));
        }
        let what = format!("seed {seed:#x} mutant {i} ({})", what.join("; "));
        let d = dir.as_os_str();
        let o = |s: &'static str| std::ffi::OsStr::new(s);
        let html = out.join("t.html");
        let json = out.join("t.json");
        // The commands spread over the mutants: every reader, each often.
        let commands: [Vec<&std::ffi::OsStr>; 4] = [
            vec![o("info"), d],
            vec![o("report"), o("--json"), d],
            vec![o("text"), o("--all"), d],
            vec![o("why"), d, o("--method"), o("Demo.*")],
        ];
        for c in &commands {
            run_checked(c, &what);
        }
        let views: [Vec<&std::ffi::OsStr>; 3] = [
            vec![o("timeline"), d, o("-o"), html.as_os_str()],
            vec![o("export"), d, o("--format"), o("chrome"), o("-o"), json.as_os_str()],
            vec![o("export"), d, o("--format"), o(["csv", "collapsed"][i % 2])],
        ];
        run_checked(&views[i % 3], &what);
        std::fs::remove_dir_all(&dir).unwrap();
    }
    eprintln!("{mutants} mutants in {:.1} s", t0.elapsed().as_secs_f64());
    std::fs::remove_dir_all(&work).unwrap();
    std::fs::remove_dir_all(src.parent().unwrap()).unwrap();
}

/// A stream replaced by something that is not a file: a link to
/// `/dev/zero` (endless zeros), a link to another trace's stream, a FIFO
/// (a read would wait forever). Every reader says so and reads the rest;
/// none panics, hangs or follows the link.
#[test]
fn streams_replaced_by_links_or_devices_are_refused() {
    let src = real_trace();
    let work = tempdir("fuzz-links");
    let names: Vec<String> = streams(&src)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n == "kernel.bin") && names.iter().any(|n| n.starts_with("jvm-")));
    let o = |s: &'static str| std::ffi::OsStr::new(s);
    for (i, name) in names.iter().enumerate() {
        for kind in ["/dev/zero", "other", "fifo"] {
            let dir = work.join(format!("m{i}-{}.jtrace", kind.replace('/', "")));
            std::fs::create_dir_all(&dir).unwrap();
            for e in std::fs::read_dir(&src).unwrap() {
                let e = e.unwrap();
                std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
            }
            let target = dir.join(name);
            std::fs::remove_file(&target).unwrap();
            match kind {
                "fifo" => assert!(Command::new("mkfifo").arg(&target).status().unwrap().success()),
                "other" => std::os::unix::fs::symlink(src.join(name), &target).unwrap(),
                dev => std::os::unix::fs::symlink(dev, &target).unwrap(),
            }
            let what = format!("{name} replaced by {kind}");
            let d = dir.as_os_str();
            for c in [
                vec![o("info"), d],
                vec![o("report"), o("--json"), d],
                vec![o("text"), o("--all"), d],
                vec![o("why"), d, o("--method"), o("Demo.*")],
                vec![o("export"), d, o("--format"), o("csv")],
            ] {
                run_checked(&c, &what);
            }
            let info = Command::new(jtrace()).arg("info").arg(&dir).output().unwrap();
            let said = String::from_utf8_lossy(&info.stdout) + String::from_utf8_lossy(&info.stderr);
            assert!(
                said.contains("not a regular file"),
                "{what}: info does not say so:\n{said}"
            );
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
    std::fs::remove_dir_all(&work).unwrap();
    std::fs::remove_dir_all(src.parent().unwrap()).unwrap();
}
