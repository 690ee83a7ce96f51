//! Virtual threads the way servers use them (JDK 21 and 25): waiting for a
//! carrier is its own cause (`carrier`), and `jtrace why` follows it to the
//! virtual thread that held the carrier (docs/REPORT.md, "Virtual threads").

mod common;

use common::*;
use jtrace_merge::{analyze, Cause, Invocation, ThreadInfo, Trace, Visitor};
use std::path::PathBuf;

const MS: u64 = 1_000_000;

#[derive(Default)]
struct Calls(Vec<(ThreadInfo, Invocation)>);

impl Visitor for Calls {
    fn exit(&mut self, t: &ThreadInfo, _d: usize, inv: &Invocation) {
        self.0.push((t.clone(), *inv));
    }
}

/// The calls of `Class.method` in `trace`.
fn calls(trace: &Trace, class: &str, method: &str) -> Vec<(ThreadInfo, Invocation)> {
    let mut c = Calls::default();
    analyze(trace, &mut c);
    (c.0.into_iter())
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
