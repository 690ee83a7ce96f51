//! Attacks on jtrace, which runs as root next to directories other users
//! control (docs/ARCHITECTURE.md invariant 6, docs/SECURITY.md). Each runs for real,
//! as root, with the unprivileged account `jtrace-test` (supplementary group
//! `jtrace-test-extra`; scripts/test-user.sh creates both) as the attacker,
//! and checks that the files it aimed at are exactly as before. The debug
//! files `--lines` reads: tests/lines.rs.

mod common;

use common::hostile::*;
use common::*;
use jtrace_merge::Trace;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// During `jtrace run` the command (the invoking user) plants links
/// in its trace directory to root's files: at `.meta.json.tmp` (root used
/// to write the metadata through it), in place of meta.json, as an extra
/// entry (root used to chown every entry to the user, following links), and
/// a FIFO (which must not hang the hand-over). The root files stay as they
/// were; the trace is complete and the user's; the planted entries are left
/// as they are, with a warning.
#[test]
fn links_planted_during_run_are_not_followed() {
    let u = test_user();
    let base = tempdir("sec-links");
    let secret = dir_of(base.join("secret"), 0, 0, 0o700);
    let v1 = root_file(&secret, "victim1", "root file one\n");
    let v2 = root_file(&secret, "victim2", "root file two\n");
    let v3 = root_file(&secret, "victim3", "root file three\n");
    let before = state(&secret);
    let home = dir_of(base.join("home"), u.uid, u.gid, 0o700);
    let out = home.join("t.jtrace");
    let plant = format!(
        "set -e; cd {o}; ln -s {v1} .meta.json.tmp; ln -s {v2} evil; rm meta.json; ln -s {v3} meta.json; mkfifo fifo",
        o = s(&out),
        v1 = s(&v1),
        v2 = s(&v2),
        v3 = s(&v3)
    );
    let o = jtrace_as(u.uid, u.gid, &["run", "-o", s(&out), "--", "sh", "-c", &plant]);
    assert!(o.status.success(), "jtrace run failed");
    assert_eq!(state(&secret), before, "root's files were changed");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("evil as it is") && err.contains("fifo as it is"), "{err}");
    // The metadata replaced the planted link; the trace is whole and the user's.
    let trace = Trace::open(&out).unwrap();
    assert!(trace.meta.complete);
    for name in ["meta.json", "kernel.bin", "agent.conf"] {
        let md = std::fs::symlink_metadata(out.join(name)).unwrap();
        assert!(md.is_file(), "{name}");
        assert_eq!((md.uid(), md.mode() & 0o777), (u.uid, 0o600), "{name}");
    }
    assert!(std::fs::symlink_metadata(out.join("evil"))
        .unwrap()
        .file_type()
        .is_symlink());
    let _ = std::fs::remove_dir_all(&base);
}

/// `--config` names a root-only file. jtrace reads it as the
/// invoking user, so it is refused, and nothing of it reaches the user (not
/// in jtrace's output, not in a trace directory). The same file readable
/// by the user works.
#[test]
fn config_is_read_as_the_invoking_user() {
    let u = test_user();
    let base = tempdir("sec-config");
    let secret_text = "include_method TopSecret4711.*\nTOP-SECRET-LINE-4711 not a directive\n";
    let secret = root_file(&base, "secret.conf", secret_text);
    let home = dir_of(base.join("home"), u.uid, u.gid, 0o700);
    let out = home.join("t.jtrace");
    let o = jtrace_as(
        u.uid,
        u.gid,
        &["run", "--config", s(&secret), "-o", s(&out), "--", "true"],
    );
    assert_eq!(o.status.code(), Some(1));
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(
        stderr.contains("cannot read config") && stderr.contains(&format!("uid {}", u.uid)),
        "{stderr}"
    );
    assert!(
        !stdout.contains("4711") && !stderr.contains("4711"),
        "the secret leaked"
    );
    assert!(!out.exists(), "a trace directory was left behind");
    assert!(std::fs::read_dir(&home).unwrap().next().is_none());

    // Control: the user's own copy is read, its lines reach the agent.
    let mine = home.join("mine.conf");
    std::fs::write(&mine, secret_text).unwrap();
    std::os::unix::fs::chown(&mine, Some(u.uid), Some(u.gid)).unwrap();
    let o = jtrace_as(
        u.uid,
        u.gid,
        &["run", "--config", s(&mine), "-o", s(&out), "--", "true"],
    );
    assert!(o.status.success());
    let conf = std::fs::read_to_string(out.join("agent.conf")).unwrap();
    assert!(conf.contains("include_method TopSecret4711.*"), "{conf}");
    let _ = std::fs::remove_dir_all(&base);
}

/// `-o` naming a symbolic link (here to a root directory) is
/// refused, and the link's target is left as it was.
#[test]
fn symlinked_output_is_refused() {
    let u = test_user();
    let base = tempdir("sec-olink");
    let rootdir = dir_of(base.join("rootdir"), 0, 0, 0o755);
    root_file(&rootdir, "keep", "root keeps this\n");
    let home = dir_of(base.join("home"), u.uid, u.gid, 0o700);
    let link = home.join("t.jtrace");
    std::os::unix::fs::symlink(&rootdir, &link).unwrap();
    let before = state(&rootdir);
    let o = jtrace_as(u.uid, u.gid, &["run", "-o", s(&link), "--", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("symbolic link"));
    assert_eq!(state(&rootdir), before);
    // The same for a link to an earlier trace of the user's own.
    let trace = home.join("real.jtrace");
    assert!(jtrace_as(u.uid, u.gid, &["run", "-o", s(&trace), "--", "true"])
        .status
        .success());
    let link2 = home.join("t2.jtrace");
    std::os::unix::fs::symlink(&trace, &link2).unwrap();
    let before = state(&trace);
    let o = jtrace_as(u.uid, u.gid, &["run", "-o", s(&link2), "--", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(state(&trace), before);
    let _ = std::fs::remove_dir_all(&base);
}

/// `-o` inside a directory only root may enter, or naming an
/// existing directory of root's, is refused: jtrace creates the directory
/// as the invoking user, and takes over none of another user's.
#[test]
fn output_the_user_could_not_create_is_refused() {
    let u = test_user();
    let base = tempdir("sec-oroot");
    let private = dir_of(base.join("private"), 0, 0, 0o700);
    let out = private.join("t.jtrace");
    let o = jtrace_as(u.uid, u.gid, &["run", "-o", s(&out), "--", "true"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cannot create") && err.contains("Permission denied"),
        "{err}"
    );
    assert!(!out.exists());
    // Missing parents are created as the user too: not under root's directory.
    let deep = private.join("a/b/t.jtrace");
    let o = jtrace_as(u.uid, u.gid, &["run", "-o", s(&deep), "--", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(!private.join("a").exists());
    // An empty directory of root's, in a directory the user can write.
    let shared = dir_of(base.join("shared"), 0, 0, 0o1777);
    let rootdir = dir_of(shared.join("t.jtrace"), 0, 0, 0o755);
    let before = state(&rootdir);
    let o = jtrace_as(u.uid, u.gid, &["run", "-o", s(&rootdir), "--", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("belongs to uid 0"),
        "no clear refusal"
    );
    assert_eq!(state(&rootdir), before);
    let _ = std::fs::remove_dir_all(&base);
}

/// Another user's trace in a shared directory is refused and left
/// as it was; the same user's earlier trace is replaced, as it always was.
#[test]
fn another_users_trace_is_refused_and_ones_own_replaced() {
    let u = test_user();
    let base = tempdir("sec-other");
    let out = base.join("t.jtrace");
    let o = jtrace_as(65534, 65534, &["run", "-o", s(&out), "--", "true"]);
    assert!(o.status.success());
    let before = state(&out);
    let o = jtrace_as(u.uid, u.gid, &["run", "-o", s(&out), "--", "true"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("belongs to uid 65534"), "{err}");
    assert_eq!(state(&out), before);

    let first = Trace::open(&out).unwrap().meta.start_realtime_ns;
    let o = jtrace_as(65534, 65534, &["run", "-o", s(&out), "--", "true"]);
    assert!(o.status.success(), "its own earlier trace was not replaced");
    let trace = Trace::open(&out).unwrap();
    assert!(trace.meta.complete && trace.meta.start_realtime_ns > first);
    let md = std::fs::metadata(&out).unwrap();
    assert_eq!((md.uid(), md.mode() & 0o777), (65534, 0o700));
    let _ = std::fs::remove_dir_all(&base);
}

/// The command runs as the invoking user with that account's
/// supplementary groups (as sudo and a login give them), and without
/// root's.
#[test]
fn command_keeps_the_users_supplementary_groups() {
    let u = test_user();
    let base = tempdir("sec-groups");
    let out = base.join("t.jtrace");
    let o = jtrace_as(
        u.uid,
        u.gid,
        &["run", "-o", s(&out), "--", "sh", "-c", "id -u; id -g; id -G"],
    );
    assert!(o.status.success());
    let stdout = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], u.uid.to_string());
    assert_eq!(lines[1], u.gid.to_string());
    let groups: Vec<u32> = lines[2].split_whitespace().map(|g| g.parse().unwrap()).collect();
    assert!(groups.contains(&u.extra_gid), "supplementary group lost: {groups:?}");
    assert!(!groups.contains(&0), "root's group kept: {groups:?}");

    // An id setresuid would read as "unchanged" (-1) is refused before
    // anything runs.
    let marker = base.join("ran");
    let out2 = base.join("t2.jtrace");
    let o = jtrace_as(u32::MAX, u.gid, &["run", "-o", s(&out2), "--", "touch", s(&marker)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("SUDO_UID=4294967295 is not a user or group id"));
    assert!(!marker.exists() && !out2.exists(), "the command ran");
    let _ = std::fs::remove_dir_all(&base);
}

/// Links and `--config` through `jtrace attach`, on a JVM of the test account
/// attached to by that account (through sudo):
/// * a third user planted a link at the attach trigger's name in the JVM's
///   shared working directory, to a file of the JVM's user: it is not
///   followed (the file is not truncated), the attach still works;
/// * `--config` naming a root-only file is refused without showing it;
/// * while recording, the JVM's user plants links to root's files at
///   `.meta.json.tmp` and as an extra entry: root's files stay as they were,
///   and the trace is complete and handed to the invoking user.
#[test]
fn attach_follows_no_planted_link() {
    let u = test_user();
    let base = tempdir("sec-attach");
    let secret = dir_of(base.join("secret"), 0, 0, 0o700);
    let v1 = root_file(&secret, "victim1", "root file one\n");
    let v2 = root_file(&secret, "victim2", "root file two\n");
    let conf = root_file(&secret, "secret.conf", "TOP-SECRET-LINE-4711\n");
    let before = state(&secret);
    let jvm_home = dir_of(base.join("jvm-home"), u.uid, u.gid, 0o755);
    let precious = jvm_home.join("precious");
    std::fs::write(&precious, "the JVM user's data\n").unwrap();
    std::os::unix::fs::chown(&precious, Some(u.uid), Some(u.gid)).unwrap();
    let cwd = dir_of(base.join("cwd"), 0, 0, 0o777);
    let (mut child, _stdout) = start_jvm_as(u, &cwd, &jvm_home.join("times.txt"));
    let pid = child.id();
    let trigger = cwd.join(format!(".attach_pid{pid}"));
    let planted = Command::new("ln")
        .arg("-s")
        .arg(&precious)
        .arg(&trigger)
        .uid(65534)
        .gid(65534)
        .status()
        .unwrap();
    assert!(planted.success());

    let out = base.join("a.jtrace");
    let o = jtrace_as(
        u.uid,
        u.gid,
        &["attach", &pid.to_string(), "--config", s(&conf), "-o", s(&out)],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot read config") && !err.contains("4711"), "{err}");
    assert!(!out.exists());

    ensure_agent();
    let mut j = Command::new(jtrace())
        .args([
            "attach",
            &pid.to_string(),
            "--duration",
            "3s",
            "--methods",
            "AttachTarget.work",
            "-o",
        ])
        .arg(&out)
        .env("SUDO_UID", u.uid.to_string())
        .env("SUDO_GID", u.gid.to_string())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(j.stderr.take().unwrap());
    let mut log = String::new();
    let t0 = Instant::now();
    while !log.contains("recording") {
        let mut l = String::new();
        if err.read_line(&mut l).unwrap() == 0 || t0.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("attach did not start: {log}");
        }
        log.push_str(&l);
    }
    let plant = format!(
        "ln -s {} {o}/.meta.json.tmp && ln -s {} {o}/evil",
        s(&v1),
        s(&v2),
        o = s(&out)
    );
    let planted = Command::new("sh")
        .args(["-c", &plant])
        .uid(u.uid)
        .gid(u.gid)
        .status()
        .unwrap();
    assert!(
        planted.success(),
        "the JVM's user could not plant links in its trace directory"
    );
    let status = j.wait().unwrap();
    err.read_to_string(&mut log).unwrap();
    eprintln!("--- jtrace attach stderr\n{log}");
    drop(child.stdin.take());
    let _ = child.wait();
    assert!(status.success(), "attach failed");

    assert_eq!(state(&secret), before, "root's files were changed");
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "the JVM user's data\n");
    assert!(std::fs::symlink_metadata(&trigger).unwrap().file_type().is_symlink());
    assert!(log.contains("evil as it is"), "{log}");
    let trace = Trace::open(&out).unwrap();
    assert!(trace.meta.complete);
    let md = std::fs::metadata(&out).unwrap();
    assert_eq!((md.uid(), md.mode() & 0o777), (u.uid, 0o700));
    for name in ["meta.json", "kernel.bin", "agent.conf", &format!("jvm-{pid}.bin")] {
        let md = std::fs::symlink_metadata(out.join(name)).unwrap();
        assert!(md.is_file(), "{name}");
        assert_eq!((md.uid(), md.mode() & 0o777), (u.uid, 0o600), "{name}");
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// Root reading a user's trace: its MAPPING records name binaries by path,
/// and the user can point such a path at a root-only file (here a link to
/// a 0600 root copy of the very binary, same build id). The symbolizer
/// opens binaries with the trace owner's rights, so the function names in
/// the root-only copy stay unread: its frames are labelled, and info says
/// the binary was not found. The same path readable by the user is named;
/// a trace root owns is read with root's rights, through no link the
/// user could have put.
#[test]
fn binaries_a_users_trace_names_are_read_with_that_users_rights() {
    let u = test_user();
    let base = tempdir("sec-binary");
    let home = dir_of(base.join("home"), u.uid, u.gid, 0o700);
    let src = base.join("prog.c");
    std::fs::write(
        &src,
        // nap's caller is the frame a frame-pointer walk sees first (libc's
        // usleep keeps no frame pointer).
        "#include <unistd.h>\n__attribute__((noinline)) void nap(void) { usleep(100000); }\n\
         __attribute__((noinline)) void secret_nap_4711(void) { nap(); }\n\
         int main(void) { for (int i = 0; i < 3; i++) secret_nap_4711(); return 0; }\n",
    )
    .unwrap();
    let prog = home.join("prog");
    let st = Command::new("cc")
        .args(["-O0", "-fno-omit-frame-pointer", "-o"])
        .arg(&prog)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success(), "cc failed");
    std::os::unix::fs::chown(&prog, Some(u.uid), Some(u.gid)).unwrap();
    let out = home.join("t.jtrace");
    let o = jtrace_as(u.uid, u.gid, &["run", "-o", s(&out), "--", s(&prog)]);
    assert!(o.status.success());
    let collapsed = || {
        let o = Command::new(jtrace())
            .args(["export", "--format", "collapsed", "--all"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let info = || {
        let o = Command::new(jtrace()).arg("info").arg(&out).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    // Control: the user's own binary is named.
    assert!(collapsed().contains("secret_nap_4711"), "{}", collapsed());

    // The attack: the recorded path now leads to a root-only copy.
    let rootdir = dir_of(base.join("rootdir"), 0, 0, 0o700);
    let secret = rootdir.join("prog");
    std::fs::copy(&prog, &secret).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::remove_file(&prog).unwrap();
    std::os::unix::fs::symlink(&secret, &prog).unwrap();
    let c = collapsed();
    assert!(
        !c.contains("secret_nap_4711"),
        "root read a root-only binary for the user:\n{c}"
    );
    assert!(c.contains("[prog+0x"), "its frames are labelled:\n{c}");
    let i = info();
    assert!(
        i.contains(&format!("{}: not found with the recorded build id", prog.display())),
        "{i}"
    );

    // A trace root owns is read with root's rights, but not through a
    // link in a directory the user can write: the binary is read only
    // where root put it.
    std::os::unix::fs::chown(&out, Some(0), Some(0)).unwrap();
    let c = collapsed();
    assert!(!c.contains("secret_nap_4711"), "root followed the user's link:\n{c}");
    std::fs::remove_file(&prog).unwrap();
    std::fs::copy(&secret, &prog).unwrap();
    assert!(collapsed().contains("secret_nap_4711"), "{}", collapsed());
    let _ = std::fs::remove_dir_all(&base);
}

/// Ring recordings: the root recorder creates kernel.bin's
/// chunks and deletes old chunks in the user's trace directory. The
/// command (the user) plants a link at the name of a chunk to come (root
/// must not write through it), a link and a file of its own under the
/// names of another stream's chunks (root must neither follow, read nor
/// delete them). Root's files stay as they were; the kernel stream stops at
/// the planted name, which is said and counted; the planted entries stay;
/// the trace reads.
#[test]
fn ring_chunks_follow_no_planted_link() {
    let u = test_user();
    let base = tempdir("sec-ring");
    let secret = dir_of(base.join("secret"), 0, 0, 0o700);
    let v1 = root_file(&secret, "victim1", "root file one\n");
    let v2 = root_file(&secret, "victim2", "root file two\n");
    let before = state(&secret);
    let home = dir_of(base.join("home"), u.uid, u.gid, 0o700);
    let out = home.join("t.jtrace");
    let plant = format!(
        "set -e; cd {o}; ln -s {v1} kernel.000002.bin; ln -s {v2} jvm-1.000000.bin; echo mine > jvm-1.000001.bin; \
         echo junk > jvm-1.000002.bin; dd if=/dev/zero of=/dev/null bs=1 count=600000 2>/dev/null",
        o = s(&out),
        v1 = s(&v1),
        v2 = s(&v2)
    );
    let o = jtrace_as(
        u.uid,
        u.gid,
        &[
            "run",
            "--syscalls",
            "all",
            "--max-size",
            "32M",
            "-o",
            s(&out),
            "--",
            "sh",
            "-c",
            &plant,
        ],
    );
    assert!(o.status.success(), "jtrace run failed");
    assert_eq!(state(&secret), before, "root's files were changed");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot begin chunk 2"), "{err}");
    for link in ["kernel.000002.bin", "jvm-1.000000.bin"] {
        let md = std::fs::symlink_metadata(out.join(link)).unwrap();
        assert!(md.file_type().is_symlink(), "{link}");
    }
    assert_eq!(std::fs::read_to_string(out.join("jvm-1.000001.bin")).unwrap(), "mine\n");
    let trace = Trace::open(&out).unwrap();
    assert!(trace.meta.complete);
    assert_eq!(trace.meta.kernel_complete, Some(false));
    assert!(trace.kernel_records > 0);
    let _ = std::fs::remove_dir_all(&base);
}
