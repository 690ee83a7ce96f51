//! Virtual threads the way servers use them (JDK 21 and 25): waiting for a
//! carrier is its own cause (`carrier`), and `jtrace why` follows it to the
//! virtual thread that held the carrier (docs/REPORT.md, "Virtual threads").

mod common;

use common::*;
use jtrace_merge::{analyze, Cause, Evidence, Invocation, OffCpuInterval, ThreadInfo, Trace, Visitor, UNMOUNTED_STATE};
use std::path::PathBuf;

const MS: u64 = 1_000_000;

/// The calls of `Class.method` in `trace`.
fn calls(trace: &Trace, class: &str, method: &str) -> Vec<(ThreadInfo, Invocation)> {
    (invocations(trace).into_iter())
        .filter(|(_, i)| {
            let m = &trace.methods[i.method as usize];
            m.class == class && m.name == method
        })
        .collect()
}

/// Records `jtrace run --methods <methods> -- java <jvm…> -cp <classes> <program…>`.
fn record(jdk: &str, tag: &str, methods: &str, jvm: &[&str], program: &[&str]) -> (PathBuf, Trace) {
    let classes = classes();
    let out = tempdir(tag).join("t.jtrace");
    let java = java(jdk);
    let mut cmd: Vec<&str> = vec![java.to_str().unwrap()];
    cmd.extend_from_slice(jvm);
    cmd.extend(["-cp", classes.to_str().unwrap()]);
    cmd.extend_from_slice(program);
    let o = jtrace_run(&out, &["--methods", methods], &cmd);
    assert!(o.status.success(), "{jdk} {tag}: jtrace run failed");
    let trace = Trace::open(&out).unwrap();
    assert_exact(&trace);
    (out, trace)
}

/// One carrier: a virtual thread whose 10 ms sleep ends while another
/// spins on the only carrier for 120 ms waits ~110 ms for it: ≥ 85 % of
/// that is `carrier` (not `runqueue`, not `sleep`), its sleep is the 10 ms,
/// and `jtrace why` says the carrier was held by the spinner.
#[test]
fn a_virtual_thread_behind_a_spinning_one_waits_for_its_carrier() {
    // Its spinner and the server's load would be each other's delays.
    let _one = one_at_a_time();
    let (nap, spin) = (10u64, 120u64);
    for jdk in VIRTUAL_THREAD_JDKS {
        let one_carrier = [
            "-Djdk.virtualThreadScheduler.parallelism=1",
            "-Djdk.virtualThreadScheduler.maxPoolSize=1",
        ];
        let (out, trace) = record(
            jdk,
            "vt-carrier",
            "VirtualCarrier.*",
            &one_carrier,
            &["VirtualCarrier", &nap.to_string(), &spin.to_string()],
        );
        let found = calls(&trace, "VirtualCarrier", "nap");
        assert_eq!(found.len(), 1, "{}: one nap", jdk_name(jdk));
        let (th, inv) = &found[0];
        assert!(th.virtual_id.is_some(), "nap runs on the virtual thread");
        let b = inv.breakdown;
        let (carrier, sleep) = (b.off.get(Cause::Carrier), b.off.get(Cause::Sleep));
        eprintln!(
            "{}: nap wall {:.1} ms: sleep {:.1} ms, carrier {:.1} ms, runqueue {:.1} ms, cpu {:.1} ms",
            jdk_name(jdk),
            b.wall as f64 / 1e6,
            sleep as f64 / 1e6,
            carrier as f64 / 1e6,
            b.off.get(Cause::Runqueue) as f64 / 1e6,
            b.cpu as f64 / 1e6
        );
        let waited = (spin - nap) * MS;
        assert!(
            carrier * 100 >= waited * 85,
            "{}: carrier {carrier} ns of a {waited} ns wait",
            jdk_name(jdk)
        );
        assert!(
            sleep >= nap * MS * 85 / 100 && sleep < nap * MS * 2,
            "{}: the sleep is {sleep} ns, not ~{nap} ms",
            jdk_name(jdk)
        );
        // `why` names the spinner as the one that held the carrier.
        let why = jtrace_stdout(&["why", "--json", "--method", "VirtualCarrier.nap"], &out);
        let why: serde_json::Value = serde_json::from_slice(&why).unwrap();
        let path = why["invocations"][0]["path"].as_array().expect("a path").clone();
        let carrier_ns: u64 = (path.iter())
            .filter(|s| s["state"] == "carrier")
            .map(|s| {
                assert_eq!(s["cpu_holder"]["thread"], "spinner", "{s}");
                s["ns"].as_u64().unwrap()
            })
            .sum();
        assert!(
            carrier_ns * 100 >= waited * 85,
            "{}: why's carrier time {carrier_ns}",
            jdk_name(jdk)
        );
    }
}

/// Each invocation and off-CPU interval of a walk, with its thread.
#[derive(Default)]
struct Walked {
    calls: Vec<(ThreadInfo, Invocation)>,
    offs: Vec<(u32, OffCpuInterval)>,
}

impl Visitor for Walked {
    fn exit(&mut self, t: &ThreadInfo, _d: usize, inv: &Invocation) {
        self.calls.push((t.clone(), *inv));
    }
    fn off_cpu(&mut self, t: &ThreadInfo, _d: usize, iv: &OffCpuInterval) {
        self.offs.push((t.tid, *iv));
    }
}

/// A real virtual-thread server: the JDK's HttpServer with a
/// virtual-thread-per-task executor under a loopback load of 9 clients (3 on each route)
/// (tests/java/VirtualServer.java). Every request is served on a virtual
/// thread; its accounting is exact; a 20 ms `Thread.sleep` route is
/// mostly `sleep`; a contended `synchronized` route's monitor waits name
/// the monitor's class (`VirtualServer$Ledger`; the JDK's own locks met
/// on the way, rarely, as `java.… (carrier pinned)`), never the JDK's
/// VirtualThread-unblocker as the waker, and where the virtual thread
/// unmounted to wait (JDK 25) the waker is a virtual thread: the one that
/// released the monitor.
#[test]
fn a_virtual_thread_http_server_names_its_waits() {
    let _one = one_at_a_time();
    let per_route = 40;
    for jdk in VIRTUAL_THREAD_JDKS {
        let name = jdk_name(jdk);
        let classes = classes();
        let out = tempdir("vt-server").join("t.jtrace");
        let java = java(jdk);
        let program = [
            java.to_str().unwrap(),
            "-cp",
            classes.to_str().unwrap(),
            "VirtualServer",
            &per_route.to_string(),
            "9",
            "20",
            "10",
            "5",
        ];
        let o = jtrace_run(&out, &["--methods", "VirtualServer.*"], &program);
        assert!(o.status.success(), "{name}: jtrace run failed");
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            stdout.contains(&format!("served {}", per_route * 3)),
            "{name}: {stdout}"
        );
        let trace = Trace::open(&out).unwrap();
        assert_exact(&trace);
        let mut w = Walked::default();
        analyze(&trace, &mut w);
        let route = |m: &str| -> Vec<&(ThreadInfo, Invocation)> {
            (w.calls.iter())
                .filter(|(_, i)| {
                    let md = &trace.methods[i.method as usize];
                    md.class == "VirtualServer" && md.name == m
                })
                .collect()
        };
        for m in ["sleepRoute", "lockRoute", "spinRoute"] {
            let calls = route(m);
            assert_eq!(calls.len(), per_route, "{name}: {m} calls");
            for (t, _) in &calls {
                assert!(t.virtual_id.is_some(), "{name}: {m} on {}", t.display_name());
            }
        }
        // The sleep route: the sleep is its 20 ms, whatever else it waited.
        let sleeps = route("sleepRoute");
        let slept: u64 = sleeps.iter().map(|(_, i)| i.breakdown.off.get(Cause::Sleep)).sum();
        assert!(
            slept >= per_route as u64 * 20 * MS * 85 / 100,
            "{name}: the sleep route slept {:.1} ms a call",
            slept as f64 / per_route as f64 / 1e6
        );
        // The lock route: its monitor waits.
        let thread = |tid: u32| trace.threads.get(&tid);
        let (mut waits, mut unmounted, mut others) = (0, 0, 0);
        for (t, inv) in route("lockRoute") {
            for (_, iv) in
                (w.offs.iter()).filter(|(tid, iv)| *tid == t.tid && iv.start >= inv.entry && iv.end <= inv.exit)
            {
                let Evidence::Jvm {
                    cause: Cause::Monitor,
                    detail,
                } = iv.evidence
                else {
                    continue;
                };
                let detail = &trace.details[detail as usize];
                if !detail.starts_with("VirtualServer$Ledger") {
                    // The JDK's own locks may be met on the way, e.g. a
                    // virtual thread's interrupt lock (a java.lang.Object)
                    // while it unmounts, held by an unpark or interrupt;
                    // they are named too, and pin the carrier.
                    assert!(
                        detail.starts_with("java.") && detail.ends_with("(carrier pinned)"),
                        "{name}: a monitor wait of {} names {detail:?}",
                        t.display_name()
                    );
                    others += 1;
                    continue;
                }
                waits += 1;
                let Some(wake) = iv.wake else { continue };
                let waker = thread(wake.waker_tid);
                let waker_name = waker.map_or("?", |w| w.display_name());
                assert!(
                    !waker_name.contains("unblocker"),
                    "{name}: {} woken by {waker_name}",
                    t.display_name()
                );
                if iv.prev_state & UNMOUNTED_STATE != 0 {
                    unmounted += 1;
                    assert!(
                        waker.is_some_and(|w| w.virtual_id.is_some()),
                        "{name}: {} unmounted on the monitor, woken by {waker_name}",
                        t.display_name()
                    );
                }
            }
        }
        eprintln!("{name}: {waits} monitor waits in lockRoute, {unmounted} unmounted, {others} on the JDK's locks");
        assert!(
            others <= waits,
            "{name}: more waits on the JDK's locks than on the Ledger"
        );
        assert!(waits > 0, "{name}: 3 clients on /lock never contended the Ledger");
        // JEP 491: from JDK 24 a virtual thread unmounts to wait for a monitor.
        if jdk == JDK25 {
            assert!(unmounted > 0, "{name}: no unmounted monitor wait");
        }
        std::fs::remove_dir_all(out.parent().unwrap()).ok();
    }
}
