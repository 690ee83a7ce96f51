//! The HTML timeline in a real browser: a real demo trace (`jtrace run` on
//! the bundled Demo, so root is needed, as in CI), rendered by `jtrace
//! timeline`, loaded in headless Chromium driven over the DevTools protocol
//! (`--remote-debugging-pipe`: NUL-separated JSON on fds 3 and 4, no extra
//! crates). Checks: no console errors, one lane per thread, grouping, thread
//! filter, wheel and keyboard zoom, drag pan, axis units (ms → µs), click to
//! pin, the GC windows of the demo's
//! `System.gc()` drawn as bands across the lanes (read back from the
//! canvas pixels) with their hover details, hover details of a span, of a
//! woken interval (waker's lane highlighted, waker's method named) and the
//! evidence text of a monitor and a socket block, "find next" over a
//! method search, the `#view=` window and `jtrace timeline --png --window`.
//! The screenshots are kept in target/test-artifacts/timeline*.png.
//!
//! Needs the Debian package `chromium` (or $JTRACE_CHROMIUM).

mod common;

use common::browser::{artifacts_dir, Browser};
use common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn timeline_of_the_demo_in_chromium() {
    let dir = tempdir("timeline-browser");
    // $JTRACE_TEST_TRACE: view an existing demo trace instead of recording
    // one (for working on the viewer without root).
    let trace_dir = match std::env::var_os("JTRACE_TEST_TRACE") {
        Some(t) => PathBuf::from(t),
        None => {
            let classes = classes();
            let trace_dir = dir.join("demo.jtrace");
            let o = jtrace_run(
                &trace_dir,
                &["--methods", "Demo.*"],
                &[
                    java(JDKS[0]).to_str().unwrap(),
                    "-cp",
                    classes.to_str().unwrap(),
                    "Demo",
                ],
            );
            assert!(o.status.success(), "jtrace run of the demo failed");
            trace_dir
        }
    };
    let trace = jtrace_merge::Trace::open(&trace_dir).unwrap();
    let html = dir.join("timeline.html");
    let o = Command::new(jtrace())
        .arg("timeline")
        .arg(&trace_dir)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "jtrace timeline failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    let mut b = Browser::launch(1400, 900);
    b.open_page(&format!("file://{}", html.display()), 1400, 900);
    assert_eq!(
        b.eval("!!(window.jtrace && window.jtrace.ready)"),
        json!(true),
        "viewer did not start"
    );
    b.next_frame();
    let errors = b.errors();
    assert!(errors.is_empty(), "console errors: {errors:#?}");

    // The page lays out every interval's causes as the chrome export does
    // (GC/safepoint parts on their windows): same segments, to the ns.
    let wins = jtrace_timeline::jvm_windows(&trace);
    let t0 = jtrace_timeline::time_origin(&trace);
    let mut windowed = 0;
    for th in jtrace_timeline::collect(&trace) {
        let pid = if th.info.tgid != 0 {
            th.info.tgid
        } else {
            trace.meta.pid
        };
        let want: Vec<(u64, u64, usize)> = th
            .offs
            .iter()
            .flat_map(|o| jtrace_timeline::cause_segments_in(o, &wins, pid))
            .map(|(s, e, c)| (s - t0, e - t0, c as usize))
            .collect();
        windowed += want
            .iter()
            .filter(|s| {
                matches!(
                    jtrace_merge::Cause::ALL[s.2],
                    jtrace_merge::Cause::Gc | jtrace_merge::Cause::Safepoint
                )
            })
            .count();
        let got: Vec<(u64, u64, usize)> = b
            .eval(&format!("jtrace.segments({})", th.info.tid))
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s[0].as_f64().unwrap() as u64,
                    s[1].as_f64().unwrap() as u64,
                    s[2].as_u64().unwrap() as usize,
                )
            })
            .collect();
        assert_eq!(got, want, "segments of {} [{}]", th.info.display_name(), th.info.tid);
    }
    assert!(windowed > 0, "no gc/safepoint segment in the demo");

    // One lane per thread, application threads first.
    let lanes = b.eval("jtrace.lanes()");
    let lanes = lanes.as_array().unwrap();
    assert_eq!(lanes.len(), trace.threads.len(), "one lane per thread");
    let names: Vec<&str> = lanes.iter().map(|l| l["name"].as_str().unwrap()).collect();
    for n in ["main", "cruncher-0", "lock-holder", "lock-waiter", "sleeper"] {
        assert!(names.contains(&n), "no lane for {n}: {names:?}");
    }
    assert_eq!(names[0], "main", "application threads come first: {names:?}");

    // The thread filter hides lanes.
    b.eval("(() => { const f = document.getElementById('filter'); f.value = 'cruncher'; f.dispatchEvent(new Event('input')); })()");
    let filtered = b.eval("jtrace.lanes().map(l => l.name)");
    assert!(
        filtered
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n.as_str().unwrap().contains("cruncher"))
            && filtered.as_array().unwrap().len() == 3,
        "{filtered}"
    );
    b.eval(
        "(() => { const f = document.getElementById('filter'); f.value = ''; f.dispatchEvent(new Event('input')); })()",
    );
    b.next_frame();

    // Method search highlights matches across lanes and counts them.
    b.eval("(() => { const f = document.getElementById('search'); f.value = 'crunch'; f.dispatchEvent(new Event('input')); })()");
    b.eval("new Promise(r => setTimeout(r, 300))");
    let summary = b.eval("document.getElementById('summary').textContent");
    assert!(
        summary.as_str().unwrap().contains("matching spans"),
        "search: {summary}"
    );
    assert!(
        !summary.as_str().unwrap().contains(" 0 matching"),
        "search found nothing: {summary}"
    );
    b.eval(
        "(() => { const f = document.getElementById('search'); f.value = ''; f.dispatchEvent(new Event('input')); })()",
    );
    b.eval("new Promise(r => setTimeout(r, 300))");

    // Wheel zoom at the middle of the time area.
    let before = b.eval("jtrace.view()");
    b.mouse("mouseWheel", 800.0, 300.0, json!({"deltaX": 0, "deltaY": -400}));
    b.next_frame();
    let after = b.eval("jtrace.view()");
    let width = |v: &Value| v["end"].as_f64().unwrap() - v["start"].as_f64().unwrap();
    assert!(
        width(&after) < width(&before) * 0.6,
        "wheel did not zoom in: {before} -> {after}"
    );
    // Keyboard zooms back out.
    b.call(
        "Input.dispatchKeyEvent",
        json!({"type": "keyDown", "key": "0", "text": "0"}),
    );
    b.next_frame();
    let reset = b.eval("jtrace.view()");
    assert!(
        (width(&reset) - width(&before)).abs() < 1.0,
        "key 0 did not reset: {reset}"
    );
    // Keyboard zoom and pan: `w` zooms in at the pointer by 0.7, `s` back
    // out, `d` pans right by 15% of the width without zooming.
    b.mouse("mouseMoved", 800.0, 10.0, json!({}));
    b.key("w", "KeyW", 87, 0);
    b.next_frame();
    let kz = b.eval("jtrace.view()");
    assert!(
        (width(&kz) / width(&reset) - 0.7).abs() < 0.01,
        "key w did not zoom in: {reset} -> {kz}"
    );
    b.key("d", "KeyD", 68, 0);
    b.next_frame();
    let kp = b.eval("jtrace.view()");
    assert!(
        (width(&kp) - width(&kz)).abs() < 1.0 && kp["start"].as_f64().unwrap() > kz["start"].as_f64().unwrap(),
        "key d did not pan right: {kz} -> {kp}"
    );
    b.key("s", "KeyS", 83, 0);
    b.next_frame();
    let ko = b.eval("jtrace.view()");
    assert!(
        (width(&ko) - width(&reset)).abs() < width(&reset) * 0.01,
        "key s did not zoom back out: {kp} -> {ko}"
    );
    b.key("0", "Digit0", 48, 0);
    b.next_frame();

    // The axis is in ms over the whole trace, in µs (or ns) zoomed 1000×.
    let ticks = b.eval("jtrace.ticks()");
    assert!(
        ticks.as_array().unwrap().len() >= 3
            && ticks
                .as_array()
                .unwrap()
                .iter()
                .all(|t| t.as_str().unwrap().ends_with(" ms")),
        "axis at full view: {ticks}"
    );
    for _ in 0..3 {
        b.mouse("mouseWheel", 800.0, 300.0, json!({"deltaX": 0, "deltaY": -1200}));
        b.next_frame();
    }
    let ticks = b.eval("jtrace.ticks()");
    assert!(
        ticks.as_array().unwrap().iter().all(|t| {
            let t = t.as_str().unwrap();
            t.ends_with(" µs") || t.ends_with(" ns")
        }),
        "axis zoomed in: {ticks} at {}",
        b.eval("jtrace.view()")
    );
    b.key("0", "Digit0", 48, 0);
    b.next_frame();

    // Drag pans: the view moves by the dragged time, keeping its width.
    let v0 = b.eval("jtrace.view()");
    b.mouse("mousePressed", 900.0, 300.0, json!({"button": "left", "clickCount": 1}));
    for x in [880.0, 800.0, 700.0] {
        b.mouse("mouseMoved", x, 300.0, json!({"button": "left", "buttons": 1}));
    }
    b.mouse(
        "mouseReleased",
        700.0,
        300.0,
        json!({"button": "left", "clickCount": 1}),
    );
    b.next_frame();
    let v1 = b.eval("jtrace.view()");
    let per_px = width(&v0) / (1400.0 - 240.0);
    let moved = v1["start"].as_f64().unwrap() - v0["start"].as_f64().unwrap();
    assert!(
        (moved - 200.0 * per_px).abs() < 3.0 * per_px && (width(&v1) - width(&v0)).abs() < 1.0,
        "drag by 200 px: {v0} -> {v1}"
    );
    b.key("0", "Digit0", 48, 0);
    b.next_frame();

    // GC windows: the demo's System.gc() is at least one, each drawn as a
    // band across every lane (the gap under every lane is tinted at the
    // band and white beside it) with its details on the axis strip.
    let windows = jtrace_timeline::jvm_windows(&trace);
    assert!(
        windows.iter().any(|w| w.cause == jtrace_merge::Cause::Gc),
        "the demo's System.gc() left no GC window: {windows:?}"
    );
    assert_eq!(b.eval("jtrace.windows()"), json!(windows.len()));
    let bands = b.eval("jtrace.bands()");
    let band = bands
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["kind"] == "GC")
        .unwrap_or_else(|| panic!("no GC band drawn: {bands}"))
        .clone();
    let (x0, x1) = (band["x0"].as_f64().unwrap(), band["x1"].as_f64().unwrap());
    let bx = (x0 + x1) / 2.0;
    // An x of the time area inside no band.
    let all: Vec<(f64, f64)> = bands
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["x0"].as_f64().unwrap(), b["x1"].as_f64().unwrap()))
        .collect();
    let free = (0..1000)
        .map(|i| 260.0 + i as f64)
        .find(|x| all.iter().all(|(a, b)| x + 3.0 < *a || *x > b + 3.0))
        .expect("an x outside the bands");
    // Nothing hovered: no outline over the pixels read.
    b.mouse("mouseMoved", 100.0, 10.0, json!({}));
    b.next_frame();
    let lanes_now = b.eval("jtrace.lanes()");
    let canvas_h = b.eval("document.getElementById('cv').clientHeight").as_f64().unwrap();
    let mut tinted = 0;
    for l in lanes_now.as_array().unwrap() {
        let gap = l["y"].as_f64().unwrap() + l["h"].as_f64().unwrap() - 3.0;
        if !(30.0..canvas_h - 2.0).contains(&gap) {
            continue;
        }
        // The canvas is transparent over the white page except where drawn.
        let (inside, outside) = (b.pixel(bx, gap), b.pixel(free, gap));
        assert_eq!(outside[3], 0, "something drawn beside the band at y {gap}: {outside:?}");
        assert!(
            inside[3] > 0 && inside[0] > inside[2] + 20,
            "no GC band at x {bx} y {gap}: {inside:?}"
        );
        tinted += 1;
    }
    assert!(tinted >= 5, "band checked on only {tinted} lanes");
    let top = band["top"].as_f64().unwrap();
    b.mouse("mouseMoved", bx, top + 21.0, json!({}));
    b.next_frame();
    let tip = b.eval("jtrace.tooltip()");
    let tip = tip.as_str().unwrap().to_string();
    for want in ["GC #", "JVM-wide stop", "duration", "threads off CPU for gc"] {
        assert!(tip.contains(want), "GC band tooltip lacks {want:?}: {tip}");
    }
    // The first GC window, zoomed on at the end for the second screenshot.
    let gc = windows.iter().find(|w| w.cause == jtrace_merge::Cause::Gc).unwrap();
    let t0 = jtrace_timeline::time_origin(&trace);
    let (gs, ge) = ((gc.start - t0) as f64, (gc.end - t0) as f64);
    let pad = (ge - gs).max(1e6) * 3.0;
    b.mouse("mouseMoved", 100.0, 10.0, json!({}));
    b.mouse("mouseWheel", 800.0, 300.0, json!({"deltaX": 0, "deltaY": -200}));
    b.next_frame();

    // Hover a span: its details.
    let at = b.eval("jtrace.locate('Demo.crunch')");
    assert!(at.is_object(), "no visible Demo.crunch span");
    b.mouse(
        "mouseMoved",
        at["pageX"].as_f64().unwrap(),
        at["pageY"].as_f64().unwrap(),
        json!({}),
    );
    b.next_frame();
    let tip = b.eval("jtrace.tooltip()");
    let tip = tip.as_str().unwrap();
    for want in ["Demo.crunch", "wall", "CPU", "off CPU", "switches", "invol"] {
        assert!(tip.contains(want), "span tooltip lacks {want:?}: {tip}");
    }

    // A click pins the details; Esc unpins.
    b.mouse(
        "mousePressed",
        at["pageX"].as_f64().unwrap(),
        at["pageY"].as_f64().unwrap(),
        json!({"button": "left", "clickCount": 1}),
    );
    b.mouse(
        "mouseReleased",
        at["pageX"].as_f64().unwrap(),
        at["pageY"].as_f64().unwrap(),
        json!({"button": "left", "clickCount": 1}),
    );
    b.next_frame();
    let pinned = b.eval("document.getElementById('pin').hidden ? '' : document.getElementById('pin').textContent");
    assert!(
        pinned.as_str().unwrap().contains("Demo.crunch"),
        "click did not pin: {pinned}"
    );
    b.key("Escape", "Escape", 27, 0);
    b.next_frame();
    assert_eq!(
        b.eval("document.getElementById('pin').hidden"),
        json!(true),
        "Esc did not unpin"
    );

    // Hover an interval whose waker is traced: "woken by" and the waker's lane lit.
    b.key("0", "Digit0", 48, 0);
    b.next_frame();
    let off = b.eval("jtrace.locateWoken()");
    assert!(off.is_object(), "no visible interval woken by a traced thread");
    b.mouse(
        "mouseMoved",
        off["pageX"].as_f64().unwrap(),
        off["pageY"].as_f64().unwrap(),
        json!({}),
    );
    b.next_frame();
    let tip = b.eval("jtrace.tooltip()");
    let tip = tip.as_str().unwrap();
    assert!(
        tip.contains("woken by") && tip.contains("waker was in"),
        "interval tooltip: {tip}"
    );
    assert_eq!(b.eval("jtrace.wakerLanes()"), json!([off["waker"]]));

    // The evidence of a block, as the merge describes it: the monitor the
    // lock-waiter entered, and the socket the client read.
    for (q, lane, want) in [
        (
            "contended monitor of",
            None,
            "entering contended monitor of java.lang.Object",
        ),
        // The client's (the server's accept may wait longer, for a client
        // late on a loaded machine).
        ("socket", Some("client"), "socket"),
    ] {
        let at = match lane {
            Some(name) => b.eval(&format!("jtrace.locateOff({q:?}, {name:?})")),
            None => b.eval(&format!("jtrace.locateOff({q:?})")),
        };
        assert!(at.is_object(), "no visible off-CPU interval with evidence {q:?}");
        b.mouse(
            "mouseMoved",
            at["pageX"].as_f64().unwrap(),
            at["pageY"].as_f64().unwrap(),
            json!({}),
        );
        b.next_frame();
        let tip = b.eval("jtrace.tooltip()");
        let tip = tip.as_str().unwrap();
        assert!(
            tip.contains(want) && tip.contains(at["evidence"].as_str().unwrap()),
            "tooltip of a {q} block lacks its evidence {}: {tip}",
            at["evidence"]
        );
        if q == "socket" {
            assert!(
                (tip.contains("socket tcp ") && tip.contains("127.0.0.1") && tip.contains("->")),
                "socket evidence without its 4-tuple: {tip}"
            );
            // The stack at the switch-out: the client's read under Demo.fetch.
            assert!(
                tip.contains("Demo.fetch_[") && tip.contains("kernel frames"),
                "socket block tooltip without its stack: {tip}"
            );
        }
    }

    // Find next: a method search, then Enter in the search box and the ▶
    // button visit every match once, in time order, each brought into view.
    b.eval("(() => { const f = document.getElementById('search'); f.value = 'Demo.crunch'; f.dispatchEvent(new Event('input')); f.focus(); })()");
    let n = invocations(&trace)
        .iter()
        .filter(|(_, inv)| trace.methods[inv.method as usize].qualified() == "Demo.crunch")
        .count();
    assert!(n >= 2, "only {n} Demo.crunch calls");
    let mut seen = Vec::new();
    for i in 0..n + 1 {
        if i % 2 == 0 {
            b.eval("document.getElementById('search').focus()");
            b.key("Enter", "Enter", 13, 0);
        } else {
            let r = b.eval("(() => { const r = document.getElementById('next').getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()");
            let (x, y) = (r[0].as_f64().unwrap(), r[1].as_f64().unwrap());
            b.mouse("mousePressed", x, y, json!({"button": "left", "clickCount": 1}));
            b.mouse("mouseReleased", x, y, json!({"button": "left", "clickCount": 1}));
        }
        b.next_frame();
        let p = b.eval("jtrace.pinned()");
        assert_eq!(p["method"], "Demo.crunch", "find next pinned {p}");
        let v = b.eval("jtrace.view()");
        let start = p["start"].as_f64().unwrap();
        assert!(
            v["start"].as_f64().unwrap() <= start && start <= v["end"].as_f64().unwrap(),
            "match {p} not in view {v}"
        );
        assert!(
            b.eval("document.getElementById('pin').textContent")
                .as_str()
                .unwrap()
                .contains("Demo.crunch"),
            "match details not shown"
        );
        seen.push((p["match"].as_u64().unwrap(), start, p["tid"].as_u64().unwrap()));
    }
    // n presses visit n distinct spans in time order; the next one wraps.
    let mut order: Vec<(u64, f64, u64)> = seen[..n].to_vec();
    order.sort_by_key(|s| s.0);
    let ids: Vec<u64> = order.iter().map(|s| s.0).collect();
    assert_eq!(ids, (1..=n as u64).collect::<Vec<_>>(), "matches visited: {seen:?}");
    assert!(
        order.windows(2).all(|w| w[0].1 <= w[1].1),
        "not in time order: {order:?}"
    );
    assert_eq!(seen[n].0, seen[0].0, "find next did not wrap around: {seen:?}");
    // Shift+Enter goes back.
    b.eval("document.getElementById('search').focus()");
    b.key("Enter", "Enter", 13, 8);
    b.next_frame();
    let back = b.eval("jtrace.pinned()")["match"].as_u64().unwrap();
    assert_eq!(
        back,
        if seen[n].0 == 1 { n as u64 } else { seen[n].0 - 1 },
        "shift+Enter"
    );
    b.eval("(() => { const f = document.getElementById('search'); f.value = ''; f.dispatchEvent(new Event('input')); f.blur(); })()");
    b.key("Escape", "Escape", 27, 0);
    b.key("0", "Digit0", 48, 0);
    b.eval("new Promise(r => setTimeout(r, 300))");
    b.mouse("mouseWheel", 800.0, 300.0, json!({"deltaX": 0, "deltaY": -200}));
    b.next_frame();

    // Back on the span for the screenshot, which is kept.
    let at = b.eval("jtrace.locate('Demo.crunch')");
    assert!(at.is_object(), "no visible Demo.crunch span");
    b.mouse(
        "mouseMoved",
        at["pageX"].as_f64().unwrap(),
        at["pageY"].as_f64().unwrap(),
        json!({}),
    );
    b.next_frame();
    b.screenshot("timeline.png");

    // `#view=START,END` opens on that window: what `--png --window` shoots.
    b.call(
        "Page.navigate",
        json!({"url": format!("file://{}#view={},{}", html.display(), (gs - pad).max(0.0) as u64, (ge + pad) as u64)}),
    );
    b.eval(
        "new Promise(r => { const w = () => (window.jtrace && window.jtrace.ready) ? r(1) : setTimeout(w, 50); w(); })",
    );
    b.next_frame();
    let v = b.eval("jtrace.view()");
    assert_eq!(
        (v["start"].as_f64().unwrap() as u64, v["end"].as_f64().unwrap() as u64),
        ((gs - pad).max(0.0) as u64, (ge + pad) as u64),
        "#view= ignored"
    );
    let bands = b.eval("jtrace.bands()");
    let wide = bands
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["kind"] == "GC")
        .expect("GC band in the window");
    assert!(
        wide["x1"].as_f64().unwrap() - wide["x0"].as_f64().unwrap() > 100.0,
        "zoomed GC band is narrow: {wide}"
    );
    b.mouse(
        "mouseMoved",
        (wide["x0"].as_f64().unwrap() + wide["x1"].as_f64().unwrap()) / 2.0,
        wide["top"].as_f64().unwrap() + 21.0,
        json!({}),
    );
    b.next_frame();
    // Inside the band, the threads the GC stopped show gc there, named
    // after the window.
    let cx = (wide["x0"].as_f64().unwrap() + wide["x1"].as_f64().unwrap()) / 2.0;
    let mut stopped = 0;
    for l in b.eval("jtrace.lanes()").as_array().unwrap().clone() {
        let y = l["y"].as_f64().unwrap() + 7.0;
        if !(30.0..canvas_h - 2.0).contains(&y) {
            continue;
        }
        b.mouse("mouseMoved", cx, wide["top"].as_f64().unwrap() + y, json!({}));
        b.next_frame();
        let tip = b.eval("jtrace.tooltip()");
        let tip = tip.as_str().unwrap();
        if tip.starts_with("off CPU: gc") {
            assert!(
                tip.contains("stopped by GC #"),
                "gc interval not tied to its window: {tip}"
            );
            stopped += 1;
        }
    }
    assert!(stopped >= 2, "only {stopped} lanes show gc inside the GC band");
    b.mouse("mouseMoved", cx, wide["top"].as_f64().unwrap() + 21.0, json!({}));
    b.next_frame();
    b.screenshot("timeline-gc.png");
    let errors = b.errors();
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    drop(b);

    // `--png --window` through the CLI: a PNG of that window only, which
    // differs from the whole trace's; a bad window is refused.
    let shot = |extra: &[&str], png: &Path| {
        Command::new(jtrace())
            .arg("timeline")
            .arg(&trace_dir)
            .arg("-o")
            .arg(dir.join("cli.html"))
            .arg("--png")
            .arg(png)
            .arg("--png-size")
            .arg("800x500")
            .args(extra)
            .output()
            .unwrap()
    };
    let (whole, part) = (dir.join("whole.png"), artifacts_dir().join("timeline-window.png"));
    let o = shot(&[], &whole);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let win = format!(
        "{}us..{}us",
        (gs - pad).max(0.0) as u64 / 1000,
        (ge + pad) as u64 / 1000
    );
    let o = shot(&["--window", &win], &part);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (a, c) = (std::fs::read(&whole).unwrap(), std::fs::read(&part).unwrap());
    assert!(a.starts_with(b"\x89PNG") && c.starts_with(b"\x89PNG"));
    assert_ne!(a, c, "--window made no difference");
    let o = shot(&["--window", "20ms..10ms"], &dir.join("bad.png"));
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("ends before it starts"));
}
