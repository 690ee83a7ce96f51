//! The views of a stored trace, byte for byte: a refactoring of the
//! reader, the walk or the views must not change what users see.
//!
//! `tests/data/demo-no-stacks.tgz` is a real trace of the bundled demo
//! (`jtrace run --no-stacks --methods 'Demo.*'`, JDK 17), recorded once;
//! without stacks its views need no binary of this machine.
//! `tests/data/demo-views.tgz` holds what every reading command printed
//! for it. A change that is meant to change an output regenerates them:
//! `JTRACE_GOLDEN_UPDATE=1 cargo test --release --test golden_views`, and
//! the commit says why the views changed.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

/// Each view: the file its output is kept in, and the command's arguments
/// (the trace is `demo.jtrace`, relative, so that no path of this machine
/// is in an output).
const VIEWS: &[(&str, &[&str])] = &[
    ("report.txt", &["report", "demo.jtrace"]),
    ("report.json", &["report", "--json", "demo.jtrace"]),
    ("report-all.txt", &["report", "--all", "--per-thread", "demo.jtrace"]),
    (
        "report-sleep.txt",
        &["report", "--top", "3", "--cause", "sleep", "demo.jtrace"],
    ),
    (
        "report-small.json",
        &["report", "--json", "--memory-budget", "1M", "demo.jtrace"],
    ),
    ("text.txt", &["text", "demo.jtrace"]),
    ("text-all.txt", &["text", "--all", "demo.jtrace"]),
    ("why.txt", &["why", "demo.jtrace", "--method", "Demo.*"]),
    (
        "why.json",
        &["why", "--json", "demo.jtrace", "--method", "Demo.*", "--slowest", "5"],
    ),
    ("info.txt", &["info", "demo.jtrace"]),
    ("invocations.csv", &["export", "demo.jtrace", "--format", "csv"]),
    (
        "collapsed.txt",
        &["export", "demo.jtrace", "--format", "collapsed", "--all"],
    ),
    ("chrome.json", &["export", "demo.jtrace", "--format", "chrome"]),
    ("text-export.txt", &["export", "demo.jtrace", "--format", "text"]),
];

fn untar(archive: &Path, into: &Path) {
    let st = Command::new("tar")
        .arg("xzf")
        .arg(archive)
        .arg("-C")
        .arg(into)
        .status()
        .unwrap();
    assert!(st.success(), "cannot unpack {}", archive.display());
}

#[test]
fn the_views_of_a_stored_trace_are_unchanged() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let work = tempdir("golden");
    untar(&data.join("demo-no-stacks.tgz"), &work);
    let got = work.join("views");
    std::fs::create_dir_all(&got).unwrap();
    for (file, args) in VIEWS {
        let o = Command::new(jtrace()).args(*args).current_dir(&work).output().unwrap();
        assert!(
            o.status.success(),
            "jtrace {args:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::fs::write(got.join(file), &o.stdout).unwrap();
    }
    let expected_archive = data.join("demo-views.tgz");
    if std::env::var_os("JTRACE_GOLDEN_UPDATE").is_some() {
        let st = Command::new("tar")
            .args(["czf"])
            .arg(&expected_archive)
            .args([
                "--sort=name",
                "--mtime=@0",
                "--owner=0",
                "--group=0",
                "--numeric-owner",
                "-C",
            ])
            .arg(&work)
            .arg("views")
            .status()
            .unwrap();
        assert!(st.success());
        eprintln!("wrote {}", expected_archive.display());
        return;
    }
    let want = work.join("expected");
    std::fs::create_dir_all(&want).unwrap();
    untar(&expected_archive, &want);
    let mut changed = Vec::new();
    for (file, args) in VIEWS {
        let a = std::fs::read(want.join("views").join(file)).unwrap_or_default();
        let b = std::fs::read(got.join(file)).unwrap();
        if a != b {
            let (a, b) = (String::from_utf8_lossy(&a), String::from_utf8_lossy(&b));
            let line = a
                .lines()
                .zip(b.lines())
                .position(|(x, y)| x != y)
                .unwrap_or(a.lines().count().min(b.lines().count()));
            changed.push(format!(
                "jtrace {args:?}: first difference at line {}:\n  was: {:?}\n  now: {:?}",
                line + 1,
                a.lines().nth(line).unwrap_or("<end>"),
                b.lines().nth(line).unwrap_or("<end>")
            ));
        }
    }
    assert!(
        changed.is_empty(),
        "the views changed ({} kept for a look):\n{}",
        work.display(),
        changed.join("\n")
    );
    let _ = std::fs::remove_dir_all(&work);
}
