//! Load/render benchmark of the HTML timeline on a synthetic trace of about
//! a million events (ignored by default; needs chromium):
//!
//! ```text
//! cargo test -p jtrace-timeline --release --test bench -- --ignored --nocapture
//! ```
//!
//! Prints the page's own performance.now() figures (JSON parse, preparation,
//! first draw, time to first paint since navigation start, draw times of a
//! zoom sequence) as reported in its `<pre id=state>`.

mod fixture;

use fixture::*;
use std::process::Command;
use std::time::Instant;

/// `threads` threads, each with `calls` outer calls of 3 nested methods and
/// one off-CPU interval (blocked, woken by the previous thread) per call:
/// 9 events per call.
fn synthetic(dir: &std::path::Path, threads: u32, calls: u64) {
    let mut b = Builder::default();
    b.jvm_start(1000);
    b.method(1, "bench.Server", "handle", "()V");
    b.method(2, "bench.Dao", "query", "(I)J");
    b.method(3, "bench.Codec", "decode", "([B)V");
    let mut end = 0;
    for i in 0..threads {
        let tid = 200 + i;
        b.java_thread(tid, 1000, &format!("worker-{i}"), "main");
        b.switch_in(tid, 1000);
        let mut t = 2000 + i as u64 * 137;
        for c in 0..calls {
            b.enter(tid, t, 1);
            b.enter(tid, t + 1000, 2);
            b.switch_out(tid, t + 3000, c % 3 == 0);
            if c % 3 != 0 {
                b.wakeup(tid, t + 6000, if i == 0 { 200 + threads - 1 } else { tid - 1 });
            }
            b.switch_in(tid, t + 6500);
            b.exit(tid, t + 8000, 2);
            b.enter(tid, t + 8500, 3);
            b.exit(tid, t + 9500, 3);
            b.exit(tid, t + 10_000, 1);
            t += 12_000 + (c * 7919 % 5000);
        }
        end = end.max(t);
    }
    b.write(dir, 1000, end);
}

#[test]
#[ignore]
fn million_events() {
    let dir = tempdir("bench");
    let trace_dir = dir.join("big.jtrace");
    let (threads, calls) = (16, 7500);
    synthetic(&trace_dir, threads, calls);
    let t = Instant::now();
    let trace = jtrace_merge::Trace::open(&trace_dir).unwrap();
    let open_ms = t.elapsed().as_secs_f64() * 1e3;
    let events = trace.kernel_records + trace.jvm_records;
    let html = dir.join("big.html");
    let t = Instant::now();
    jtrace_timeline::write_html(
        &trace,
        &Default::default(),
        std::io::BufWriter::new(std::fs::File::create(&html).unwrap()),
    )
    .unwrap();
    let html_ms = t.elapsed().as_secs_f64() * 1e3;
    let size = std::fs::metadata(&html).unwrap().len();
    let t = Instant::now();
    jtrace_timeline::write_chrome(
        &trace,
        std::io::BufWriter::new(std::fs::File::create(dir.join("big.json")).unwrap()),
    )
    .unwrap();
    let chrome_ms = t.elapsed().as_secs_f64() * 1e3;
    println!("events {events}; Trace::open {open_ms:.0} ms; write_html {html_ms:.0} ms ({:.1} MB); write_chrome {chrome_ms:.0} ms ({:.1} MB)",
        size as f64 / 1e6, std::fs::metadata(dir.join("big.json")).unwrap().len() as f64 / 1e6);
    assert!(events >= 1_000_000, "only {events} events");

    let chromium = jtrace_timeline::html::find_chromium().expect("chromium");
    let profile = dir.join("profile");
    let t = Instant::now();
    let out = Command::new(chromium)
        .args(jtrace_timeline::html::chromium_flags(&profile))
        .arg("--window-size=1600,1000")
        .arg("--dump-dom")
        .arg(format!("file://{}#bench", html.display()))
        .output()
        .unwrap();
    let wall_ms = t.elapsed().as_secs_f64() * 1e3;
    let dom = String::from_utf8_lossy(&out.stdout);
    let start =
        dom.find("<pre id=\"state\" hidden=\"\">").expect("state element") + "<pre id=\"state\" hidden=\"\">".len();
    let state: serde_json::Value =
        serde_json::from_str(&dom[start..start + dom[start..].find("</pre>").unwrap()]).unwrap();
    println!("chromium process wall {wall_ms:.0} ms; page state: {state}");
    assert_eq!(state["lanes"], threads);
    let _ = std::fs::remove_dir_all(&dir);
}
