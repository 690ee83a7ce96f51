//! Headless Chromium driven over the DevTools protocol
//! (`--remote-debugging-pipe`: NUL-separated JSON on fds 3 and 4, no extra
//! crates), for the tests of the HTML pages (timeline, flame graph).

use super::tempdir;
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
pub struct Browser {
    child: Child,
    tx: File,
    rx: Receiver<Value>,
    next_id: u64,
    /// Events received so far (method, params, sessionId).
    pub events: Vec<Value>,
    pub session: Option<String>,
    profile: PathBuf,
}

fn pipe() -> (RawFd, RawFd) {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    (fds[0], fds[1])
}

impl Browser {
    pub fn launch(width: u32, height: u32) -> Browser {
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
    pub fn call(&mut self, method: &str, params: Value) -> Value {
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
    pub fn wait_event(&mut self, method: &str, timeout: Duration) {
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
    pub fn eval(&mut self, expr: &str) -> Value {
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
    pub fn next_frame(&mut self) {
        self.eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(1))))");
    }

    /// A key press (keyDown + keyUp) as the user types it.
    pub fn key(&mut self, key: &str, code: &str, vk: u32, modifiers: u32) {
        let text = if key.chars().count() == 1 {
            key
        } else if key == "Enter" {
            "\r"
        } else {
            ""
        };
        let mut down =
            json!({"type": "keyDown", "key": key, "code": code, "windowsVirtualKeyCode": vk, "modifiers": modifiers});
        if !text.is_empty() {
            down["text"] = json!(text);
        }
        self.call("Input.dispatchKeyEvent", down);
        self.call(
            "Input.dispatchKeyEvent",
            json!({"type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": vk, "modifiers": modifiers}),
        );
    }

    /// RGBA of the canvas pixel at canvas coordinates (device scale 1).
    pub fn pixel(&mut self, x: f64, y: f64) -> [u8; 4] {
        let v = self.eval(&format!(
            "Array.from(document.getElementById('cv').getContext('2d').getImageData({}, {}, 1, 1).data)",
            x.round(),
            y.round()
        ));
        let a: Vec<u8> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap() as u8)
            .collect();
        [a[0], a[1], a[2], a[3]]
    }

    pub fn screenshot(&mut self, name: &str) {
        let shot = self.call("Page.captureScreenshot", json!({"format": "png"}));
        let png = b64decode(shot["data"].as_str().unwrap());
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        let path = artifacts_dir().join(name);
        std::fs::write(&path, &png).unwrap();
        eprintln!("screenshot: {} ({} bytes)", path.display(), png.len());
    }

    pub fn mouse(&mut self, kind: &str, x: f64, y: f64, extra: Value) {
        let mut p = json!({"type": kind, "x": x, "y": y});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        self.call("Input.dispatchMouseEvent", p);
    }

    /// Console errors, uncaught exceptions and error log entries so far.
    pub fn errors(&self) -> Vec<String> {
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

pub fn b64decode(s: &str) -> Vec<u8> {
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

pub fn artifacts_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    let d = target.join("test-artifacts");
    std::fs::create_dir_all(&d).unwrap();
    d
}

impl Browser {
    /// A new page of `width`×`height` (device scale 1) with the runtime,
    /// log and page events on, at `url`, loaded.
    pub fn open_page(&mut self, url: &str, width: u32, height: u32) {
        let targets = self.call("Target.createTarget", json!({"url": "about:blank"}));
        let target = targets["targetId"].as_str().unwrap().to_string();
        let att = self.call("Target.attachToTarget", json!({"targetId": target, "flatten": true}));
        self.session = Some(att["sessionId"].as_str().unwrap().to_string());
        for m in ["Runtime.enable", "Log.enable", "Page.enable"] {
            self.call(m, json!({}));
        }
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
        self.call("Page.navigate", json!({"url": url}));
        self.wait_event("Page.loadEventFired", Duration::from_secs(60));
    }
}
