//! The HTML timeline in a real browser: a real demo trace (`jtrace run` on
//! the bundled Demo, so root is needed, as in CI), rendered by `jtrace
//! timeline`, loaded in headless Chromium driven over the DevTools protocol
//! (`--remote-debugging-pipe`: NUL-separated JSON on fds 3 and 4, no extra
//! crates). Checks: no console errors, one lane per thread, wheel zoom,
//! hover details of a span and of a woken interval (with the waker's lane
//! highlighted). The screenshot is kept in target/test-artifacts/timeline.png.
//!
//! Needs the Debian package `chromium` (or $JTRACE_CHROMIUM).

mod common;

use common::*;
use serde_json::{json, Value};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// A Chromium driven over `--remote-debugging-pipe`.
struct Browser {
    child: Child,
    tx: File,
    rx: Receiver<Value>,
    next_id: u64,
    /// Events received so far (method, params, sessionId).
    events: Vec<Value>,
    session: Option<String>,
    profile: PathBuf,
}

fn pipe() -> (RawFd, RawFd) {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    (fds[0], fds[1])
}

impl Browser {
    fn launch(width: u32, height: u32) -> Browser {
        let chromium = jtrace_timeline::html::find_chromium()
            .or_else(|| Some(PathBuf::from("/usr/bin/chromium")).filter(|p| p.is_file()))
            .expect("chromium not found: install the Debian package `chromium` or set JTRACE_CHROMIUM");
        let profile = tempdir("chromium-profile");
        let (to_chrome_r, to_chrome_w) = pipe();
        let (from_chrome_r, from_chrome_w) = pipe();
        let mut cmd = Command::new(&chromium);
        cmd.args(jtrace_timeline::html::chromium_flags(&profile))
            .arg("--remote-debugging-pipe")
            .arg(format!("--window-size={width},{height}"))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(File::create(profile.join("stderr.log")).unwrap()));
        // The protocol's fds: Chromium reads commands on 3 and writes on 4.
        // The pipe ends may themselves be 3 or 4, so move them out of the way
        // first, and clear close-on-exec (dup2 onto itself would not).
        unsafe {
            cmd.pre_exec(move || {
                let r = libc::fcntl(to_chrome_r, libc::F_DUPFD, 10);
                let w = libc::fcntl(from_chrome_w, libc::F_DUPFD, 10);
                if r < 0 || w < 0 || libc::dup2(r, 3) < 0 || libc::dup2(w, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::fcntl(3, libc::F_SETFD, 0);
                libc::fcntl(4, libc::F_SETFD, 0);
                libc::close(r);
                libc::close(w);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start chromium");
        unsafe {
            libc::close(to_chrome_r);
            libc::close(from_chrome_w);
        }
        let tx = unsafe { File::from_raw_fd(to_chrome_w) };
        let rx_file = unsafe { File::from_raw_fd(from_chrome_r) };
        let (send, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(rx_file);
            loop {
                let mut buf = Vec::new();
                match r.read_until(0, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        buf.pop();
                        if let Ok(v) = serde_json::from_slice::<Value>(&buf) {
                            if send.send(v).is_err() {
                                break;
                            }
                        }
                    }
                }
            }
        });
        Browser {
            child,
            tx,
            rx,
            next_id: 0,
            events: Vec::new(),
            session: None,
            profile,
        }
    }

    /// Sends a command (to the attached page, if any) and waits for its result.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.tx.write_all(&bytes).expect("write to chromium");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no answer from chromium to {method}"));
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method} failed: {}", v["error"]);
                return v["result"].clone();
            }
            if v.get("method").is_some() {
                self.events.push(v);
            }
        }
    }

    /// Waits for an event of the page.
    fn wait_event(&mut self, method: &str, timeout: Duration) {
        if self.events.iter().any(|e| e["method"] == method) {
            return;
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {method} from chromium"));
            let hit = v["method"] == method;
            self.events.push(v);
            if hit {
                return;
            }
        }
    }

    /// Evaluates an expression in the page (awaiting promises) and returns its value.
    fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(
            r.get("exceptionDetails").is_none(),
            "{expr} threw: {}",
            r["exceptionDetails"]
        );
        r["result"]["value"].clone()
    }

    /// Lets the page draw the frame requested by the last input.
    fn next_frame(&mut self) {
        self.eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(1))))");
    }

    fn mouse(&mut self, kind: &str, x: f64, y: f64, extra: Value) {
        let mut p = json!({"type": kind, "x": x, "y": y});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        self.call("Input.dispatchMouseEvent", p);
    }

    /// Console errors, uncaught exceptions and error log entries so far.
    fn errors(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| {
                e["method"] == "Runtime.exceptionThrown"
                    || (e["method"] == "Runtime.consoleAPICalled"
                        && (e["params"]["type"] == "error" || e["params"]["type"] == "assert"))
                    || (e["method"] == "Log.entryAdded" && e["params"]["entry"]["level"] == "error")
            })
            .map(|e| e.to_string())
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.session = None;
        // Ask politely, then make sure: only this child, by its handle.
        let _ = self.tx.write_all(b"{\"id\":999999,\"method\":\"Browser.close\"}\0");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

fn b64decode(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("bad base64"),
    };
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=' && !c.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= (val(c) as u32) << (18 - 6 * i);
        }
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

fn artifacts_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    let d = target.join("test-artifacts");
    std::fs::create_dir_all(&d).unwrap();
    d
}

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
    let targets = b.call("Target.createTarget", json!({"url": "about:blank"}));
    let target = targets["targetId"].as_str().unwrap().to_string();
    let att = b.call("Target.attachToTarget", json!({"targetId": target, "flatten": true}));
    b.session = Some(att["sessionId"].as_str().unwrap().to_string());
    for m in ["Runtime.enable", "Log.enable", "Page.enable"] {
        b.call(m, json!({}));
    }
    b.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
    );
    b.call("Page.navigate", json!({"url": format!("file://{}", html.display())}));
    b.wait_event("Page.loadEventFired", Duration::from_secs(60));
    assert_eq!(
        b.eval("!!(window.jtrace && window.jtrace.ready)"),
        json!(true),
        "viewer did not start"
    );
    b.next_frame();
    let errors = b.errors();
    assert!(errors.is_empty(), "console errors: {errors:#?}");

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

    // Hover an interval whose waker is traced: "woken by" and the waker's lane lit.
    let off = b.eval("jtrace.locateWoken()");
    if off.is_object() {
        b.mouse(
            "mouseMoved",
            off["pageX"].as_f64().unwrap(),
            off["pageY"].as_f64().unwrap(),
            json!({}),
        );
        b.next_frame();
        let tip = b.eval("jtrace.tooltip()");
        assert!(tip.as_str().unwrap().contains("woken by"), "interval tooltip: {tip}");
        assert_eq!(b.eval("jtrace.wakerLanes()"), json!([off["waker"]]));
    } else {
        eprintln!("no woken interval with a traced waker visible; skipped that check");
    }

    // Back on the span for the screenshot, which is kept.
    b.mouse(
        "mouseMoved",
        at["pageX"].as_f64().unwrap(),
        at["pageY"].as_f64().unwrap(),
        json!({}),
    );
    b.next_frame();
    let shot = b.call("Page.captureScreenshot", json!({"format": "png"}));
    let png = b64decode(shot["data"].as_str().unwrap());
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    let path = artifacts_dir().join("timeline.png");
    std::fs::write(&path, &png).unwrap();
    eprintln!("screenshot: {} ({} bytes)", path.display(), png.len());
    let errors = b.errors();
    assert!(errors.is_empty(), "console errors: {errors:#?}");
}
