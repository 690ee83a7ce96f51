//! The attacker's side of the security tests (tests/security.rs,
//! tests/security_attach.rs): the unprivileged account `jtrace-test`, files
//! an attack aims at, and a look at them that shows any change.

use super::*;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};

/// The attacker's account.
pub struct TestUser {
    pub uid: u32,
    pub gid: u32,
    /// Its supplementary group `jtrace-test-extra`.
    pub extra_gid: u32,
}

/// Creates the test account if missing (scripts/test-user.sh) and returns its ids.
pub fn test_user() -> &'static TestUser {
    static USER: OnceLock<TestUser> = OnceLock::new();
    USER.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test-user.sh");
        let st = Command::new("bash").arg(script).status().expect("run test-user.sh");
        assert!(st.success(), "cannot create the test account jtrace-test");
        let id = |args: &[&str]| -> u32 {
            let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
            assert!(o.status.success(), "{args:?} failed");
            let out = String::from_utf8(o.stdout).unwrap();
            // `getent group` prints name:x:gid:members.
            let field = out.trim().split(':').nth(2).unwrap_or(out.trim()).to_string();
            field.parse().unwrap()
        };
        TestUser {
            uid: id(&["id", "-u", "jtrace-test"]),
            gid: id(&["id", "-g", "jtrace-test"]),
            extra_gid: id(&["getent", "group", "jtrace-test-extra"]),
        }
    })
}

/// A root-only file (0600) with `content`: what an attack aims at.
pub fn root_file(dir: &Path, name: &str, content: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// A directory with this owner and mode.
pub fn dir_of(path: PathBuf, uid: u32, gid: u32, mode: u32) -> PathBuf {
    std::fs::create_dir_all(&path).unwrap();
    std::os::unix::fs::chown(&path, Some(uid), Some(gid)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

/// Owner, mode and content of a file, or owner, mode and sorted entries
/// (each with its own state) of a directory, not following links: equal
/// before and after an attack means nothing was touched.
pub fn state(p: &Path) -> String {
    let md = std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let head = format!("{} uid {} gid {} mode {:o}", p.display(), md.uid(), md.gid(), md.mode());
    if md.is_dir() {
        let mut names: Vec<_> = std::fs::read_dir(p).unwrap().map(|e| e.unwrap().path()).collect();
        names.sort();
        let inner: Vec<String> = names.iter().map(|n| state(n)).collect();
        format!("{head} [{}]", inner.join("; "))
    } else if md.file_type().is_symlink() {
        format!("{head} -> {}", std::fs::read_link(p).unwrap().display())
    } else {
        format!("{head} {:?}", std::fs::read(p).unwrap())
    }
}

/// Runs `jtrace <args>` as root invoked through sudo by `uid`/`gid`.
pub fn jtrace_as(uid: u32, gid: u32, args: &[&str]) -> Output {
    ensure_agent();
    let o = Command::new(jtrace())
        .args(args)
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .output()
        .expect("run jtrace");
    eprintln!("--- jtrace {args:?} stdout\n{}", String::from_utf8_lossy(&o.stdout));
    eprintln!("--- jtrace stderr\n{}", String::from_utf8_lossy(&o.stderr));
    o
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A JVM running as the test account (AttachTarget, working directory
/// `cwd`); returns it with its stdout after the "ready" line.
pub fn start_jvm_as(
    u: &TestUser,
    cwd: &Path,
    times: &Path,
) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    start_jvm_of(u.uid, u.gid, cwd, times)
}

/// [`start_jvm_as`] for any user and group (0: root's JVM).
pub fn start_jvm_of(
    uid: u32,
    gid: u32,
    cwd: &Path,
    times: &Path,
) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    ensure_agent();
    let mut child = Command::new(java(JDKS[0]))
        .arg("-cp")
        .arg(classes())
        .arg("AttachTarget")
        .arg(times)
        .current_dir(cwd)
        .uid(uid)
        .gid(gid)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start java");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n", "AttachTarget did not start");
    (child, out)
}
