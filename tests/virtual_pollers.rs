//! I/O behind a starved poller (JDK 21 and 25): a virtual thread reading a
//! socket waits until the JDK's read poller unparks it; where the poller
//! is a virtual thread too (JDK 25) and every carrier is busy, the poller
//! waits for a carrier, and the read with it. `jtrace why` goes from the
//! read's `socket` wait to the poller and its `carrier` wait, which names
//! the virtual thread that held the carrier (docs/WHY.md, "I/O of virtual
//! threads"). A test binary of its own: its 200 ms spins on a 2-CPU
//! machine would starve the timers other virtual-thread tests measure.

mod common;

use common::*;
use jtrace_merge::{Cause, Trace};
use std::path::PathBuf;

const MS: u64 = 1_000_000;

/// Records VirtualPoller `program` on `jdk` with one carrier and one read
/// poller: the trace directory, the trace, and what the program printed.
fn record(jdk: &str, program: &[&str]) -> (PathBuf, Trace, String) {
    let classes = classes();
    let out = tempdir("vt-poller").join("t.jtrace");
    let java = java(jdk);
    let mut cmd = vec![
        java.to_str().unwrap(),
        "-Djdk.virtualThreadScheduler.parallelism=1",
        "-Djdk.virtualThreadScheduler.maxPoolSize=1",
        "-Djdk.readPollers=1",
        "-cp",
        classes.to_str().unwrap(),
    ];
    cmd.extend_from_slice(program);
    let o = jtrace_run(&out, &["--methods", "VirtualPoller.*"], &cmd);
    assert!(o.status.success(), "{jdk} {program:?}: jtrace run failed");
    let trace = Trace::open(&out).unwrap();
    assert_exact(&trace);
    (out, trace, String::from_utf8_lossy(&o.stdout).into_owned())
}

/// I/O behind a starved poller (tests/java/VirtualPoller.java), one
/// carrier, one read poller (`-Djdk.readPollers=1`): a virtual thread
/// `reader` waits in a socket read while `spinner` holds the carrier for
/// 200 ms; the data comes 20 ms into the spin. The program prints when it
/// wrote and when the spin ended (CLOCK_MONOTONIC): in between, the data
/// was there and only a poller with a carrier could hand it over.
///
/// The reader's wait is `socket`, answered by the poller that unparked it.
/// JDK 25: the poller is a virtual thread (`SubPoller-0`, the JDK's default
/// `jdk.pollerMode` on Linux): it waits for the carrier itself, `carrier`
/// held by the spinner, ≥ 85 % of that time, on the path under the
/// reader's socket wait; with `park` it was parked (behind the JDK's
/// MasterPoller), with `yield` it had yielded after the poll that woke the
/// spinner (a request of its own), which is `carrier` too, not `runqueue`.
/// JDK 21 has no `jdk.pollerMode`: its pollers are platform threads
/// (`Read-Poller`), which unpark the reader at once; the reader then waits
/// for the carrier itself, held by the spinner: that is what is asserted.
#[test]
fn io_behind_a_starved_poller_waits_for_the_pollers_carrier() {
    for jdk in VIRTUAL_THREAD_JDKS {
        for mode in ["park", "yield"] {
            starved_poller(jdk, mode);
        }
    }
}

/// One run of [`io_behind_a_starved_poller_waits_for_the_pollers_carrier`].
fn starved_poller(jdk: &str, mode: &str) {
    let (delay, spin) = (20u64, 200u64);
    let name = format!("{} {mode}", jdk_name(jdk));
    let program = ["VirtualPoller", mode, &delay.to_string(), &spin.to_string()];
    let (out, trace, stdout) = record(jdk, &program);
    let injected = injected_delay(&stdout);
    eprintln!("{name}: {stdout}");
    assert!(
        injected * 100 >= (spin - delay) * MS * 50,
        "{name}: the data came {injected} ns before the spin ended: no starved poller"
    );
    let why = [
        "why",
        "--json",
        "--method",
        "VirtualPoller.receive",
        "--thread",
        "reader",
    ];
    let why: serde_json::Value = serde_json::from_slice(&jtrace_stdout(&why, &out)).unwrap();
    let inv = &why["invocations"][0];
    let path = inv["path"].as_array().expect("a path");
    assert_eq!(path.iter().map(ns).sum::<u64>(), inv["wall_ns"].as_u64().unwrap());
    let reader = inv["tid"].as_u64().unwrap() as u32;
    // The reader's wait: `socket` (then `carrier`, once a platform poller
    // unparked it), followed to the poller that unparked it.
    let found = invocations(&trace);
    let is_receive = |m: u32| trace.methods[m as usize].qualified() == "VirtualPoller.receive";
    let (_, receive) = (found.iter())
        .find(|(t, i)| t.tid == reader && is_receive(i.method))
        .expect("the reader's receive");
    let socket = receive.breakdown.off.get(Cause::Socket);
    let waited = socket + receive.breakdown.off.get(Cause::Carrier);
    assert!(
        socket > 0 && waited * 100 >= injected * 85,
        "{name}: {:?}",
        receive.breakdown
    );
    let hops = inv["hops"].as_array().unwrap();
    let h = (hops.iter())
        .position(|h| h["waiter"]["tid"] == reader && h["cause"] == "socket" && h["depth"] == 1)
        .unwrap_or_else(|| panic!("{name}: no hop from the socket wait: {hops:?}"));
    let poller = hops[h]["blocker"]["tid"].as_u64().unwrap() as u32;
    let poller_name = hops[h]["blocker"]["thread"].as_str().unwrap();
    // Whose carrier wait the spinner caused: the poller's under the hop (a
    // virtual poller), else the reader's own.
    let (waiter, under) = if trace.threads[&poller].virtual_id.is_some() {
        assert!(
            poller_name.starts_with("SubPoller-"),
            "{name}: the poller is {poller_name}"
        );
        // The reader waited for the data all along.
        assert!(socket * 100 >= injected * 85, "{name}: socket {socket} ns");
        (poller, Some(h as u64))
    } else {
        assert_eq!((jdk, poller_name), (JDK21, "Read-Poller"), "{name}: a platform poller");
        (reader, None)
    };
    let (held, queued) = carrier_behind(path, waiter, under, "spinner");
    eprintln!(
        "{name}: poller {poller_name}; {:.1} ms of carrier held by the spinner, {:.1} ms runqueue, of {:.1} ms \
         injected",
        held as f64 / 1e6,
        queued as f64 / 1e6,
        injected as f64 / 1e6
    );
    assert!(
        held * 100 >= injected * 85,
        "{name}: carrier held by the spinner {held} ns of {injected} ns: {path:?}"
    );
    assert!(queued * 100 < injected * 15, "{name}: runqueue {queued} ns: {path:?}");
    assert_eq!(inv["root_cause"]["state"], "carrier", "{name}");
    std::fs::remove_dir_all(out.parent().unwrap()).ok();
}

/// A `why --json` segment's ns.
fn ns(s: &serde_json::Value) -> u64 {
    s["ns"].as_u64().unwrap()
}

/// Of the segments of thread `tid` under hop `under` (None: the
/// invocation's own): the `carrier` ns (each held by `holder`) and the
/// `runqueue` ns.
fn carrier_behind(path: &[serde_json::Value], tid: u32, under: Option<u64>, holder: &str) -> (u64, u64) {
    let mine = || (path.iter()).filter(|s| s["tid"] == tid && s["hop"].as_u64() == under);
    let held = (mine().filter(|s| s["state"] == "carrier"))
        .map(|s| {
            assert_eq!(s["cpu_holder"]["thread"], holder, "{s}");
            ns(s)
        })
        .sum();
    let queued = mine().filter(|s| s["state"] == "runqueue").map(ns).sum();
    (held, queued)
}

/// From "wrote at W ns, spun until S ns" (VirtualPoller's output): S - W.
fn injected_delay(stdout: &str) -> u64 {
    let line = (stdout.lines())
        .find_map(|l| l.strip_prefix("wrote at "))
        .unwrap_or_else(|| panic!("no times in {stdout}"));
    let nums: Vec<u64> = (line.split(|c: char| !c.is_ascii_digit()))
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(nums.len(), 2, "{line}");
    nums[1].saturating_sub(nums[0])
}
