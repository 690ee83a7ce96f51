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
use jtrace_format::kind;
use std::process::Command;
use std::time::Instant;

/// `threads` threads, each with `calls` outer calls of 3 nested methods and
/// one off-CPU interval (blocked, woken by the previous thread) per call:
/// 9 events per call, plus a contended monitor (of one of 64 classes, so the
/// page has evidence texts to intern) around two blocks in three, and a GC
/// window every 2 ms (copied into every thread by the merge).
fn synthetic(dir: &std::path::Path, threads: u32, calls: u64) {
    let mut b = Builder::default();
    b.jvm_start(PID, 1000);
    b.method(PID, 1, "bench.Server", "handle", "()V");
    b.method(PID, 2, "bench.Dao", "query", "(I)J");
    b.method(PID, 3, "bench.Codec", "decode", "([B)V");
    let mut end = 0;
    for i in 0..threads {
        let tid = 200 + i;
        b.thread_start(PID, tid, 1000, &format!("worker-{i}"), "main");
        b.switch_in(tid, 1000, 0);
        let mut t = 2000 + i as u64 * 137;
        for c in 0..calls {
            let lock = format!("bench.Pool$Lock{}", (c * 31 + i as u64) % 64);
            b.enter(tid, t, 1);
            b.enter(tid, t + 1000, 2);
            if c % 3 != 0 {
                b.jvm_event(tid, t + 2000, kind::MONITOR_CONTENDED_ENTER, &lock);
            }
            b.switch_out(tid, t + 3000, c % 3 == 0, 0);
            if c % 3 != 0 {
                b.wakeup(tid, t + 6000, if i == 0 { 200 + threads - 1 } else { tid - 1 });
            }
            b.switch_in(tid, t + 6500, 0);
            if c % 3 != 0 {
                b.jvm_event(tid, t + 6600, kind::MONITOR_CONTENDED_ENTERED, &lock);
            }
            b.exit(tid, t + 8000, 2);
            b.enter(tid, t + 8500, 3);
            b.exit(tid, t + 9500, 3);
            b.exit(tid, t + 10_000, 1);
            t += 12_000 + (c * 7919 % 5000);
        }
        end = end.max(t);
    }
    let mut g = 1_000_000;
    while g + 300_000 < end {
        b.jvm_event(0, g, kind::GC_START, "");
        b.jvm_event(0, g + 300_000, kind::GC_END, "");
        g += 2_000_000;
    }
    b.write(dir, 1000, end);
}

/// Min and median of a sample.
fn min_med(v: &mut [f64]) -> (f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[0], v[v.len() / 2])
}

/// Runs `f` `n` times and prints the min and median of each named figure
/// it returns.
fn repeat(label: &str, n: usize, mut f: impl FnMut() -> Vec<(String, f64)>) {
    let mut all: Vec<(String, Vec<f64>)> = Vec::new();
    for _ in 0..n {
        for (k, v) in f() {
            match all.iter_mut().find(|(name, _)| *name == k) {
                Some((_, vs)) => vs.push(v),
                None => all.push((k, vec![v])),
            }
        }
    }
    for (k, mut v) in all {
        let (min, med) = min_med(&mut v);
        println!("{label} {k:<24} min {min:>9.1}  median {med:>9.1}  (n={})", v.len());
    }
}

#[test]
#[ignore]
fn million_events() {
    const RUNS: usize = 5;
    let dir = tempdir("bench");
    let trace_dir = dir.join("big.jtrace");
    let (threads, calls) = (16, 6500);
    synthetic(&trace_dir, threads, calls);
    let trace = jtrace_merge::Trace::open(&trace_dir).unwrap();
    let events = trace.kernel_records + trace.jvm_records;
    assert!(events >= 1_000_000, "only {events} events");
    let html = dir.join("big.html");
    repeat("rust ms", RUNS, || {
        let t = Instant::now();
        let trace = jtrace_merge::Trace::open(&trace_dir).unwrap();
        let open_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        jtrace_timeline::write_html(
            &trace,
            &Default::default(),
            std::io::BufWriter::new(std::fs::File::create(&html).unwrap()),
        )
        .unwrap();
        let html_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        jtrace_timeline::write_chrome(
            &trace,
            std::io::BufWriter::new(std::fs::File::create(dir.join("big.json")).unwrap()),
        )
        .unwrap();
        let chrome_ms = t.elapsed().as_secs_f64() * 1e3;
        vec![
            ("Trace::open".into(), open_ms),
            ("write_html".into(), html_ms),
            ("write_chrome".into(), chrome_ms),
        ]
    });
    let mb = |p: &std::path::Path| std::fs::metadata(p).unwrap().len() as f64 / 1e6;
    println!(
        "events {events}; page {:.1} MB; chrome export {:.1} MB",
        mb(&html),
        mb(&dir.join("big.json"))
    );

    let chromium = jtrace_timeline::html::find_chromium().expect("chromium");
    let mut last = serde_json::Value::Null;
    repeat("page ms", RUNS, || {
        let profile = dir.join("profile");
        let _ = std::fs::remove_dir_all(&profile);
        let t = Instant::now();
        let out = Command::new(&chromium)
            .args(jtrace_timeline::html::chromium_flags(&profile))
            .arg("--window-size=1600,1000")
            .arg("--dump-dom")
            .arg(format!("file://{}#bench", html.display()))
            .output()
            .unwrap();
        let wall_ms = t.elapsed().as_secs_f64() * 1e3;
        let dom = String::from_utf8_lossy(&out.stdout);
        let open = "<pre id=\"state\" hidden=\"\">";
        let start = dom.find(open).expect("state element") + open.len();
        let state: serde_json::Value =
            serde_json::from_str(&dom[start..start + dom[start..].find("</pre>").unwrap()]).unwrap();
        assert_eq!(state["lanes"], threads);
        let (p, b) = (&state["perf"], &state["perf"]["bench"]);
        assert!(b["bands"].as_u64().unwrap() > 0, "no GC band drawn: {state}");
        assert!(b["matches"].as_u64().unwrap() > 0, "search found nothing: {state}");
        let f = |v: &serde_json::Value| v.as_f64().unwrap();
        let fig = vec![
            ("chromium process wall".into(), wall_ms),
            ("JSON.parse".into(), f(&p["parse_ms"])),
            ("prepare".into(), f(&p["prep_ms"])),
            ("first paint".into(), f(&p["first_paint_ms"])),
            ("draw full".into(), f(&b["full"])),
            ("draw zoom 10x".into(), f(&b["zoom10"])),
            ("draw zoom 1000x".into(), f(&b["zoom1000"])),
            ("draw pan".into(), f(&b["pan"])),
            ("search".into(), f(&b["search"])),
            ("find next, first".into(), f(&b["find_first"])),
            ("find next, then".into(), f(&b["find_next"])),
            ("details x3".into(), f(&b["details"])),
        ];
        last = state;
        fig
    });
    println!("last page state: {last}");
    let _ = std::fs::remove_dir_all(&dir);
}
