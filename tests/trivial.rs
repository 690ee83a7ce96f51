//! The trivial-method rule: under a broad `--methods`, a
//! getter (no call, loop, allocation or lock in a few bytes of bytecode)
//! and, when stacks are recorded (unless `--keep-forwarders`), a forwarder
//! (a short method whose calls all go to traced methods) get no probes at
//! load time and the report lists them with the rule that skipped them,
//! the forwarder with its blocking time from the stacks; a busy method and
//! a blocking one are recorded call for call, the blocking one's sleeps are
//! its own although a forwarder called it, and accounting stays exact (the
//! skipped methods' time is their callers' own). A forwarder named
//! outright is traced, and so is one under `--no-stacks`; `--complete`
//! instruments both.

mod common;

use common::*;
use jtrace_merge::Trace;

fn run_trivial(jdk: &str, out: &std::path::Path, methods: &str, extra: &[&str]) -> (u64, u64, u64) {
    let cp = classes();
    let java = java(jdk);
    let mut args = vec!["--methods", methods];
    args.extend_from_slice(extra);
    let o = jtrace_run(
        out,
        &args,
        &[java.to_str().unwrap(), "-cp", cp.to_str().unwrap(), "Trivial", "3000"],
    );
    assert!(o.status.success(), "{jdk}: jtrace run failed");
    summary_counts(&o.stdout, "value")
}

#[test]
fn a_getter_and_a_forwarder_get_no_probes_and_are_listed_the_others_are_recorded() {
    skipped_and_recorded(&[], true);
}

#[test]
fn keep_forwarders_gives_a_wildcard_selected_forwarder_its_probes() {
    skipped_and_recorded(&["--keep-forwarders"], false);
}

#[test]
fn without_stacks_a_forwarder_keeps_its_probes() {
    skipped_and_recorded(&["--no-stacks"], false);
}

/// Runs Trivial under `Trivial$Work.*` with `extra` options and checks
/// what was left without probes (the forwarder too if `forwarders`) and
/// what was recorded.
fn skipped_and_recorded(extra: &[&str], forwarders: bool) {
    let mut expected = vec!["Trivial$Work.value()I"];
    if forwarders {
        expected.insert(0, "Trivial$Work.relay(I)V");
    }
    for jdk in JDKS {
        let out = tempdir("trivial");
        let (value, crunch, napper) = run_trivial(jdk, &out, "Trivial$Work.*", extra);
        let trace = Trace::open(&out).unwrap();
        assert_exact(&trace);
        let r = jtrace_merge::build_report(&trace, &Default::default());
        let calls = calls_by_name(&r);
        eprintln!("{jdk}: value {value}, crunch {crunch}, napper {napper}; recorded {calls:?}");
        // The getter: no call recorded, listed with the rule.
        let t = r
            .trivial_skipped
            .as_ref()
            .unwrap_or_else(|| panic!("{jdk}: nothing skipped"));
        let mut names: Vec<String> = t
            .methods
            .iter()
            .map(|m| format!("{}.{}{}", m.class, m.name, m.signature))
            .collect();
        names.sort();
        assert_eq!(names, expected, "{jdk}");
        assert_eq!(t.count, expected.len() as u64);
        assert_eq!(t.rule, jtrace_format::TRIVIAL_RULE);
        assert!(!calls.contains_key("value"), "{jdk}: {calls:?}");
        if forwarders {
            assert!(!calls.contains_key("relay"), "{jdk}: {calls:?}");
        } else {
            assert_eq!(calls["relay"], napper, "{jdk}: relay");
        }
        // The others: every call, none demoted.
        assert!(r.demoted.is_empty(), "{jdk}: demoted {:?}", r.demoted);
        assert_eq!(calls["crunch"], crunch, "{jdk}: crunch");
        assert_eq!(calls["napper"], napper, "{jdk}: napper");
        assert_eq!(calls["<init>"], 1, "{jdk}: the constructor");
        // napper's sleeps are its own off-CPU time, under the forwarder too.
        let nap = r.methods.iter().find(|m| m.name == "napper").unwrap();
        let sleep = nap.off_cpu_ns.get(jtrace_merge::Cause::Sleep);
        assert!(sleep >= napper / 64 * 2_000_000, "{jdk}: napper slept {sleep} ns");
        // The skipped forwarder's blocking time, from the stacks of the
        // blocks: napper's sleeps, every one of which is under relay. The
        // getter never sleeps.
        let from_stacks = |name: &str| {
            (r.stack_only_methods.iter().find(|m| m.name == name)).map(|m| m.off_cpu_ns.get(jtrace_merge::Cause::Sleep))
        };
        assert_eq!(from_stacks("value").unwrap_or(0), 0, "{jdk}: the getter slept");
        if forwarders {
            let relay = from_stacks("relay").unwrap_or_else(|| panic!("{jdk}: no relay in {:?}", r.stack_only_methods));
            assert!(
                relay <= sleep && relay >= sleep - sleep / 50,
                "{jdk}: relay {relay} ns from stacks, napper slept {sleep} ns"
            );
        }
        // The text report says it, and the JSON report lists it.
        let text = report_text(&out);
        assert!(
            text.contains(&format!("== Trivial methods not instrumented: {}", expected.len()))
                && text.contains("Trivial$Work.value")
                && (!forwarders || text.contains("Trivial$Work.relay"))
                && (!forwarders
                    || text
                        .lines()
                        .any(|l| l.starts_with("Trivial$Work.relay ") && l.contains(" - "))),
            "{jdk}: {text}"
        );
        let json = report_json(&out);
        assert_eq!(json["trivial_skipped"]["count"], expected.len(), "{jdk}");
        let rule = json["trivial_skipped"]["rule"].as_str().unwrap();
        assert!(rule.contains("no invoke") && rule.contains("a forwarder"), "{rule}");
        std::fs::remove_dir_all(&out).ok();
    }
}

#[test]
fn a_forwarder_named_outright_is_traced() {
    for jdk in JDKS {
        let out = tempdir("trivial-named");
        let (_, _, napper) = run_trivial(jdk, &out, "Trivial$Work.relay,Trivial$Work.*", &["--skip-forwarders"]);
        let trace = Trace::open(&out).unwrap();
        assert_exact(&trace);
        let r = jtrace_merge::build_report(&trace, &Default::default());
        let calls = calls_by_name(&r);
        let skipped: Vec<&str> = r
            .trivial_skipped
            .iter()
            .flat_map(|t| t.methods.iter().map(|m| m.name.as_str()))
            .collect();
        assert_eq!(skipped, vec!["value"], "{jdk}");
        assert_eq!(calls["relay"], napper, "{jdk}: relay");
        assert_eq!(calls["napper"], napper, "{jdk}: napper");
        // The sleeps are napper's, and relay's as its caller's.
        let off = |name: &str| {
            let m = r.methods.iter().find(|m| m.name == name).unwrap();
            m.off_cpu_ns.get(jtrace_merge::Cause::Sleep)
        };
        assert!(
            off("napper") >= napper / 64 * 2_000_000,
            "{jdk}: napper slept {} ns",
            off("napper")
        );
        assert!(
            off("relay") >= off("napper"),
            "{jdk}: relay {} < napper {}",
            off("relay"),
            off("napper")
        );
        std::fs::remove_dir_all(&out).ok();
    }
}

#[test]
fn complete_instruments_the_getter() {
    for jdk in JDKS {
        let out = tempdir("trivial-complete");
        let (value, crunch, napper) = run_trivial(jdk, &out, "Trivial$Work.*", &["--complete"]);
        let trace = Trace::open(&out).unwrap();
        assert_exact(&trace);
        let r = jtrace_merge::build_report(&trace, &Default::default());
        let calls = calls_by_name(&r);
        assert!(r.trivial_skipped.is_none(), "{jdk}: {:?}", r.trivial_skipped);
        assert_eq!(calls["value"], value, "{jdk}: value");
        assert_eq!(calls["crunch"], crunch, "{jdk}: crunch");
        assert_eq!(calls["napper"], napper, "{jdk}: napper");
        assert_eq!(calls["relay"], napper, "{jdk}: relay");
        std::fs::remove_dir_all(&out).ok();
    }
}
