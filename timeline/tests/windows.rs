//! GC/safepoint windows and off-CPU evidence in the views, on a hand-made
//! trace with JVM events: a monitor block released by another thread, a GC
//! window over part of a block, and a safepoint that never ends.

mod fixture;

use fixture::*;
use jtrace_format::kind;
use jtrace_merge::{Cause, Trace};
use jtrace_timeline::{
    cause_segments, cause_segments_in, collect, jvm_windows, write_chrome, STATE_TID_OFFSET, STOPS_TID,
};
use serde_json::Value;

const HOLDER: u32 = 104;

/// * main (101): `A.run` [2000, 40000); enters a contended monitor of
///   java.lang.Object at 3000, switched out at 4000, woken by the holder at
///   9000, back at 9500, entered at 9600. Switched out again at 12000
///   (futex-like, no evidence) until 20000, woken by holder at 19000; a GC
///   window [14000, 17000) lies inside that block.
/// * holder (104): runs, `B.work` [8000, 9200).
/// * a safepoint begins at 30000 and never ends.
fn trace() -> Trace {
    let dir = tempdir("windows").join("t.jtrace");
    let mut b = Builder::default();
    b.jvm_start(PID, 1000);
    b.method(PID, 1, "A", "run", "()V");
    b.method(PID, 2, "B", "work", "(I)J");
    b.thread_start(PID, MAIN, 1000, "main", "main");
    b.thread_start(PID, HOLDER, 1000, "holder", "main");
    b.switch_in(MAIN, 1000, 0);
    b.enter(MAIN, 2000, 1);
    b.jvm_event(MAIN, 3000, kind::MONITOR_CONTENDED_ENTER, "java.lang.Object");
    b.switch_out(MAIN, 4000, false, 0);
    b.wakeup(MAIN, 9000, HOLDER);
    b.switch_in(MAIN, 9500, 0);
    b.jvm_event(MAIN, 9600, kind::MONITOR_CONTENDED_ENTERED, "java.lang.Object");
    b.switch_out(MAIN, 12000, false, 0);
    b.jvm_event(0, 14000, kind::GC_START, "");
    b.jvm_event(0, 17000, kind::GC_END, "");
    b.wakeup(MAIN, 19000, HOLDER);
    b.switch_in(MAIN, 20000, 0);
    b.jvm_event(0, 30000, kind::SAFEPOINT_BEGIN, "");
    b.exit(MAIN, 40000, 1);
    b.switch_in(HOLDER, 1000, 0);
    b.enter(HOLDER, 8000, 2);
    b.exit(HOLDER, 9200, 2);
    b.switch_out(HOLDER, 41000, false, 0);
    b.write(&dir, 1000, 41000);
    Trace::open(&dir).unwrap()
}

#[test]
fn windows_are_paired_per_cause() {
    let t = trace();
    let w = jvm_windows(&t);
    assert_eq!(w.len(), 2, "{w:?}");
    assert_eq!(
        (w[0].cause, w[0].seq, w[0].start, w[0].end, w[0].open),
        (Cause::Gc, 1, 14000, 17000, false)
    );
    assert_eq!(w[0].pid, PID);
    // The safepoint never ended: it runs to the JVM's last event.
    assert_eq!((w[1].cause, w[1].start, w[1].open), (Cause::Safepoint, 30000, true));
    assert!(w[1].end >= 40000, "{:?}", w[1]);
}

#[test]
fn window_part_of_a_block_is_placed_on_its_window() {
    let t = trace();
    let wins = jvm_windows(&t);
    let threads = collect(&t);
    let main = threads.iter().find(|th| th.info.tid == MAIN).unwrap();
    let block = main.offs.iter().find(|o| o.start == 12000).expect("the block at 12000");
    assert_eq!(block.split.off.get(Cause::Gc), 3000, "{:?}", block.split.off);
    let segs = cause_segments_in(block, &wins, PID);
    // Exact, contiguous, in time order, covering the interval.
    assert_eq!(segs.first().unwrap().0, block.start);
    assert_eq!(segs.last().unwrap().1, block.end);
    assert!(segs.windows(2).all(|p| p[0].1 == p[1].0), "{segs:?}");
    for c in Cause::ALL {
        let sum: u64 = segs.iter().filter(|s| s.2 == c).map(|s| s.1 - s.0).sum();
        assert_eq!(sum, block.split.off.get(c), "{c:?}");
    }
    // The GC part is the window itself, the rest around it.
    assert!(segs.contains(&(14000, 17000, Cause::Gc)), "{segs:?}");
    assert!(
        segs.iter().any(|s| s.1 == 14000) && segs.iter().any(|s| s.0 == 17000 && s.2 != Cause::Runqueue),
        "{segs:?}"
    );
    // Another JVM's window does not move it.
    let plain = cause_segments_in(block, &wins, PID + 1);
    assert_eq!(plain, cause_segments(block));
}

fn chrome(t: &Trace) -> Vec<Value> {
    let mut buf = Vec::new();
    write_chrome(t, &mut buf).unwrap();
    let doc: Value = serde_json::from_slice(&buf).expect("valid JSON");
    doc["traceEvents"].as_array().unwrap().clone()
}

#[test]
fn chrome_has_a_stops_track_and_evidence() {
    let t = trace();
    let evs = chrome(&t);
    let stops: Vec<&Value> = evs.iter().filter(|e| e["tid"] == STOPS_TID && e["ph"] == "X").collect();
    assert_eq!(stops.len(), 2, "{stops:?}");
    assert_eq!(stops[0]["name"], "GC #1");
    assert_eq!(stops[0]["cat"], "jvm");
    assert_eq!(
        (stops[0]["ts"].as_f64().unwrap(), stops[0]["dur"].as_f64().unwrap()),
        (13.0, 3.0)
    );
    assert_eq!(stops[1]["name"], "safepoint #1");
    assert_eq!(stops[1]["args"]["open"], true);
    assert!(evs
        .iter()
        .any(|e| e["ph"] == "M" && e["tid"] == STOPS_TID && e["args"]["name"] == "JVM stops (GC, safepoints)"));
    // main's gc slice is the window (µs since the trace start at 1000 ns).
    let stid = MAIN + STATE_TID_OFFSET;
    let gc: Vec<&Value> = evs.iter().filter(|e| e["tid"] == stid && e["name"] == "gc").collect();
    assert_eq!(gc.len(), 1, "{gc:?}");
    assert_eq!(
        (gc[0]["ts"].as_f64().unwrap(), gc[0]["dur"].as_f64().unwrap()),
        (13.0, 3.0)
    );
    // Nothing explained the block at its switch-out (the GC began later):
    // the slice's name says gc, and no evidence is made up.
    assert!(gc[0]["args"].get("evidence").is_none(), "{}", gc[0]);
    // The monitor block carries the monitor's class.
    let mon = evs
        .iter()
        .find(|e| e["tid"] == stid && e["name"] == "monitor")
        .expect("monitor slice");
    assert_eq!(
        mon["args"]["evidence"],
        "entering contended monitor of java.lang.Object"
    );
    assert_eq!(mon["args"]["waker"], "holder");
}

#[test]
fn page_carries_windows_and_interned_evidence() {
    let t = trace();
    let mut buf = Vec::new();
    jtrace_timeline::write_html(&t, &Default::default(), &mut buf).unwrap();
    let html = String::from_utf8(buf).unwrap();
    let open = "<script type=\"application/json\" id=\"data\">";
    let start = html.find(open).unwrap() + open.len();
    let d: Value = serde_json::from_str(&html[start..start + html[start..].find("</script>").unwrap()]).unwrap();
    let w = d["windows"].as_array().unwrap();
    assert_eq!(w.len(), 2);
    assert_eq!(w[0]["kind"], "GC");
    assert_eq!((w[0]["s"].as_u64(), w[0]["e"].as_u64()), (Some(13000), Some(16000)));
    assert_eq!(d["causes"][w[0]["c"].as_u64().unwrap() as usize], "gc");
    assert_eq!(w[1]["kind"], "safepoint");
    assert_eq!(w[1]["open"], true);
    let strings: Vec<&str> = d["strings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(strings[0], "");
    // Interned: each text once.
    let mut sorted = strings.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), strings.len(), "{strings:?}");
    let main = d["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"] == MAIN)
        .unwrap();
    let x: Vec<usize> = main["offs"]["x"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    let s: Vec<u64> = main["offs"]["s"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let at = |ts: u64| strings[x[s.iter().position(|&v| v == ts - 1000).unwrap()]];
    assert_eq!(at(4000), "entering contended monitor of java.lang.Object");
    assert_eq!(at(12000), "", "an unexplained block has no text");
    // The script is the viewer's: it reads `x` and `strings`.
    assert!(html.contains("D.strings[of.x[j]]"));
}

#[test]
fn a_block_over_two_windows_is_cut_around_both() {
    use jtrace_merge::{Breakdown, Evidence};
    use jtrace_timeline::{JvmWindow, OffSpan};
    // Blocked 1000..9000 then runnable until 9500; GC windows 2000..3000
    // and 5000..7000; the merge counted 3000 ns gc, 5000 lock_native.
    let mut split = Breakdown {
        wall: 8500,
        ..Default::default()
    };
    split.off.add(Cause::LockNative, 5000);
    split.off.add(Cause::Gc, 3000);
    split.off.add(Cause::Runqueue, 500);
    let o = OffSpan {
        start: 1000,
        end: 9500,
        preempted: false,
        wake: None,
        split,
        evidence: Evidence::None,
        depth: 0,
        open: false,
        stack: None,
    };
    let w = |seq, start, end| JvmWindow {
        pid: PID,
        cause: Cause::Gc,
        seq,
        start,
        end,
        open: false,
    };
    let segs = cause_segments_in(&o, &[w(1, 2000, 3000), w(2, 5000, 7000)], PID);
    assert_eq!(
        segs,
        vec![
            (1000, 2000, Cause::LockNative),
            (2000, 3000, Cause::Gc),
            (3000, 5000, Cause::LockNative),
            (5000, 7000, Cause::Gc),
            (7000, 9000, Cause::LockNative),
            (9000, 9500, Cause::Runqueue),
        ]
    );
    // Windows that cannot hold the gc part: the plain layout.
    let short = cause_segments_in(&o, &[w(1, 2000, 3000)], PID);
    assert_eq!(short, cause_segments(&o));
}

#[test]
fn a_gc_nested_in_a_safepoint_keeps_both_on_their_windows() {
    use jtrace_merge::{Breakdown, Evidence};
    use jtrace_timeline::{JvmWindow, OffSpan};
    // Blocked 1000..9000; a safepoint 2000..8000 with a GC 4000..5000 in it:
    // gc wins inside the GC, safepoint in the rest of the safepoint.
    let mut split = Breakdown {
        wall: 8000,
        ..Default::default()
    };
    split.off.add(Cause::LockNative, 2000);
    split.off.add(Cause::Gc, 1000);
    split.off.add(Cause::Safepoint, 5000);
    let o = OffSpan {
        start: 1000,
        end: 9000,
        preempted: false,
        wake: None,
        split,
        evidence: Evidence::None,
        depth: 0,
        open: false,
        stack: None,
    };
    let w = |cause, start, end| JvmWindow {
        pid: PID,
        cause,
        seq: 1,
        start,
        end,
        open: false,
    };
    let segs = cause_segments_in(&o, &[w(Cause::Safepoint, 2000, 8000), w(Cause::Gc, 4000, 5000)], PID);
    assert_eq!(
        segs,
        vec![
            (1000, 2000, Cause::LockNative),
            (2000, 4000, Cause::Safepoint),
            (4000, 5000, Cause::Gc),
            (5000, 8000, Cause::Safepoint),
            (8000, 9000, Cause::LockNative),
        ]
    );
}

/// The off-CPU segments of one page thread as the viewer builds them: each
/// interval's pieces (`g` where present, else `k`) one after the other from
/// its switch-out; `(start, end, cause index)` in ns since the trace start.
fn page_segments(th: &Value) -> Vec<(u64, u64, usize)> {
    let offs = &th["offs"];
    let placed: std::collections::HashMap<u64, &Value> = offs["g"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e[0].as_u64().unwrap(), &e[1]))
        .collect();
    let mut out = Vec::new();
    for (j, s) in offs["s"].as_array().unwrap().iter().enumerate() {
        let pieces = placed.get(&(j as u64)).copied().unwrap_or(&offs["k"][j]);
        let Some(p) = pieces.as_array() else { continue };
        let mut t = s.as_u64().unwrap();
        for q in p.chunks(2) {
            let ns = q[1].as_u64().unwrap();
            out.push((t, t + ns, q[0].as_u64().unwrap() as usize));
            t += ns;
        }
    }
    out
}

#[test]
fn page_carries_the_segments_the_chrome_export_lays_out() {
    let t = trace();
    let mut buf = Vec::new();
    jtrace_timeline::write_html(&t, &Default::default(), &mut buf).unwrap();
    let html = String::from_utf8(buf).unwrap();
    let open = "<script type=\"application/json\" id=\"data\">";
    let start = html.find(open).unwrap() + open.len();
    let d: Value = serde_json::from_str(&html[start..start + html[start..].find("</script>").unwrap()]).unwrap();
    let wins = jvm_windows(&t);
    let t0 = jtrace_timeline::time_origin(&t);
    let mut moved = 0;
    for th in collect(&t) {
        let page = d["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["tid"] == th.info.tid)
            .unwrap();
        moved += page["offs"]["g"].as_array().unwrap().len();
        let want: Vec<(u64, u64, usize)> = th
            .offs
            .iter()
            .flat_map(|o| cause_segments_in(o, &wins, PID))
            .map(|(s, e, c)| (s - t0, e - t0, c as usize))
            .collect();
        assert_eq!(page_segments(page), want, "thread {}", th.info.tid);
    }
    // Only main's block under the GC window needed its own pieces.
    assert_eq!(moved, 1);
    // Without windows, `k` is the layout: blocked causes first, runqueue last.
    let main = d["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["tid"] == MAIN)
        .unwrap();
    let k = main["offs"]["k"][0].as_array().unwrap();
    let causes: Vec<&str> = k
        .chunks(2)
        .map(|p| d["causes"][p[0].as_u64().unwrap() as usize].as_str().unwrap())
        .collect();
    assert_eq!(causes, ["monitor", "runqueue"]);
}

/// A small deterministic generator (xorshift64*), for the property test.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

#[test]
fn segments_tile_every_interval_whatever_the_windows() {
    use jtrace_merge::{Breakdown, Evidence};
    use jtrace_timeline::{JvmWindow, OffSpan};
    // The page sends segments as durations from the switch-out, so the
    // layout must leave no gap: check it over many random blocks/windows.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let choices = [
        Cause::Gc,
        Cause::Safepoint,
        Cause::Park,
        Cause::LockNative,
        Cause::Monitor,
        Cause::Runqueue,
    ];
    let mut placed = 0;
    for case in 0..20_000 {
        let start = 1000 + rng.below(1000);
        let mut split = Breakdown::default();
        for c in choices {
            if rng.below(2) == 0 {
                split.off.add(c, 1 + rng.below(3000));
            }
        }
        let total = split.off.total();
        split.wall = total;
        let o = OffSpan {
            start,
            end: start + total,
            preempted: false,
            wake: None,
            split,
            evidence: Evidence::None,
            depth: 0,
            open: false,
            stack: None,
        };
        let mut wins: Vec<JvmWindow> = (0..rng.below(5))
            .map(|i| {
                let s = rng.below(start + total + 1000);
                JvmWindow {
                    pid: PID + rng.below(2) as u32,
                    cause: if rng.below(2) == 0 { Cause::Gc } else { Cause::Safepoint },
                    seq: i as u32 + 1,
                    start: s,
                    end: s + rng.below(6000),
                    open: false,
                }
            })
            .collect();
        wins.sort_by_key(|w| w.start);
        let segs = cause_segments_in(&o, &wins, PID);
        placed += (segs != cause_segments(&o)) as usize;
        if total == 0 {
            assert!(segs.is_empty());
            continue;
        }
        assert_eq!(segs[0].0, o.start, "case {case}: {segs:?}");
        assert_eq!(segs.last().unwrap().1, o.end, "case {case}: {segs:?}");
        assert!(
            segs.windows(2).all(|p| p[0].1 == p[1].0) && segs.iter().all(|s| s.0 < s.1),
            "case {case}: {segs:?} {wins:?}"
        );
        for c in Cause::ALL {
            let sum: u64 = segs.iter().filter(|s| s.2 == c).map(|s| s.1 - s.0).sum();
            assert_eq!(sum, o.split.off.get(c), "case {case} {c:?}: {segs:?}");
        }
    }
    // Windows held the GC/safepoint part of many blocks, not just a few.
    assert!(placed > 1000, "only {placed} blocks placed on windows");
}
