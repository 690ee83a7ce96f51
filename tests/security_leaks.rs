//! What a trace handed to an ordinary user reveals (docs/SECURITY.md,
//! "What a trace reveals"): no kernel address when the kernel hides its
//! addresses from that user, and nothing of a process that user could
//! not ptrace. Each attack is played for real, as root invoked through
//! sudo by the unprivileged account `jtrace-test` (scripts/test-user.sh).
//! `JTRACE_BIN=/path/to/jtrace` plays them against another build (one
//! without these defences fails them).

mod common;

use common::hostile::*;
use common::*;
use jtrace_format::{Decoder, Payload, Record, EXEC_LEFT_OUT, FILE_HEADER_LEN, STACK_KERNEL};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The jtrace under test: this build's, or `JTRACE_BIN`'s.
fn jtrace_bin() -> PathBuf {
    ensure_agent();
    std::env::var_os("JTRACE_BIN").map_or_else(jtrace, PathBuf::from)
}

/// `jtrace <args>`, as root invoked through sudo by `u` (None: by root itself).
fn jtrace_by(u: Option<&TestUser>, args: &[&str]) -> Output {
    let mut cmd = Command::new(jtrace_bin());
    cmd.args(args).env_remove("SUDO_UID").env_remove("SUDO_GID");
    if let Some(u) = u {
        cmd.env("SUDO_UID", u.uid.to_string())
            .env("SUDO_GID", u.gid.to_string());
    }
    let o = cmd.output().expect("run jtrace");
    eprintln!("--- jtrace {args:?} stderr\n{}", String::from_utf8_lossy(&o.stderr));
    o
}

/// The stdout of a successful `jtrace <args>` (a view, run by root).
fn view(args: &[&str]) -> Vec<u8> {
    let o = jtrace_by(None, args);
    assert!(o.status.success(), "jtrace {args:?} failed");
    o.stdout
}

/// Sets a kernel sysctl for the life of the guard, then puts it back.
struct Sysctl {
    path: PathBuf,
    was: String,
}

impl Sysctl {
    fn set(name: &str, value: &str) -> Sysctl {
        let path = Path::new("/proc/sys/kernel").join(name);
        let was = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, value).unwrap();
        Sysctl { path, was }
    }
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        std::fs::write(&self.path, self.was.trim()).unwrap();
    }
}

/// The kernel's code addresses, as root reads them in /proc/kallsyms:
/// from its lowest symbol to 1 MiB past its highest.
fn kernel_range() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let addrs: Vec<u64> = text
        .lines()
        .filter_map(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
        .filter(|&a| a != 0)
        .collect();
    let (lo, hi) = (*addrs.iter().min().unwrap(), *addrs.iter().max().unwrap());
    assert!(
        lo >= 0xffff_8000_0000_0000,
        "root sees no kernel address in /proc/kallsyms"
    );
    (lo, hi.saturating_add(1 << 20))
}

/// Every value in `range` that `bytes` hold: as a little-endian u64 at
/// any offset, or written out as 16 hex digits or as a decimal number.
fn kernel_values(bytes: &[u8], (lo, hi): (u64, u64)) -> Vec<String> {
    let inside = |v: u64| (lo..=hi).contains(&v);
    let mut found: Vec<String> = (0..bytes.len().saturating_sub(7))
        .map(|i| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap()))
        .filter(|&v| inside(v))
        .map(|v| format!("{v:#x} (binary)"))
        .collect();
    let text = String::from_utf8_lossy(bytes);
    for word in text.split(|c: char| !c.is_ascii_alphanumeric()) {
        let word = word.trim_start_matches("0x");
        let as_hex = (word.len() == 16).then(|| u64::from_str_radix(word, 16).ok()).flatten();
        let as_dec = word.parse::<u64>().ok();
        if [as_hex, as_dec].into_iter().flatten().any(inside) {
            found.push(format!("{word} (text)"));
        }
    }
    found
}

/// The files under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The records of a trace's kernel stream.
fn kernel_records(trace: &Path) -> Vec<Record> {
    let data = std::fs::read(trace.join("kernel.bin")).unwrap();
    Decoder::new(&data[FILE_HEADER_LEN..], FILE_HEADER_LEN)
        .map(|r| r.unwrap())
        .collect()
}

/// `jtrace-test` records a JVM with kernel stacks (blocks and CPU
/// samples) while kernel.kptr_restrict keeps kernel addresses from it:
/// no file of the trace it gets holds a kernel address (KASLR stays
/// secret), yet the kernel frames are named, as root named them.
#[test]
fn a_user_the_kernel_hides_its_addresses_from_gets_none_in_the_trace() {
    let u = test_user();
    let range = kernel_range();
    let _hidden = Sysctl::set("kptr_restrict", "1");
    let home = dir_of(tempdir("sec-leaks-kaddr").join("home"), u.uid, u.gid, 0o700);
    let out = home.join("t.jtrace");
    let java = java(JDKS[0]);
    let classes = classes();
    let o = jtrace_by(
        Some(u),
        &[
            "run",
            "-o",
            s(&out),
            "--methods",
            "Sleeper.*",
            "--",
            s(&java),
            "-cp",
            s(&classes),
            "Sleeper",
            "200",
        ],
    );
    assert!(o.status.success(), "jtrace run failed");
    let recs = kernel_records(&out);
    let kernel_stacks = recs
        .iter()
        .filter(|r| matches!(&r.payload, Payload::Stack(s) if s.flags & STACK_KERNEL != 0))
        .count();
    assert!(kernel_stacks > 10, "only {kernel_stacks} kernel stacks recorded");
    let mut leaks = Vec::new();
    for f in files(&out) {
        let found = kernel_values(&std::fs::read(&f).unwrap(), range);
        if !found.is_empty() {
            leaks.push(format!(
                "{}: {} values, e.g. {:?}",
                f.display(),
                found.len(),
                &found[..found.len().min(5)]
            ));
        }
    }
    assert!(
        leaks.is_empty(),
        "kernel addresses in the user's trace:\n{}",
        leaks.join("\n")
    );
    // Named all the same, with the kernel's own names.
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let names: std::collections::HashSet<&str> = kallsyms.lines().filter_map(|l| l.split_whitespace().nth(2)).collect();
    let ksyms: Vec<String> = (recs.iter())
        .filter_map(|r| match &r.payload {
            Payload::Ksym(k) => Some(k.name.split(' ').next().unwrap().to_string()),
            _ => None,
        })
        .collect();
    assert!(
        !ksyms.is_empty() && ksyms.iter().all(|k| names.contains(k.as_str())),
        "{ksyms:?}"
    );
    let folded = String::from_utf8(view(&["export", "--format", "collapsed", s(&out)])).unwrap();
    let kernel_frames: Vec<&str> = (folded.lines())
        .flat_map(|l| l.split(';'))
        .filter(|f| f.ends_with("_[k]"))
        .collect();
    assert!(kernel_frames.len() > 10, "{folded}");
    assert!(
        kernel_frames.contains(&"do_syscall_64_[k]"),
        "no do_syscall_64 frame:\n{folded}"
    );
    assert!(!folded.contains("[unknown kernel"), "{folded}");
    assert!(
        !folded.contains("[kernel stack lost]"),
        "a renumbered id lost its stack:\n{folded}"
    );
    let info = String::from_utf8(view(&["info", s(&out)])).unwrap();
    assert!(info.contains("no kernel addresses"), "{info}");
}

/// A trace recorded with real kernel addresses (root invoked jtrace: root
/// sees them), its kernel stream then given the stand-ins a hidden trace
/// has: every view names every frame as before, to the byte.
#[test]
fn hidden_kernel_addresses_name_frames_exactly_as_real_ones() {
    let range = kernel_range();
    let out = tempdir("sec-leaks-views").join("t.jtrace");
    let o = jtrace_by(
        None,
        &[
            "run",
            "-o",
            s(&out),
            "--stack-min-block",
            "0",
            "--cpu-samples",
            "999",
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 0.1; cat /proc/version > /dev/null",
        ],
    );
    assert!(o.status.success(), "jtrace run failed");
    let kernel = std::fs::read(out.join("kernel.bin")).unwrap();
    assert!(
        !kernel_values(&kernel, range).is_empty(),
        "root's trace has real kernel addresses"
    );
    let views = |dir: &Path| -> Vec<(String, Vec<u8>)> {
        let d = s(dir);
        let mut v = vec![
            ("text".into(), view(&["text", d])),
            ("report".into(), view(&["report", d])),
            ("report --json".into(), view(&["report", "--json", d])),
            ("collapsed".into(), view(&["export", "--format", "collapsed", d])),
        ];
        for (format, file) in [("pprof", "p.pb.gz"), ("perfetto", "p.perfetto")] {
            let f = dir.parent().unwrap().join(file);
            view(&["export", "--format", format, "-o", s(&f), d]);
            v.push((format.into(), std::fs::read(&f).unwrap()));
        }
        let flame = dir.parent().unwrap().join("flame.html");
        view(&["flame", "-o", s(&flame), d]);
        v.push(("flame".into(), std::fs::read(&flame).unwrap()));
        v
    };
    let before = views(&out);
    let folded = String::from_utf8_lossy(&before[3].1).to_string();
    assert!(folded.matches("_[k]").count() > 10, "{folded}");
    let hidden = jtrace_bpf::hide_kernel_addresses(&kernel).unwrap();
    assert!(kernel_values(&hidden, range).is_empty(), "a kernel address is left");
    std::fs::write(out.join("kernel.bin"), &hidden).unwrap();
    let after = views(&out);
    // An address no symbol holds is labelled without it.
    let unknown = |b: &[u8]| -> Vec<u8> {
        let t = String::from_utf8_lossy(b);
        let mut out = String::new();
        let mut rest = &*t;
        while let Some(i) = rest.find("[unknown kernel 0x") {
            out.push_str(&rest[..i]);
            out.push_str("[unknown kernel]");
            rest = &rest[i..];
            rest = &rest[rest.find(']').unwrap() + 1..];
        }
        out.push_str(rest);
        out.into_bytes()
    };
    for ((name, b), (_, a)) in before.iter().zip(&after) {
        let b = if b.is_ascii() { unknown(b) } else { b.clone() };
        assert!(
            b == *a,
            "{name} differs:\n{}\n---\n{}",
            String::from_utf8_lossy(&b),
            String::from_utf8_lossy(a)
        );
    }
}

/// A copy of /bin/sleep in `dir` named `name`, root's, with `mode`
/// (setuid, setgid) and, if given, file capabilities.
fn privileged_sleep(dir: &Path, name: &str, mode: u32, caps: Option<&str>) -> PathBuf {
    let p = dir.join(name);
    std::fs::copy("/bin/sleep", &p).unwrap();
    std::os::unix::fs::chown(&p, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    if let Some(caps) = caps {
        let st = Command::new("setcap").arg(caps).arg(&p).status().expect("run setcap");
        assert!(st.success(), "setcap {caps} failed");
    }
    p
}

/// Whether `u` may read the memory map of `program` running as `u` would
/// run it: the kernel's own answer (ptrace_may_access).
fn user_may_read_maps(u: &TestUser, program: &Path) -> bool {
    let mut child = Command::new(program)
        .arg("5")
        .uid(u.uid)
        .gid(u.gid)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let read = Command::new("cat")
        .arg(format!("/proc/{}/maps", child.id()))
        .uid(u.uid)
        .gid(u.gid)
        .output()
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    read.status.success()
}

/// The traced command (`jtrace-test`'s) runs a setuid, a setgid and a
/// file-capability program under `--syscalls all`: the user may not
/// ptrace them, so nothing of them is recorded from their exec on (not a
/// syscall, not an mmap's address, not their memory map), and the report
/// says each was left out; the plain program after them is recorded.
#[test]
fn programs_the_user_may_not_trace_are_left_out_from_their_exec() {
    let u = test_user();
    let dir = tempdir("sec-leaks-suid");
    let plain = privileged_sleep(&dir, "plain-sleep", 0o755, None);
    let programs = [
        privileged_sleep(&dir, "suid-sleep", 0o4755, None),
        privileged_sleep(&dir, "sgid-sleep", 0o2755, None),
        privileged_sleep(&dir, "caps-sleep", 0o755, Some("cap_net_raw+p")),
    ];
    assert!(
        user_may_read_maps(u, &plain),
        "the user cannot read their own process's map"
    );
    for p in &programs {
        assert!(
            !user_may_read_maps(u, p),
            "{}: the kernel lets the user trace it",
            p.display()
        );
    }
    let home = dir_of(dir.join("home"), u.uid, u.gid, 0o700);
    let out = home.join("t.jtrace");
    let script = format!(
        "{} 0.2; {} 0.2; {} 0.2; {} 0.2",
        s(&programs[0]),
        s(&programs[1]),
        s(&programs[2]),
        s(&plain)
    );
    let o = jtrace_by(
        Some(u),
        &["run", "--syscalls", "all", "-o", s(&out), "--", "sh", "-c", &script],
    );
    assert!(o.status.success(), "jtrace run failed");
    let recs = kernel_records(&out);
    let exec = |name: &str| {
        (recs.iter())
            .find_map(|r| match &r.payload {
                Payload::Exec(e) if jtrace_format::comm_str(&e.comm) == name => Some((r.clone(), *e)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no EXEC of {name}"))
    };
    // What a record says of a process: its thread, or its own pid field.
    let of_process = |r: &Record, pid: u32| {
        let tgid = match &r.payload {
            Payload::SwitchOut(p) | Payload::SwitchOutStacks(p, _) => p.tgid,
            Payload::SwitchIn(p) => p.tgid,
            Payload::Wakeup(p) => p.tgid,
            Payload::Stack(p) => p.tgid,
            Payload::Mapping(p) => p.tgid,
            Payload::CpuSample(p) => p.tgid,
            Payload::BlockStack(p) => p.tgid,
            Payload::TaskNs(p) => p.tgid,
            Payload::Exit(p) | Payload::Comm(p) => p.tgid,
            _ => 0,
        };
        r.tid == pid || tgid == pid
    };
    let syscalls = |pid: u32, after: u64| {
        (recs.iter())
            .filter(|r| r.tid == pid && r.ts >= after && matches!(r.payload, Payload::Syscall(_)))
            .count()
    };
    for p in &programs {
        let name = p.file_name().unwrap().to_str().unwrap();
        let (rec, e) = exec(name);
        let pid = e.tgid;
        assert_eq!(syscalls(pid, rec.ts), 0, "{name}: its syscalls were recorded");
        let after: Vec<&Record> = (recs.iter()).filter(|r| r.ts > rec.ts && of_process(r, pid)).collect();
        assert!(after.is_empty(), "{name}: recorded after its exec: {after:?}");
        let maps: Vec<&Record> = (recs.iter())
            .filter(|r| matches!(&r.payload, Payload::Mapping(m) if m.tgid == pid && r.ts >= rec.ts))
            .collect();
        assert!(maps.is_empty(), "{name}: its memory map was recorded: {maps:?}");
        assert_eq!(e.flags & EXEC_LEFT_OUT, EXEC_LEFT_OUT, "{name}: not marked left out");
    }
    // The user's own program is recorded whole.
    let (rec, e) = exec("plain-sleep");
    assert_eq!(e.flags, 0);
    assert!(syscalls(e.tgid, rec.ts) > 5, "the plain program's syscalls are missing");
    let report = String::from_utf8(view(&["report", s(&out)])).unwrap();
    for p in &programs {
        let pid = exec(p.file_name().unwrap().to_str().unwrap()).1.tgid;
        assert!(report.contains(&format!("process {pid} was left out")), "{report}");
    }
    let json: serde_json::Value = serde_json::from_slice(&view(&["report", "--json", s(&out)])).unwrap();
    let problems = json["trace"]["problems"].to_string();
    assert_eq!(problems.matches("was left out").count(), 3, "{problems}");
}
