//! Load/draw benchmark of the flame graph page on synthetic profiles of
//! up to a million distinct stacks (ignored by default; needs chromium):
//!
//! ```text
//! cargo test -p jtrace-timeline --release --test flame_bench -- --ignored --nocapture
//! ```
//!
//! Prints, per size, the page's size and its own performance.now()
//! figures (JSON parse and tree sums, first draw, zoom, search, the
//! inverted view) as its `<pre id=state>` reports them under `#bench`.

use jtrace_timeline::flame::{write_flame_folded, FlameOptions};
use jtrace_timeline::Folded;
use std::process::Command;
use std::time::Instant;

/// `n` distinct stacks of depth 8 to 40: a Java-like tree (a few roots, a
/// fan-out that grows with depth), each stack with one cause.
fn synthetic(n: usize) -> Folded {
    let mut f = Folded::default();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let causes = ["cpu", "sleep", "monitor", "park", "socket", "runqueue"];
    while f.stacks.len() < n {
        let depth = 8 + rnd(33);
        let mut key = causes[rnd(causes.len() as u64) as usize].to_string();
        for d in 0..depth {
            let fan = 2 + d * d / 4;
            key.push_str(&format!(";com.acme.layer{d}.C{}.m{}_[j]", rnd(fan), rnd(3)));
        }
        let ns = 1_000 + rnd(10_000_000);
        *f.stacks.entry(key).or_default() += ns;
    }
    f
}

#[test]
#[ignore]
fn flame_page_of_a_million_stacks() {
    let chromium = jtrace_timeline::html::find_chromium().expect("chromium");
    let dir = std::env::temp_dir().join(format!("jtrace-flame-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for n in [100_000, 1_000_000] {
        let folded = synthetic(n);
        let html = dir.join(format!("flame-{n}.html"));
        let t = Instant::now();
        let file = std::io::BufWriter::new(std::fs::File::create(&html).unwrap());
        write_flame_folded(folded, 10_101_010, "synthetic", vec![], &FlameOptions::default(), file).unwrap();
        let write_ms = t.elapsed().as_secs_f64() * 1e3;
        let mb = std::fs::metadata(&html).unwrap().len() as f64 / 1e6;
        let profile = dir.join("profile");
        let _ = std::fs::remove_dir_all(&profile);
        let t = Instant::now();
        let out = Command::new(&chromium)
            .args(jtrace_timeline::html::chromium_flags(&profile))
            .args(["--window-size=1600,1000", "--virtual-time-budget=600000", "--dump-dom"])
            .arg(format!("file://{}#bench", html.display()))
            .output()
            .unwrap();
        let wall_ms = t.elapsed().as_secs_f64() * 1e3;
        let dom = String::from_utf8_lossy(&out.stdout);
        let open = "<pre id=\"state\" hidden=\"\">";
        let start = dom.find(open).expect("state element") + open.len();
        let state: serde_json::Value =
            serde_json::from_str(&dom[start..start + dom[start..].find("</pre>").unwrap()]).unwrap();
        assert!(state["perf"]["bench"]["frames"].as_u64().unwrap() > 0, "{state}");
        println!(
            "{n} stacks: page {mb:.0} MB written in {write_ms:.0} ms; chromium {wall_ms:.0} ms wall; state {}",
            state
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
