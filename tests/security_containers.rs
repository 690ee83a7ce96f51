//! Attacks on `jtrace attach` into a container (src/container.rs,
//! src/proc_root.rs, src/hotspot.rs), played for real by the container's
//! own root or users in a podman container, against a root jtrace on the
//! host. Each checks that what it aimed at on the host is exactly as
//! before and that jtrace refused, or went on without following.

mod common;

use common::containers::{attach_as, Container, Podman};
use common::hostile::*;
use common::*;
use jtrace_merge::Trace;
use std::path::Path;
use std::time::{Duration, Instant};

/// GroundTruthLoop on JDK 17 in a rootful container, started by `sh -c
/// "<before> exec java …"` with `opts`.
fn start<'a>(podman: &'a Podman, opts: &[&str], before: &str) -> Container<'a> {
    let java = java(JDK17);
    let script = format!("{before} exec {} -cp /classes GroundTruthLoop 100 300", java.display());
    let c = podman.run(opts, &["/bin/sh", "-c", &script]);
    c.wait_for("ready");
    c
}

fn attach_root(pid: u32, out: &Path) -> std::process::Output {
    attach_as(
        None,
        pid,
        &["--duration", "2s", "--methods", "GroundTruth.*", "-o", s(out)],
    )
}

/// The container's root replaces its /tmp with an absolute link to a
/// root-only host directory. Resolved as a host path (`/proc/PID/root/tmp`
/// joined as a string), it would lead jtrace, as the JVM's user (root
/// here), to make the trigger file, the session's directory and the agent
/// there, on the host. Resolved inside the container's root, the link
/// leads to the container's own directory of that name: the attach works
/// there and the host directory is untouched. A link to a path that
/// exists only on the host is refused with a clear message.
#[test]
fn a_tmp_linked_to_a_host_directory_is_resolved_inside_the_container() {
    let podman = Podman::rootful();
    // Not under the host's /tmp: the container's /tmp is to be replaced.
    let base = std::path::PathBuf::from(format!(
        "/var/tmp/jtrace-test-sec-ctr-tmp-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&base).unwrap();
    remove_at_exit(&base);
    let secret = dir_of(base.join("secret"), 0, 0, 0o700);
    root_file(&secret, "victim", "root's precious file\n");
    let before = state(&secret);
    let link = format!("mkdir -p {d} && rmdir /tmp && ln -s {d} /tmp &&", d = s(&secret));
    let c = start(podman, &[], &link);
    let out = base.join("t.jtrace");
    let o = attach_root(c.pid, &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(Trace::open(&out).unwrap().meta.complete);
    assert_eq!(state(&secret), before, "the host directory was written");
    // In the container, the link's target got the attach socket and nothing of jtrace's.
    let inside = c.ls(s(&secret));
    assert!(inside.contains(&".java_pid1".to_string()), "{inside:?}");
    assert!(!inside.iter().any(|n| n.starts_with(".jtrace-")), "{inside:?}");
    drop(c);

    // A link to what exists only on the host: the JVM has no /tmp.
    let only_host = base.join("only-on-the-host");
    let link = format!("rmdir /tmp && ln -s {} /tmp &&", s(&only_host));
    std::fs::create_dir(&only_host).unwrap();
    let before = state(&only_host);
    let c = start(podman, &[], &link);
    let out = base.join("t2.jtrace");
    let o = attach_root(c.pid, &out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot open /tmp of process"), "{err}");
    assert_eq!(state(&only_host), before, "the host directory was written");
    assert!(!out.exists(), "a trace directory was left");
}

/// What a listener planted at the JVM's attach socket in the container
/// logs: "connected" when someone connects, then what it received.
const LISTENER: &str = r#"
import socket, sys, os
path, log = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX)
s.bind(path)
os.chmod(path, int(sys.argv[3], 8))
s.listen(1)
open(log, "a").write("listening\n")
s.settimeout(120)
c, _ = s.accept()
open(log, "a").write("connected\n")
c.settimeout(5)
try:
    got = c.recv(4096)
except Exception:
    got = b""
open(log, "a").write("received %r\n" % got)
"#;

/// Plants a listening socket at the attach socket's name of the
/// container's JVM (pid 1 there), as container user `user`, mode `mode`;
/// returns the log it writes.
fn plant_listener(c: &Container, user: &str, mode: &str, log: &str) {
    let o = c.exec(
        user,
        &format!("python3 -c '{LISTENER}' /tmp/.java_pid1 {log} {mode}"),
        true,
    );
    assert!(o.status.success());
    let t0 = Instant::now();
    while !c
        .exec("0", &format!("cat {log}"), false)
        .stdout
        .starts_with(b"listening")
    {
        assert!(t0.elapsed() < Duration::from_secs(20), "the listener did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// In a container whose JVM runs as uid 1000, another user there (uid
/// 2000) listens at the JVM's attach socket's name, writable by all, to
/// receive the agent's path and options and answer as the JVM would:
/// refused by owner and mode before any connection (as on the host). Then
/// a process of the JVM's own user listens there with the right owner and
/// mode: jtrace connects, but the listener is not the JVM (SO_PEERCRED),
/// so nothing is sent to it. With the name free, the attach works.
#[test]
fn attach_sockets_planted_in_the_container_are_refused() {
    let podman = Podman::rootful();
    let c = start(podman, &["--user", "1000:1000"], "");
    let base = tempdir("sec-ctr-sock");
    let out = base.join("t.jtrace");

    plant_listener(&c, "2000:2000", "777", "/tmp/log-2000");
    let o = attach_root(c.pid, &out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("belongs to uid 2000") && err.contains("refusing it"),
        "{err}"
    );
    let log = c.exec("0", "cat /tmp/log-2000", false).stdout;
    assert_eq!(
        String::from_utf8_lossy(&log),
        "listening\n",
        "jtrace connected to the planted socket"
    );
    assert!(!out.exists());
    c.exec("0", "rm /tmp/.java_pid1", false);

    plant_listener(&c, "1000:1000", "600", "/tmp/log-1000");
    let o = attach_root(c.pid, &out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("is not the JVM's") && err.contains("listens on it"),
        "{err}"
    );
    let t0 = Instant::now();
    let log = loop {
        let log = String::from_utf8_lossy(&c.exec("0", "cat /tmp/log-1000", false).stdout).into_owned();
        if log.contains("received") || t0.elapsed() > Duration::from_secs(10) {
            break log;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        log, "listening\nconnected\nreceived b''\n",
        "the planted listener got a command"
    );
    assert!(!out.exists());
    c.exec("0", "rm /tmp/.java_pid1", false);

    let o = attach_root(c.pid, &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(Trace::open(&out).unwrap().meta.complete);
}

/// A JVMTI agent of the attacker's that loads and says all is well.
const EVIL_AGENT: &str = "int Agent_OnAttach(void *vm, char *options, void *reserved) { return 0; }\n";

/// The container's root waits for the agent jtrace places in the
/// container and puts its own library in its place before the JVM loads
/// it: the file itself if it can (the copy is immutable where the file
/// system allows), else the whole session directory, moved aside and made
/// anew. jtrace sees that what the JVM mapped is not the file it wrote,
/// says so and records nothing; what it placed is removed from the
/// container (the moved directory too), nothing is left on the host, and a
/// later attach refuses the foreign library the JVM now has loaded under
/// an agent's name.
#[test]
fn an_agent_library_replaced_in_the_container_is_detected() {
    let base = tempdir("sec-ctr-lib");
    let evil = dir_of(base.join("evil"), 0, 0, 0o755);
    std::fs::write(evil.join("evil.c"), EVIL_AGENT).unwrap();
    let st = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(evil.join("evil.so"))
        .arg(evil.join("evil.c"))
        .status()
        .unwrap();
    assert!(st.success(), "cc failed");
    let podman = Podman::rootful();
    let mount = format!("{}:/evil:ro", s(&evil));
    let c = start(podman, &["-v", &mount], "");
    let attack = r#"
        while :; do
            for d in /tmp/.jtrace-*; do [ -f "$d/libjtrace_agent.so" ] && break 2; done
            sleep 0.005
        done
        sleep 0.1
        if rm -f "$d/libjtrace_agent.so" 2>>/tmp/attack.log && cp /evil/evil.so "$d/libjtrace_agent.so"; then
            echo replaced the file >> /tmp/attack.log
        else
            mv "$d" "$d.moved" && mkdir "$d" && cp /evil/evil.so "$d/libjtrace_agent.so" \
                && echo replaced the directory >> /tmp/attack.log
        fi"#;
    c.exec("0", attack, true);
    let out = base.join("t.jtrace");
    let o = attach_root(c.pid, &out);
    let err = String::from_utf8_lossy(&o.stderr);
    let log = String::from_utf8_lossy(&c.exec("0", "cat /tmp/attack.log", false).stdout).into_owned();
    eprintln!("--- the attack: {log}");
    assert!(log.contains("replaced"), "the attack did not happen: {log}");
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("was replaced"), "{err}");
    assert!(!out.exists(), "a trace directory was left");
    // The directory jtrace made is gone wherever it was moved in /tmp;
    // the attacker's own stays.
    let tmp = c.ls("/tmp");
    assert!(!tmp.iter().any(|n| n.ends_with(".moved")), "{tmp:?}");
    if log.contains("replaced the file") {
        assert!(!tmp.iter().any(|n| n.starts_with(".jtrace-")), "{tmp:?}");
    }
    let o = attach_root(c.pid, &base.join("t2.jtrace"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("has another jtrace agent loaded"), "{err}");
}

/// While jtrace records, the container's root moves the agent's stream out
/// of the session's directory and puts a link to a root-only host file at
/// its name. jtrace copies the stream it has held open since the agent
/// made it: the trace is the agent's, complete; the link is removed, not
/// followed, and the host file is untouched.
#[test]
fn a_stream_swapped_for_a_link_is_not_followed() {
    let podman = Podman::rootful();
    let base = tempdir("sec-ctr-stream");
    let secret = dir_of(base.join("secret"), 0, 0, 0o700);
    let victim = root_file(&secret, "victim", "root's precious file\n");
    let before = state(&secret);
    let c = start(podman, &[], "");
    let swap = format!(
        r#"while :; do
            for f in /tmp/.jtrace-*/jvm-1.bin; do [ -f "$f" ] && break 2; done
            sleep 0.005
        done
        sleep 0.3
        mv "$f" /tmp/moved.bin && ln -s {} "$f" && echo swapped > /tmp/swap.log"#,
        s(&victim)
    );
    c.exec("0", &swap, true);
    let out = base.join("t.jtrace");
    let o = attach_as(
        None,
        c.pid,
        &["--duration", "3s", "--methods", "GroundTruth.*", "-o", s(&out)],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let log = c.exec("0", "cat /tmp/swap.log", false).stdout;
    assert_eq!(String::from_utf8_lossy(&log), "swapped\n", "the swap did not happen");
    assert_eq!(state(&secret), before);
    let trace = Trace::open(&out).unwrap();
    assert!(trace.meta.complete, "{err}");
    assert!(trace
        .methods
        .iter()
        .any(|m| m.class == "GroundTruth" && m.name == "sleepFor"));
    assert_exact(&trace);
    let tmp = c.ls("/tmp");
    assert!(!tmp.iter().any(|n| n.starts_with(".jtrace-")), "{tmp:?}");
}
