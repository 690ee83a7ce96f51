//! The flame graph page (`jtrace flame`) in headless Chromium, on real
//! traces (`jtrace run` of real JVMs, so root is needed, as in CI): its
//! totals per cause are the collapsed export's to the nanosecond, search
//! and its matched total, click to zoom and Esc, the inverted view, one
//! graph per cause, tooltips with the wakers, a thread name made of HTML
//! shown as text; the difference of a trace with itself is neutral, and of
//! two runs with one delay doubled has that delay's stack as its top
//! growth. Screenshots go to target/test-artifacts/flame*.png.
//!
//! Needs the Debian package `chromium` (or $JTRACE_CHROMIUM).

mod common;

use common::browser::{artifacts_dir, Browser};
use common::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `java -cp CLASSES ARGS…` on JDK 17 under `jtrace run` (default
/// recording: stacks and CPU samples), into a new trace directory.
fn record(name: &str, args: &[&str]) -> PathBuf {
    record_with(name, &[], args)
}

/// [`record`] with `jtrace run` options `opts`.
fn record_with(name: &str, opts: &[&str], args: &[&str]) -> PathBuf {
    let out = tempdir(name).join("t.jtrace");
    let cp = classes();
    let java = java(JDK17);
    let mut cmd = vec![java.to_str().unwrap(), "-cp", cp.to_str().unwrap()];
    cmd.extend(args);
    let o = jtrace_run(&out, opts, &cmd);
    assert!(o.status.success(), "jtrace run {opts:?} {args:?}");
    out
}

/// `jtrace flame --all ARGS…` into `html` (idle time too: everything the
/// collapsed export holds); its stderr.
fn flame(args: &[&Path], extra: &[&str], html: &Path) -> String {
    let o = Command::new(jtrace())
        .args(["flame", "--all"])
        .args(args)
        .args(extra)
        .arg("-o")
        .arg(html)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "jtrace flame: {err}");
    err
}

/// The collapsed export with everything the flame graph holds: line → ns.
fn collapsed(trace: &Path, extra: &[&str]) -> BTreeMap<String, u64> {
    let out = jtrace_stdout(
        &[&["export", "--format", "collapsed", "--all", "--cpu"][..], extra].concat(),
        trace,
    );
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

fn per_cause(c: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for (k, v) in c {
        *m.entry(k.split(';').next().unwrap().to_string()).or_default() += v;
    }
    m
}

/// Opens `html` and checks the viewer started without console errors.
fn open(b: &mut Browser, html: &Path) {
    b.open_page(&format!("file://{}", html.display()), 1400, 900);
    assert_eq!(b.eval("!!window.jtraceFlame"), json!(true), "viewer did not start");
    b.next_frame();
    let errors = b.errors();
    assert!(errors.is_empty(), "console errors: {errors:#?}");
}

fn totals(v: &Value) -> BTreeMap<String, u64> {
    (v.as_object().unwrap().iter())
        .map(|(k, v)| (k.clone(), v.as_f64().unwrap() as u64))
        .collect()
}

#[test]
fn flame_graph_of_stack_scenarios_in_chromium() {
    let trace = record("flame", &["StackScenarios", "1000", "spin"]);
    let want = collapsed(&trace, &[]);
    let html = trace.with_extension("html");
    flame(&[&trace], &[], &html);
    let mut b = Browser::launch(1400, 900);
    open(&mut b, &html);

    // The graph holds exactly the collapsed export's time, per cause, and
    // one (stack, cause) of its own per collapsed line.
    assert_eq!(totals(&b.eval("jtraceFlame.totals()")), per_cause(&want));
    assert!(per_cause(&want).contains_key("cpu"), "CPU samples in the graph");
    assert_eq!(b.eval("jtraceFlame.stacks()"), json!(want.len()));

    // Search: the matched total is the time of the stacks through a match.
    let q = "StackScenarios.sleepHere";
    let matched = b.eval(&format!("jtraceFlame.search({q:?})")).as_f64().unwrap() as u64;
    let through: u64 = (want.iter())
        .filter(|(k, _)| k.split(';').any(|f| f.to_lowercase().contains(&q.to_lowercase())))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(matched, through);
    assert!(matched > 500_000_000, "{matched} ns under {q}");
    assert!(b
        .eval("jtraceFlame.matchedText()")
        .as_str()
        .unwrap()
        .starts_with("matched "));

    // Click to zoom on the widest sleepHere frame; Esc zooms out a frame.
    let at = b.eval(&format!("jtraceFlame.locate({q:?})"));
    assert!(!at.is_null(), "no {q} frame drawn");
    let (x, y) = (at["pageX"].as_f64().unwrap(), at["pageY"].as_f64().unwrap());
    b.mouse("mouseMoved", x, y, json!({}));
    let tip = b.eval("jtraceFlame.tooltip()").as_str().unwrap().to_string();
    assert!(tip.contains(q) && tip.contains("sleep: "), "{tip}");
    b.mouse("mousePressed", x, y, json!({"button": "left", "clickCount": 1}));
    b.mouse("mouseReleased", x, y, json!({"button": "left", "clickCount": 1}));
    b.next_frame();
    assert!(b.eval("jtraceFlame.zoomed()").as_str().unwrap().starts_with(q));
    let zoomed = b.eval("jtraceFlame.zoomedValue()").as_f64().unwrap() as u64;
    assert!(zoomed > 0 && zoomed <= matched, "{zoomed} of {matched}");
    b.screenshot("flame-zoomed.png");
    b.key("Escape", "Escape", 27, 0);
    b.next_frame();
    assert!(!b.eval("jtraceFlame.zoomed()").as_str().unwrap().starts_with(q));
    // The reset button shows everything again.
    b.eval("document.getElementById('reset').click()");
    assert_eq!(b.eval("jtraceFlame.zoomed()"), json!("all"));
    b.eval("jtraceFlame.search('')");

    // The wakers of a monitor wait: the thread that left the monitor.
    let at = b.eval("jtraceFlame.locate('StackScenarios.monitorHere')");
    assert!(!at.is_null(), "no monitorHere frame drawn");
    b.mouse(
        "mouseMoved",
        at["pageX"].as_f64().unwrap(),
        at["pageY"].as_f64().unwrap(),
        json!({}),
    );
    let tip = b.eval("jtraceFlame.tooltip()").as_str().unwrap().to_string();
    assert!(tip.contains("monitor: ") && tip.contains("woken by:"), "{tip}");

    // One graph per cause: the root is that cause's total.
    let causes = per_cause(&want);
    b.eval("jtraceFlame.selectCause('sleep')");
    assert_eq!(
        b.eval("jtraceFlame.rootValue()").as_f64().unwrap() as u64,
        causes["sleep"]
    );
    // Inverted: the same time, hung from the frames that hold it (for
    // sleeps, the kernel's).
    let n = b.eval("jtraceFlame.nodes()");
    b.eval("jtraceFlame.invert(true)");
    b.next_frame();
    assert_ne!(b.eval("jtraceFlame.nodes()"), n);
    assert_eq!(
        b.eval("jtraceFlame.rootValue()").as_f64().unwrap() as u64,
        causes["sleep"]
    );
    let top = b.eval("jtraceFlame.topFrames()");
    let first = top[0]["name"].as_str().unwrap();
    assert!(first.ends_with("_[k]"), "inverted sleep graph starts at {first}: {top}");
    b.screenshot("flame-inverted.png");
    // Keys: I toggles back, / goes to the search box.
    b.key("i", "KeyI", 73, 0);
    assert_eq!(b.eval("jtraceFlame.nodes()"), n);
    b.key("/", "Slash", 191, 0);
    assert_eq!(b.eval("document.activeElement.id"), json!("search"));
    b.eval("document.activeElement.blur(); jtraceFlame.selectCause('all')");
    b.next_frame();
    assert!(b.eval("jtraceFlame.framesDrawn()").as_u64().unwrap() > 20);
    b.screenshot("flame.png");
    assert!(b.errors().is_empty(), "console errors: {:#?}", b.errors());
    drop(b);

    // --cause and --thread select before drawing.
    let sleep_html = trace.with_extension("sleep.html");
    flame(&[&trace], &["--cause", "sleep", "--thread", "sleep"], &sleep_html);
    let mut b = Browser::launch(1400, 900);
    open(&mut b, &sleep_html);
    let page = totals(&b.eval("jtraceFlame.totals()"));
    assert_eq!(page.keys().collect::<Vec<_>>(), ["sleep"]);
    let thread_sleep: u64 = collapsed(&trace, &["--per-thread"])
        .iter()
        .filter(|(k, _)| k.starts_with("sleep;sleep ["))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(page["sleep"], thread_sleep);
    std::fs::remove_dir_all(trace.parent().unwrap()).unwrap();
}

#[test]
fn a_thread_named_in_html_is_shown_as_text() {
    let trace = record("flame-html", &["HtmlNames"]);
    let html = trace.with_extension("html");
    flame(&[&trace], &["--per-thread"], &html);
    let mut b = Browser::launch(1200, 800);
    open(&mut b, &html);
    let at = b.eval("jtraceFlame.locate('<img src=x')");
    assert!(!at.is_null(), "the thread's frame is drawn");
    assert!(at["name"].as_str().unwrap().contains("<b>t</b>"));
    b.mouse(
        "mouseMoved",
        at["pageX"].as_f64().unwrap(),
        at["pageY"].as_f64().unwrap(),
        json!({}),
    );
    let tip = b.eval("jtraceFlame.tooltip()");
    assert!(
        tip.as_str().unwrap().contains("onerror=\"document.title='pwned'\""),
        "{tip}"
    );
    assert_eq!(b.eval("document.querySelectorAll('img, b').length"), json!(0));
    assert!(!b.eval("document.title").as_str().unwrap().contains("pwned"));
    assert!(b.errors().is_empty(), "console errors: {:#?}", b.errors());
    std::fs::remove_dir_all(trace.parent().unwrap()).unwrap();
}

#[test]
fn the_difference_of_two_traces_shows_the_doubled_delay() {
    let before = record("flame-before", &["CompareWork", "20", "20"]);
    let after = record("flame-after", &["CompareWork", "20", "40"]);
    let dir = tempdir("flame-diff");

    // A trace against itself: nothing changed anywhere.
    let same = dir.join("same.html");
    flame(&[&before, &before], &[], &same);
    let mut b = Browser::launch(1400, 900);
    open(&mut b, &same);
    assert_eq!(b.eval("jtraceFlame.maxAbsDelta()"), json!(0));
    assert_eq!(b.eval("jtraceFlame.topChanges(5)"), json!([]));
    drop(b);

    // 20 naps of 20 ms, then of 40 ms: on the thread that naps, the nap's
    // stack grew by ~400 ms of sleep, more than anything else. (Across
    // all threads the JVM's idle ones wait ~800 ms longer each: the run
    // was longer.)
    let diff = dir.join("diff.html");
    flame(&[&before, &after], &["--thread", "main"], &diff);
    let mut b = Browser::launch(1400, 900);
    open(&mut b, &diff);
    let main_sleep = |t: &Path| -> u64 {
        (collapsed(t, &["--per-thread"]).iter())
            .filter(|(k, _)| k.starts_with("sleep;main ["))
            .map(|(_, v)| v)
            .sum()
    };
    let (before_sleep, after_sleep) = (main_sleep(&before), main_sleep(&after));
    assert_eq!(totals(&b.eval("jtraceFlame.totalsBefore()"))["sleep"], before_sleep);
    assert_eq!(totals(&b.eval("jtraceFlame.totals()"))["sleep"], after_sleep);
    let top = b.eval("jtraceFlame.topChanges(3)");
    let first = &top[0];
    let path: Vec<&str> = first["path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    let delta = first["delta"].as_f64().unwrap();
    assert!(
        path.iter().any(|f| f.starts_with("CompareWork$Work.nap")),
        "top growth: {top}"
    );
    assert!(
        (320e6..480e6).contains(&delta),
        "the nap's stack grew by {delta} ns, not ~400 ms: {top}"
    );
    b.screenshot("flame-diff.png");
    assert!(b.errors().is_empty(), "console errors: {:#?}", b.errors());
    drop(b);
    for d in [&before, &after] {
        std::fs::remove_dir_all(d.parent().unwrap()).unwrap();
    }
    let _ = artifacts_dir();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_trace_is_an_error_and_writes_nothing() {
    let dir = tempdir("flame-bad");
    let html = dir.join("f.html");
    for args in [
        vec![dir.join("missing")],
        vec![dir.join("missing"), dir.join("missing2")],
    ] {
        let o = Command::new(jtrace())
            .arg("flame")
            .args(&args)
            .arg("-o")
            .arg(&html)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("cannot") && err.contains("missing"), "{err}");
        assert!(!html.exists());
    }
    let o = Command::new(jtrace())
        .args(["flame", "x", "--cause", "nonsense", "-o"])
        .arg(&html)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown cause"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn report_html_has_the_report_tables_and_the_graph() {
    let trace = record_with("flame-report", &["--methods", "Demo.*"], &["Demo"]);
    let html = trace.with_extension("html");
    let png = trace.with_extension("png");
    let o = Command::new(jtrace())
        .args(["report", "--html", "--all", "--top", "6", "-o"])
        .arg(&html)
        .arg("--png")
        .arg(&png)
        .arg(&trace)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    let json: Value = serde_json::from_slice(&jtrace_stdout(&["report", "--json"], &trace)).unwrap();
    let mut b = Browser::launch(1400, 1000);
    open(&mut b, &html);

    // Each method row is the report's method: wall, CPU, off-CPU by cause.
    let rows = b.eval("jtraceFlame.reportRows()");
    let methods: Vec<&Value> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "method")
        .collect();
    assert_eq!(methods.len(), 6, "--top 6: {rows}");
    for r in &methods {
        let m = (json["methods"].as_array().unwrap().iter())
            .find(|m| format!("{}.{}", m["class"].as_str().unwrap(), m["name"].as_str().unwrap()) == r["name"])
            .unwrap_or_else(|| panic!("{} is not in the report", r["name"]));
        assert_eq!(
            (&r["wall"], &r["cpu"], &r["off"]),
            (&m["wall_ns"], &m["cpu_ns"], &m["off_cpu_ns"])
        );
    }
    // Methods by off-CPU time, most first: Demo.crunch's run queue wait.
    assert_eq!(methods[0]["name"], "Demo.crunch", "{rows}");
    assert!(rows
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["kind"] == "thread" && r["name"].as_str().unwrap().starts_with("main [")));
    // The bars and the graph below them; a click on a row searches the graph.
    assert!(
        b.eval("document.querySelectorAll('#report .bar i').length")
            .as_u64()
            .unwrap()
            >= 6
    );
    assert_eq!(
        totals(&b.eval("jtraceFlame.totals()")),
        per_cause(&collapsed(&trace, &[]))
    );
    b.eval("document.querySelector('#report tr:nth-child(2)').click()");
    assert_eq!(b.eval("document.getElementById('search').value"), json!("Demo.crunch"));
    let matched = b.eval("jtraceFlame.search('Demo.crunch')").as_f64().unwrap();
    assert!(matched > 100e6, "{matched} ns under Demo.crunch in the graph");
    b.screenshot("report.png");
    assert!(b.errors().is_empty(), "console errors: {:#?}", b.errors());
    std::fs::remove_dir_all(trace.parent().unwrap()).unwrap();
}

#[test]
fn the_timeline_draws_the_flame_graph_of_its_view() {
    let trace = record_with("flame-timeline", &["--methods", "Demo.*"], &["Demo"]);
    let html = trace.with_extension("html");
    let o = Command::new(jtrace())
        .arg("timeline")
        .arg(&trace)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // What the whole view holds: every interval's off-CPU time, by cause.
    let t = jtrace_merge::Trace::open(&trace).unwrap();
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for th in jtrace_timeline::collect(&t) {
        for o in &th.offs {
            for (c, ns) in o.split.off.nonzero() {
                *want.entry(c.name().to_string()).or_default() += ns;
            }
        }
    }
    let mut b = Browser::launch(1400, 1000);
    b.open_page(&format!("file://{}", html.display()), 1400, 1000);
    assert_eq!(b.eval("!!(window.jtrace && window.jtrace.ready)"), json!(true));

    // F opens the panel on the whole view: exactly the intervals' time.
    b.key("f", "KeyF", 70, 0);
    b.eval("new Promise(r => setTimeout(r, 300))");
    assert_eq!(totals(&b.eval("jtrace.flameTotals()")), want);
    assert!(b
        .eval("jtrace.flameSelection()")
        .as_str()
        .unwrap()
        .contains("threads shown"));

    // A frame of the lock waiter's wait outlines its intervals on the lanes.
    let frames = b.eval("jtrace.flameFrames()");
    let enter = (frames.as_array().unwrap().iter())
        .filter_map(|f| f.as_str())
        .find(|f| f.starts_with("Demo.enterLock"))
        .unwrap_or_else(|| panic!("no Demo.enterLock frame in {frames}"))
        .to_string();
    assert!(b.eval(&format!("jtrace.flameClick({enter:?})")).as_i64().unwrap() > 0);
    let outlined = b.eval("jtrace.flameOutlined()");
    let outlined = outlined.as_array().unwrap();
    assert!(!outlined.is_empty());
    for o in outlined {
        assert!(o["stack"].as_array().unwrap().iter().any(|f| f == &json!(enter)), "{o}");
    }
    b.next_frame();
    b.screenshot("timeline-flame.png");

    // With a call pinned, the panel is that call's time on its thread.
    let at = b.eval("jtrace.locate('Demo.enterLock')");
    assert!(!at.is_null(), "no Demo.enterLock span drawn");
    let (x, y) = (at["pageX"].as_f64().unwrap(), at["pageY"].as_f64().unwrap());
    b.mouse("mousePressed", x, y, json!({"button": "left", "clickCount": 1}));
    b.mouse("mouseReleased", x, y, json!({"button": "left", "clickCount": 1}));
    b.eval("new Promise(r => setTimeout(r, 300))");
    assert!(b
        .eval("jtrace.flameSelection()")
        .as_str()
        .unwrap()
        .contains("pinned call of Demo.enterLock"));
    let pinned = totals(&b.eval("jtrace.flameTotals()"));
    assert!(pinned.get("monitor").copied().unwrap_or(0) > 100_000_000, "{pinned:?}");
    assert!(pinned.values().sum::<u64>() < want.values().sum::<u64>());

    // A method search: the panel is the time of its calls (Demo.nap's one
    // call: its 100 ms sleep), as the report splits it.
    b.key("Escape", "Escape", 27, 0);
    b.eval("(() => { const s = document.getElementById('search'); s.value = 'Demo.nap'; s.dispatchEvent(new Event('input')); })()");
    b.eval("new Promise(r => setTimeout(r, 800))");
    let sel = b.eval("jtrace.flameSelection()");
    assert!(
        sel.as_str()
            .unwrap()
            .contains("1 calls in view of the methods matching \"Demo.nap\""),
        "{sel}"
    );
    let report: Value = serde_json::from_slice(&jtrace_stdout(&["report", "--json"], &trace)).unwrap();
    let nap = (report["methods"].as_array().unwrap().iter())
        .find(|m| m["class"] == "Demo" && m["name"] == "nap")
        .unwrap();
    let page = totals(&b.eval("jtrace.flameTotals()"));
    let want_sleep = nap["off_cpu_ns"]["sleep"].as_u64().unwrap();
    let got_sleep = page.get("sleep").copied().unwrap_or(0);
    assert!(
        got_sleep.abs_diff(want_sleep) * 100 <= want_sleep,
        "the nap call's sleep: page {got_sleep} ns, report {want_sleep} ns"
    );
    assert!(b.errors().is_empty(), "console errors: {:#?}", b.errors());
    std::fs::remove_dir_all(trace.parent().unwrap()).unwrap();
}
