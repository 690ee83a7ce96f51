//! The in-memory views in bounded memory: `jtrace
//! timeline` and `jtrace export --format chrome` check the memory a trace
//! needs before reading it whole, and either draw the part selected with
//! `--window`/`--thread` (within the limit) or refuse, saying what to do;
//! an output file is never left truncated, nor a good one replaced by a
//! failed run. On a synthetic trace of 5 M events, with `--max-memory`
//! standing for a machine with less memory.

mod common;

use jtrace_testkit::synth;

use common::{jtrace, run_measured, tempdir};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The synthetic trace, made once (about 210 MB, 0.1 s of 8 threads).
fn big_trace() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempdir("views-mem").join("t.jtrace");
        synth::generate(&dir, 5_000_000, 8).unwrap();
        dir
    })
    .clone()
}

fn run(args: &[&OsStr]) -> (std::process::Output, u64) {
    let (o, kib) = run_measured(&jtrace(), args);
    eprintln!(
        "jtrace {args:?}: peak {} MiB\n{}",
        kib >> 10,
        String::from_utf8_lossy(&o.stderr)
    );
    (o, kib)
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// Names in a directory that are not `keep`.
fn leftovers(dir: &Path, keep: &[&str]) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect()
}

/// The page data of a timeline HTML file.
fn page_data(html: &str) -> serde_json::Value {
    let open = "<script type=\"application/json\" id=\"data\">";
    let start = html.find(open).unwrap() + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end]).unwrap()
}

#[test]
fn a_timeline_too_large_is_refused_with_what_to_do_and_leaves_no_file() {
    let t = big_trace();
    let out_dir = tempdir("views-refuse");
    let html = out_dir.join("t.html");
    // A good file from before stays as it was.
    std::fs::write(&html, "before").unwrap();
    let (o, kib) = run(&[
        os("timeline"),
        t.as_os_str(),
        os("-o"),
        html.as_os_str(),
        os("--max-memory"),
        os("200M"),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("would need about") && err.contains("more than the 200 MiB available"),
        "{err}"
    );
    assert!(
        err.contains("--window FROM..TO") && err.contains("--thread") && err.contains("--max-memory"),
        "{err}"
    );
    assert!(kib < 100 << 10, "refusing took {kib} KiB");
    assert_eq!(std::fs::read_to_string(&html).unwrap(), "before");
    assert!(
        leftovers(&out_dir, &["t.html"]).is_empty(),
        "{:?}",
        leftovers(&out_dir, &["t.html"])
    );

    let json = out_dir.join("t.json");
    let (o, _) = run(&[
        os("export"),
        t.as_os_str(),
        os("--format"),
        os("chrome"),
        os("-o"),
        json.as_os_str(),
        os("--max-memory"),
        os("100M"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("the Chrome export of"));
    assert!(!json.exists() && leftovers(&out_dir, &["t.html"]).is_empty());
    std::fs::remove_dir_all(&out_dir).unwrap();
}

#[test]
fn a_window_of_a_large_trace_is_drawn_within_the_limit() {
    let t = big_trace();
    let out_dir = tempdir("views-window");
    let html = out_dir.join("w.html");
    let (o, kib) = run(&[
        os("timeline"),
        t.as_os_str(),
        os("-o"),
        html.as_os_str(),
        os("--max-memory"),
        os("200M"),
        os("--window"),
        os("20ms..25ms"),
    ]);
    assert!(o.status.success());
    assert!(kib < 200 << 10, "{kib} KiB");
    let d = page_data(&std::fs::read_to_string(&html).unwrap());
    assert_eq!(d["window"], serde_json::json!([20_000_000u64, 25_000_000u64]));
    let mut spans = 0;
    for th in d["threads"].as_array().unwrap() {
        let s = &th["spans"];
        for (start, dur) in s["s"].as_array().unwrap().iter().zip(s["d"].as_array().unwrap()) {
            let (start, dur) = (start.as_u64().unwrap(), dur.as_u64().unwrap());
            assert!(start <= 25_000_000 && start + dur >= 20_000_000, "{start}+{dur}");
            spans += 1;
        }
    }
    assert!(spans > 100, "{spans} spans in the window");
    assert!(d["problems"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p.as_str().unwrap().contains("part of the trace")));

    // One thread, the whole time: the Chrome export of its tid only.
    let json = out_dir.join("one.json");
    let (o, kib) = run(&[
        os("export"),
        t.as_os_str(),
        os("--format"),
        os("chrome"),
        os("-o"),
        json.as_os_str(),
        os("--max-memory"),
        os("200M"),
        os("--thread"),
        os("4243"),
    ]);
    assert!(o.status.success());
    assert!(kib < 200 << 10, "{kib} KiB");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let tids: std::collections::BTreeSet<u64> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] != "jvm")
        .map(|e| e["tid"].as_u64().unwrap() & !(1 << 30))
        .collect();
    assert_eq!(tids.into_iter().collect::<Vec<_>>(), vec![4243]);
    assert_eq!(v["otherData"]["threads"], "4243");
    assert!(leftovers(&out_dir, &["w.html", "one.json"]).is_empty());

    // A window still too large for the memory allowed: refused as it is
    // read, no file.
    let (o, _) = run(&[
        os("timeline"),
        t.as_os_str(),
        os("-o"),
        out_dir.join("all.html").as_os_str(),
        os("--max-memory"),
        os("64M"),
        os("--window"),
        os("0s..1s"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("still holds more than"));
    assert!(leftovers(&out_dir, &["w.html", "one.json"]).is_empty());
    std::fs::remove_dir_all(&out_dir).unwrap();
}

/// A trace that fits is drawn whole, as before (the same bytes as without
/// the check: tests/ and /work/baseline compare them).
#[test]
fn a_trace_that_fits_is_drawn_whole() {
    let t = big_trace();
    let out_dir = tempdir("views-fit");
    let html = out_dir.join("t.html");
    let o = Command::new(jtrace())
        .args([
            os("timeline"),
            t.as_os_str(),
            os("-o"),
            html.as_os_str(),
            os("--max-memory"),
            os("4G"),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d = page_data(&std::fs::read_to_string(&html).unwrap());
    assert!(d.get("window").is_none());
    // 8 Java threads and the VM thread.
    assert_eq!(d["threads"].as_array().unwrap().len(), 9);
    std::fs::remove_dir_all(&out_dir).unwrap();
}
