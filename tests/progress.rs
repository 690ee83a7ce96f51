//! Progress on stderr: a spinner when stderr is a terminal (a pty made by
//! python's `pty` module) and the work runs long enough, nothing otherwise.

use jtrace_testkit::synth;

use std::path::Path;
use std::process::Command;

/// Runs `jtrace ARGS` with stderr on a new pty (stdout discarded) and
/// returns what it wrote there.
fn stderr_on_pty(args: &[&str], show_after_ms: Option<&str>) -> String {
    let script = r#"
import os, pty, subprocess, sys
m, s = pty.openpty()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=s, stdin=subprocess.DEVNULL)
os.close(s)
out = b""
while True:
    try:
        d = os.read(m, 65536)
    except OSError:
        break
    if not d:
        break
    out += d
sys.stdout.buffer.write(out)
sys.exit(p.wait())
"#;
    let mut c = Command::new("python3");
    c.arg("-c").arg(script).arg(env!("CARGO_BIN_EXE_jtrace")).args(args);
    if let Some(ms) = show_after_ms {
        c.env("JTRACE_PROGRESS_AFTER_MS", ms);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn progress_only_on_a_terminal_and_only_for_long_work() {
    let base = std::env::temp_dir().join(format!("jtrace-progress-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let trace = base.join("t.jtrace");
    synth::generate(&trace, 50_000, 4).unwrap();
    let t = trace.to_str().unwrap();
    let out_file = base.join("t.pftrace");
    let o = out_file.to_str().unwrap();
    for (cmd, args) in [
        ("report", vec!["report", t]),
        ("export", vec!["export", "--format", "perfetto", "-o", o, t]),
    ] {
        // Long work (the spinner's delay set to 0): shown on a terminal...
        let shown = stderr_on_pty(&args, Some("0"));
        assert!(shown.contains(&format!("jtrace {cmd}: working")), "{cmd}: {shown:?}");
        // ...and cleared when done (the line erased: ESC [ 2 K).
        assert!(
            shown.ends_with("\r\x1b[2K") || shown.contains("\x1b[2K"),
            "{cmd}: {shown:?}"
        );
        // Not on a pipe.
        let piped = Command::new(env!("CARGO_BIN_EXE_jtrace"))
            .args(&args)
            .env("JTRACE_PROGRESS_AFTER_MS", "0")
            .output()
            .unwrap();
        assert!(piped.status.success());
        assert!(
            !String::from_utf8_lossy(&piped.stderr).contains("working"),
            "{cmd} on a pipe"
        );
        // Work quicker than the delay, on a terminal: nothing (a delay of a
        // minute, not the default second: a loaded machine may take that).
        let quick = stderr_on_pty(&args, Some("60000"));
        assert!(!quick.contains("working"), "{cmd}: {quick:?}");
    }
    assert!(Path::new(&out_file).exists());
    std::fs::remove_dir_all(&base).unwrap();
}
