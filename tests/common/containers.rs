//! Real containers for the tests of `jtrace attach` into them: podman with
//! crun, rootful or rootless (as the test account `jtrace-test`, whose
//! subordinate ids scripts/test-user.sh sets). There is no registry: the
//! base image is made from nothing (an empty root whose `usr/` the host's
//! /usr is mounted on, with the usual links into it), and the JVMs run
//! from the host's JDKs and the test classes, mounted read-only.

use super::*;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The image every test container runs.
const IMAGE: &str = "localhost/jtrace-test-base:1";

/// podman for one user: root, or the test account with a home and a
/// runtime directory of its own (its storage is there).
pub struct Podman {
    /// (uid, gid, home): rootless as this account.
    rootless: Option<(u32, u32, PathBuf)>,
}

static ROOTFUL: OnceLock<Podman> = OnceLock::new();
static ROOTLESS: OnceLock<Podman> = OnceLock::new();
/// The pid file of rootless podman's pause process (it holds the user
/// namespace and would outlive the tests).
static PAUSE: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);

extern "C" fn end_rootless() {
    let file = PAUSE.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(pid) = file.and_then(|f| std::fs::read_to_string(f).ok()) {
        if let Ok(pid) = pid.trim().parse::<i32>() {
            // SAFETY: a signal to the pause process podman named.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

impl Podman {
    /// podman as root, with the base image.
    pub fn rootful() -> &'static Podman {
        ROOTFUL.get_or_init(|| {
            let p = Podman { rootless: None };
            p.import_base();
            p
        })
    }

    /// Rootless podman as `jtrace-test` (its container's uid 0 is that
    /// account, its other uids 100000 and up on the host).
    pub fn rootless() -> &'static Podman {
        ROOTLESS.get_or_init(|| {
            let u = hostile::test_user();
            let base = tempdir("podman-rootless");
            let home = base.join("home");
            for d in [&home, &home.join("run")] {
                std::fs::create_dir_all(d).unwrap();
                std::os::unix::fs::chown(d, Some(u.uid), Some(u.gid)).unwrap();
                std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
            }
            *PAUSE.lock().unwrap_or_else(|e| e.into_inner()) = Some(home.join("run/libpod/tmp/pause.pid"));
            // SAFETY: registering a function without arguments to run at exit.
            unsafe { libc::atexit(end_rootless) };
            let p = Podman {
                rootless: Some((u.uid, u.gid, home)),
            };
            p.import_base();
            p
        })
    }

    /// A `podman` command as this podman's user.
    pub fn command(&self) -> Command {
        let mut c = Command::new("podman");
        if let Some((uid, gid, home)) = &self.rootless {
            c.uid(*uid)
                .gid(*gid)
                .env("HOME", home)
                .env("XDG_RUNTIME_DIR", home.join("run"))
                .current_dir(home);
        }
        c
    }

    fn podman(&self, args: &[&str]) -> Output {
        let o = self.command().args(args).output().expect("run podman");
        if !o.status.success() {
            eprintln!("--- podman {args:?}\n{}", String::from_utf8_lossy(&o.stderr));
        }
        o
    }

    /// Imports the base image, a tar of an empty root, unless it is there
    /// (each import would leave the last one behind, unnamed).
    fn import_base(&self) {
        if self.podman(&["image", "exists", IMAGE]).status.success() {
            return;
        }
        let dir = tempdir("base-image");
        let root = dir.join("root");
        for d in ["usr", "tmp", "proc", "sys", "dev", "etc"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::set_permissions(root.join("tmp"), std::fs::Permissions::from_mode(0o1777)).unwrap();
        for (link, to) in [
            ("lib", "usr/lib"),
            ("lib64", "usr/lib64"),
            ("bin", "usr/bin"),
            ("sbin", "usr/sbin"),
        ] {
            std::os::unix::fs::symlink(to, root.join(link)).unwrap();
        }
        let tar = dir.join("base.tar");
        let st = Command::new("tar")
            .arg("-C")
            .arg(&root)
            .arg("-cf")
            .arg(&tar)
            .arg(".")
            .status()
            .unwrap();
        assert!(st.success(), "tar failed");
        std::fs::set_permissions(&tar, std::fs::Permissions::from_mode(0o644)).unwrap();
        let o = self.podman(&["import", tar.to_str().unwrap(), IMAGE]);
        assert!(o.status.success(), "podman import failed");
    }

    /// Starts `cmd` in a new container (removed when it ends), with `opts`
    /// before the image: the host's /usr, the JDKs of target/jdks, Debian's
    /// JDK 17 configuration and the test classes (at /classes) mounted
    /// read-only, no network but loopback, the default limits given (crun
    /// refuses RLIMIT_NOFILE otherwise).
    pub fn run(&self, opts: &[&str], cmd: &[&str]) -> Container<'_> {
        let name = format!("jtrace-test-{}-{}", std::process::id(), rand_suffix());
        let jdks = concat!(env!("CARGO_MANIFEST_DIR"), "/target/jdks");
        let classes = classes();
        let mounts = [
            "/usr:/usr:ro".to_string(),
            "/etc/java-17-openjdk:/etc/java-17-openjdk:ro".to_string(),
            format!("{jdks}:{jdks}:ro"),
            format!("{}:/classes:ro", classes.display()),
        ];
        let mut args: Vec<&str> = vec![
            "run",
            "--rm",
            "-d",
            "--name",
            &name,
            "--network",
            "none",
            "--log-driver",
            "k8s-file",
            "--ulimit",
            "nofile=20000:20000",
            "--ulimit",
            "nproc=4096:4096",
        ];
        for m in &mounts {
            args.extend(["-v", m.as_str()]);
        }
        args.extend(opts);
        args.push(IMAGE);
        args.extend(cmd);
        let o = self.podman(&args);
        assert!(o.status.success(), "podman run failed");
        let mut c = Container {
            podman: self,
            name,
            pid: 0,
        };
        c.pid = c.inspect("{{.State.Pid}}").parse().expect("the container's pid");
        c
    }
}

/// A running container, killed when dropped.
pub struct Container<'a> {
    podman: &'a Podman,
    pub name: String,
    /// Host pid of its first process (the JVM).
    pub pid: u32,
}

impl Container<'_> {
    fn inspect(&self, format: &str) -> String {
        let o = self.podman.podman(&["inspect", "-f", format, &self.name]);
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// The container's full id (64 hex digits).
    pub fn id(&self) -> String {
        self.inspect("{{.Id}}")
    }

    /// What the container printed so far.
    pub fn logs(&self) -> String {
        let o = self.podman.podman(&["logs", &self.name]);
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
    }

    /// Waits until the container printed `line`.
    pub fn wait_for(&self, line: &str) {
        let t0 = Instant::now();
        while !self.logs().lines().any(|l| l == line) {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "{} did not print {line:?}: {}",
                self.name,
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs `script` with `sh -c` in the container as `user` (a name or
    /// uid[:gid] as the container sees it), detached if `detach`.
    pub fn exec(&self, user: &str, script: &str, detach: bool) -> Output {
        let mut args = vec!["exec", "--user", user];
        if detach {
            args.push("-d");
        }
        args.extend([self.name.as_str(), "sh", "-c", script]);
        let o = self.podman.podman(&args);
        eprintln!("--- exec {script:?}: {}", String::from_utf8_lossy(&o.stdout));
        o
    }

    /// The names in a directory of the container (as root there), sorted.
    pub fn ls(&self, dir: &str) -> Vec<String> {
        let o = self.exec("0", &format!("ls -A {dir}"), false);
        let mut v: Vec<String> = String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).collect();
        v.sort();
        v
    }
}

impl Drop for Container<'_> {
    fn drop(&mut self) {
        let _ = self
            .podman
            .command()
            .args(["rm", "-f", "-t", "0", &self.name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Runs `jtrace attach PID <args>` as root (no SUDO_UID) or, with
/// `invoker`, through sudo by that uid and gid.
pub fn attach_as(invoker: Option<(u32, u32)>, pid: u32, args: &[&str]) -> Output {
    ensure_agent();
    let mut c = Command::new(jtrace());
    c.arg("attach").arg(pid.to_string()).args(args);
    match invoker {
        Some((uid, gid)) => c.env("SUDO_UID", uid.to_string()).env("SUDO_GID", gid.to_string()),
        None => c.env_remove("SUDO_UID").env_remove("SUDO_GID"),
    };
    let o = c.output().expect("run jtrace attach");
    eprintln!(
        "--- jtrace attach {pid} {args:?}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}
