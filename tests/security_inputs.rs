//! Files the invoking user names, which root reads for them
//! (docs/SECURITY.md, "Files the user names"): the `libjvm.so` of the
//! command's JDK, `--lib-calls` libraries and `--config`. Each attack is
//! played for real, as root invoked for the unprivileged account
//! `jtrace-test` (scripts/test-user.sh): jtrace refuses with a clear
//! message, keeps its memory small, answers a path the user cannot open
//! as it answers a missing one, and leaves no file of root's behind.

mod common;

use common::hostile::*;
use common::*;
use jtrace_format::{Decoder, Payload, FILE_HEADER_LEN};
use jtrace_symbols::hotspot::SAFEPOINT_BEGIN_SYMBOL;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The peak resident memory jtrace may reach on these small runs (its own
/// is ≈ 50 MiB here): far below the gigabyte a whole read would take.
const RSS_LIMIT_KIB: u64 = 200 << 10;

/// The system's C library: an ELF file every user can read.
const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";

/// `jtrace <args>` as root invoked through sudo by `u`, under GNU time:
/// its output and its peak resident set in KiB.
fn jtrace_measured_as(u: &TestUser, args: &[&str]) -> (Output, u64) {
    ensure_agent();
    let report = tempdir("sec-inputs-rss").join("time");
    let o = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&report)
        .arg(jtrace())
        .args(args)
        .env("SUDO_UID", u.uid.to_string())
        .env("SUDO_GID", u.gid.to_string())
        .output()
        .expect("run /usr/bin/time (Debian package `time`)");
    eprintln!("--- jtrace {args:?} stdout\n{}", String::from_utf8_lossy(&o.stdout));
    eprintln!("--- jtrace stderr\n{}", String::from_utf8_lossy(&o.stderr));
    let kib = std::fs::read_to_string(&report)
        .ok()
        .and_then(|s| s.lines().last().and_then(|l| l.trim().parse().ok()))
        .expect("GNU time's report");
    (o, kib)
}

/// `jtrace <args>` as [`jtrace_as`] does, killed if it has not ended
/// within `limit`: `None` then (it hung).
fn jtrace_within(u: &TestUser, args: &[&str], limit: Duration) -> Option<Output> {
    ensure_agent();
    let mut child = Command::new(jtrace())
        .args(args)
        .env("SUDO_UID", u.uid.to_string())
        .env("SUDO_GID", u.gid.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run jtrace");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait_with_output();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    eprintln!("--- jtrace {args:?} stderr\n{}", String::from_utf8_lossy(&o.stderr));
    Some(o)
}

/// Gives `path` to `u`.
fn give(u: &TestUser, path: &Path) {
    std::os::unix::fs::chown(path, Some(u.uid), Some(u.gid)).unwrap();
}

/// Everything under `dir` (itself included) that root owns.
fn root_owned(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let md = std::fs::symlink_metadata(dir).unwrap();
    if md.uid() == 0 {
        found.push(dir.to_path_buf());
    }
    if md.is_dir() {
        for e in std::fs::read_dir(dir).unwrap() {
            found.extend(root_owned(&e.unwrap().path()));
        }
    }
    found
}

/// A JDK of the user's own in `home/fj`: `bin/java` (a script: jtrace
/// finds the JDK's `libjvm.so` from the launcher's path, whatever it is)
/// and `lib/server/libjvm.so` as `make` leaves it; everything the user's.
fn fake_jdk(u: &TestUser, home: &Path, make: impl FnOnce(&Path)) -> (PathBuf, PathBuf) {
    let jdk = home.join("fj");
    std::fs::create_dir_all(jdk.join("bin")).unwrap();
    std::fs::create_dir_all(jdk.join("lib/server")).unwrap();
    let java = jdk.join("bin/java");
    std::fs::write(&java, "#!/bin/sh\necho fake java\n").unwrap();
    std::fs::set_permissions(&java, std::fs::Permissions::from_mode(0o755)).unwrap();
    let libjvm = jdk.join("lib/server/libjvm.so");
    make(&libjvm);
    for p in [
        &jdk,
        &jdk.join("bin"),
        &jdk.join("lib"),
        &jdk.join("lib/server"),
        &java,
        &libjvm,
    ] {
        give(u, p);
    }
    (java, libjvm)
}

/// Sets the size its section headers give the `.symtab` of the ELF64 file
/// at `path`.
fn set_symtab_size(path: &Path, size: u64) {
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut h = [0u8; 64];
    f.read_exact_at(&mut h, 0).unwrap();
    let shoff = u64::from_le_bytes(h[0x28..0x30].try_into().unwrap());
    let shentsize = u64::from(u16::from_le_bytes([h[0x3a], h[0x3b]]));
    let shnum = u64::from(u16::from_le_bytes([h[0x3c], h[0x3d]]));
    for i in 0..shnum {
        let at = shoff + i * shentsize;
        let mut sh = [0u8; 64];
        f.read_exact_at(&mut sh, at).unwrap();
        if u32::from_le_bytes(sh[4..8].try_into().unwrap()) == 2 {
            f.write_all_at(&size.to_le_bytes(), at + 0x20).unwrap();
            return;
        }
    }
    panic!("{}: no .symtab", path.display());
}

/// The (library, symbol) of the PROBE_DEF records of a trace.
fn probe_defs(trace: &Path) -> Vec<(String, String)> {
    let data = std::fs::read(trace.join("kernel.bin")).unwrap();
    Decoder::new(&data[FILE_HEADER_LEN..], FILE_HEADER_LEN)
        .filter_map(|r| match r.unwrap().payload {
            Payload::ProbeDef(p) => Some((p.library, p.symbol)),
            _ => None,
        })
        .collect()
}

/// The user's JDK has a `libjvm.so` jtrace must not read whole: a sparse
/// file of 1 TB (root used to allocate a terabyte for it and abort, its
/// trace left root's), a real `libjvm.so` made 1 GiB long (root used to
/// read the gigabyte), and one whose headers claim a `.symtab` of 900 MB.
/// Each: the run goes on, the file is refused with a clear message or
/// probed reading only its tables, jtrace's memory stays small, and
/// nothing under the user's home is root's.
#[test]
fn a_huge_libjvm_of_the_users_jdk_is_refused_in_bounded_memory() {
    let u = test_user();
    let real = Path::new(JDK17).join("lib/server/libjvm.so");
    let real = real.as_path();
    type Make<'a> = Box<dyn FnOnce(&Path) + 'a>;
    let cases: [(&str, Make, Option<&str>); 3] = [
        (
            "sparse",
            Box::new(|p: &Path| std::fs::File::create(p).unwrap().set_len(1 << 40).unwrap()),
            Some("libjvm.so: 1099511627776 bytes, more than the 4 GiB jtrace reads an ELF file of: its safepoints will not be recorded"),
        ),
        (
            "grown",
            Box::new(|p: &Path| {
                std::fs::copy(real, p).unwrap();
                std::fs::OpenOptions::new().write(true).open(p).unwrap().set_len(1 << 30).unwrap();
            }),
            None,
        ),
        (
            "symtab",
            Box::new(|p: &Path| {
                std::fs::copy(real, p).unwrap();
                std::fs::OpenOptions::new().write(true).open(p).unwrap().set_len(1 << 30).unwrap();
                set_symtab_size(p, 900 << 20);
            }),
            Some("libjvm.so: its headers and symbol tables take more than the 128 MiB jtrace reads of an ELF file: its safepoints will not be recorded"),
        ),
    ];
    for (name, make, refused) in cases {
        let base = tempdir(&format!("sec-libjvm-{name}"));
        let home = dir_of(base.join("home"), u.uid, u.gid, 0o700);
        let (java, libjvm) = fake_jdk(u, &home, make);
        let out = home.join("t.jtrace");
        let (o, kib) = jtrace_measured_as(u, &["run", "-o", s(&out), "--", s(&java)]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{name}: jtrace failed: {:?}\n{err}", o.status);
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "fake java\n",
            "{name}: the command ran"
        );
        assert!(kib < RSS_LIMIT_KIB, "{name}: jtrace's peak memory was {kib} KiB");
        let defs = probe_defs(&out);
        let probed = defs
            .iter()
            .any(|(lib, sym)| Path::new(lib) == libjvm && sym == SAFEPOINT_BEGIN_SYMBOL);
        match refused {
            Some(msg) => {
                assert!(err.contains(msg), "{name}: {err}");
                assert!(!probed, "{name}: {defs:?}");
            }
            None => {
                assert!(!err.contains("safepoints will not be recorded"), "{name}: {err}");
                assert!(probed, "{name}: the user's libjvm.so was not probed: {defs:?}");
            }
        }
        assert_eq!(
            root_owned(&home),
            Vec::<PathBuf>::new(),
            "{name}: root's files left behind"
        );
        let _ = std::fs::remove_dir_all(&base);
    }
}

/// `--lib-calls` naming a file in a directory only root may search
/// (0700): a file that is there (not an ELF file, or an ELF file without
/// the function) and one that is not get the same answer, the user's own
/// open's, and nothing runs or is left behind. Root used to answer "not
/// an ELF file" or "has no symbol f" for a file that is there and "no
/// such file" for one that is not. The user's own copy of a library, and
/// a library found by its name, are probed.
#[test]
fn lib_calls_in_a_directory_the_user_cannot_search_tell_nothing() {
    let u = test_user();
    let base = tempdir("sec-libcalls");
    let secret = dir_of(base.join("secret-dir"), 0, 0, 0o700);
    root_file(&secret, "x", "not an ELF file\n");
    std::fs::copy(LIBC, secret.join("libc.so")).unwrap();
    let before = state(&secret);
    let home = dir_of(base.join("home"), u.uid, u.gid, 0o700);
    let out = home.join("t.jtrace");
    let marker = home.join("ran");
    let answer = |name: &str| {
        let path = secret.join(name);
        let spec = format!("{}:f", s(&path));
        let o = jtrace_as(
            u.uid,
            u.gid,
            &["run", "--lib-calls", &spec, "-o", s(&out), "--", "touch", s(&marker)],
        );
        assert_eq!(o.status.code(), Some(2), "{name}");
        assert!(!marker.exists(), "{name}: the command ran");
        assert!(!out.exists(), "{name}: a trace was left behind");
        String::from_utf8_lossy(&o.stderr).replace(s(&path), "PATH")
    };
    let (there, elf, missing) = (answer("x"), answer("libc.so"), answer("missing"));
    assert_eq!(
        there, missing,
        "a file that is there reads differently from a missing one"
    );
    assert_eq!(
        elf, missing,
        "an ELF file that is there reads differently from a missing one"
    );
    assert!(
        missing.contains(&format!("cannot open PATH as uid {}: Permission denied", u.uid)),
        "{missing}"
    );
    assert_eq!(state(&secret), before);
    assert_eq!(root_owned(&home), Vec::<PathBuf>::new());

    // A FIFO of the user's does not hang jtrace.
    let fifo = home.join("fifo.so");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    give(u, &fifo);
    let spec = format!("{}:f", s(&fifo));
    let o = jtrace_within(
        u,
        &["run", "--lib-calls", &spec, "-o", s(&out), "--", "true"],
        Duration::from_secs(60),
    )
    .expect("jtrace hung on a FIFO");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a regular file"));
    std::fs::remove_file(&fifo).unwrap();

    // Control: the user's own copy of libc, and libc by its name.
    let mine = home.join("libmine.so");
    std::fs::copy(LIBC, &mine).unwrap();
    give(u, &mine);
    let spec = format!("{}:getpid,libc.so.6:getppid", s(&mine));
    let o = jtrace_as(
        u.uid,
        u.gid,
        &["run", "--lib-calls", &spec, "-o", s(&out), "--", "true"],
    );
    assert!(o.status.success());
    let defs = probe_defs(&out);
    assert!(defs.contains(&(s(&mine).to_string(), "getpid".to_string())), "{defs:?}");
    assert!(
        defs.contains(&("libc.so.6".to_string(), "getppid".to_string())),
        "{defs:?}"
    );
    assert_eq!(root_owned(&home), Vec::<PathBuf>::new());
    let _ = std::fs::remove_dir_all(&base);
}

/// `--config` naming what is no small regular file of the user's: a
/// sparse file of 100 MiB (root used to read it all and copy it into the
/// trace) and a FIFO (root used to wait for a writer forever). Both are
/// refused at once, and nothing is left behind.
#[test]
fn a_config_that_is_no_small_regular_file_is_refused() {
    let u = test_user();
    let base = tempdir("sec-config-size");
    let home = dir_of(base.join("home"), u.uid, u.gid, 0o700);
    let out = home.join("t.jtrace");
    let big = home.join("big.conf");
    std::fs::write(&big, "include_method Big.*\n").unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&big)
        .unwrap()
        .set_len(100 << 20)
        .unwrap();
    give(u, &big);
    let fifo = home.join("fifo.conf");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    give(u, &fifo);
    for (conf, why) in [(&big, "larger than 1024 KiB"), (&fifo, "not a regular file")] {
        let o = jtrace_within(
            u,
            &["run", "--config", s(conf), "-o", s(&out), "--", "true"],
            Duration::from_secs(60),
        )
        .unwrap_or_else(|| panic!("jtrace hung on --config {}", conf.display()));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!("cannot read config {} as uid {}: {why}", s(conf), u.uid)),
            "{err}"
        );
        assert!(!out.exists(), "a trace directory was left behind");
    }
    assert_eq!(root_owned(&home), Vec::<PathBuf>::new());
    let _ = std::fs::remove_dir_all(&base);
}
