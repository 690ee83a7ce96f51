//! `jtrace report --compare BEFORE AFTER` on real traces: CompareWork
//! (tests/java/CompareWork.java) recorded on JDK 17 with `nap` sleeping
//! D ms a call and again with 2D, `steady` sleeping 10 ms in both, and
//! once more on JDK 25 with D, and without `nap`. The doubled method must be the top change,
//! its `sleep` grown by about calls × D; the unchanged one must barely
//! change; a trace against itself must change by exactly nothing; the
//! JSON must hold the fields docs/REPORT.md documents, no more; a missing
//! trace must be an error naming it. Needs root, as CI has.

mod common;

use common::*;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Rounds of `nap` + `steady` in each recording.
const CALLS: u64 = 20;
/// `nap`'s sleep in BEFORE, ms; AFTER sleeps twice as long.
const D_MS: u64 = 15;
const MS: u64 = 1_000_000;

/// The traces: BEFORE (D, JDK 17), AFTER (2D, JDK 17), BEFORE on JDK 25,
/// and one without `nap` (JDK 17).
struct Traces {
    before: PathBuf,
    after: PathBuf,
    before_jdk25: PathBuf,
    no_nap: PathBuf,
}

/// Records CompareWork with `nap` sleeping `millis` (0: not called) on `jdk`.
fn record(jdk: &str, name: &str, millis: u64) -> PathBuf {
    let classes = classes();
    let out = tempdir(name).join("t.jtrace");
    let java = java(jdk);
    let (calls, millis) = (CALLS.to_string(), millis.to_string());
    let o = jtrace_run(
        &out,
        &["--methods", "CompareWork$Work.*", "--complete"],
        &[
            java.to_str().unwrap(),
            "-cp",
            classes.to_str().unwrap(),
            "CompareWork",
            &calls,
            &millis,
        ],
    );
    assert!(o.status.success(), "{name}: jtrace run failed");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&format!("compare-work {calls} {millis}")),
        "{name}: the workload did not finish"
    );
    out
}

/// The three traces, recorded once (one after the other: the timings of
/// one are not disturbed by another recording).
fn traces() -> &'static Traces {
    static T: OnceLock<Traces> = OnceLock::new();
    T.get_or_init(|| Traces {
        before: record(JDK17, "compare-before", D_MS),
        after: record(JDK17, "compare-after", 2 * D_MS),
        before_jdk25: record(JDK25, "compare-before-25", D_MS),
        no_nap: record(JDK17, "compare-no-nap", 0),
    })
}

fn compare_output(before: &Path, after: &Path, args: &[&str]) -> Output {
    Command::new(jtrace())
        .args(["report", "--compare"])
        .arg(before)
        .arg(after)
        .args(args)
        .output()
        .unwrap()
}

/// `jtrace report --compare BEFORE AFTER ARGS`'s standard output (it must succeed).
fn compare(before: &Path, after: &Path, args: &[&str]) -> String {
    let o = compare_output(before, after, args);
    assert!(
        o.status.success(),
        "report --compare {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn compare_json(before: &Path, after: &Path, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.push("--json");
    let v: Value = serde_json::from_str(&compare(before, after, &a)).unwrap();
    assert_eq!(v["schema"], "jtrace.compare.v1");
    v
}

/// The method `CompareWork$Work.<name>` of a comparison.
fn method<'a>(v: &'a Value, name: &str) -> &'a Value {
    (v["methods"].as_array().unwrap().iter())
        .find(|m| m["class"] == "CompareWork$Work" && m["name"] == name)
        .unwrap_or_else(|| panic!("no method {name} in {v:#}"))
}

fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// A `{before, after, delta}` whose delta is after − before.
fn check_change(ch: &Value) {
    let (b, a) = (ch["before"].as_u64().unwrap(), ch["after"].as_u64().unwrap());
    assert_eq!(i(&ch["delta"]), a as i64 - b as i64, "{ch}");
}

/// The data rows of the text table under the heading that starts with
/// `heading` (up to the first empty line or note).
fn table_rows<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(heading)).skip(2);
    let mut rows = Vec::new();
    for l in lines.by_ref() {
        if l.is_empty() || l.starts_with('(') {
            break;
        }
        rows.push(l);
    }
    rows
}

#[test]
fn the_doubled_method_is_the_top_change_with_its_sleep() {
    let t = traces();
    let v = compare_json(&t.before, &t.after, &[]);
    eprintln!("{v:#}");
    assert_eq!(v["sorted_by"], "wall");
    // The command lines differ (the delay); the JDK does not.
    assert_eq!(v["differences"], serde_json::json!(["command"]));

    let top = &v["methods"][0];
    assert_eq!(
        (top["class"].as_str(), top["name"].as_str()),
        (Some("CompareWork$Work"), Some("nap"))
    );
    assert_eq!(top["status"], "both");
    assert_eq!(
        top["calls"],
        serde_json::json!({"before": CALLS, "after": CALLS, "delta": 0})
    );
    for key in ["calls", "wall_ns", "cpu_ns"] {
        check_change(&top[key]);
    }
    // Each call sleeps D ms longer: its sleep grows by calls × D, give or
    // take the timer's lateness of each wakeup (1 ms a call, ample).
    let expected = (CALLS * D_MS * MS) as i64;
    let slack = (CALLS * MS) as i64;
    let sleep = &top["off_cpu_ns"]["sleep"];
    check_change(sleep);
    assert!(
        (i(&sleep["delta"]) - expected).abs() <= slack,
        "nap's sleep grew by {} ns, not {expected} ± {slack}",
        sleep["delta"]
    );
    // Its wall by as much, but for what follows each wakeup (runqueue): 2 ms a call.
    assert!(
        (i(&top["wall_ns"]["delta"]) - expected).abs() <= 2 * slack,
        "nap's wall grew by {} ns",
        top["wall_ns"]["delta"]
    );
    // Per call: the mean sleep grew by D.
    let mean = &top["mean_off_cpu_ns"]["sleep"];
    assert!(
        (i(&mean["delta"]) - (D_MS * MS) as i64).abs() <= MS as i64,
        "nap's mean sleep grew by {} ns",
        mean["delta"]
    );

    // steady sleeps 10 ms a call in both: its change is small, within the
    // same lateness, and far from nap's.
    let steady = method(&v, "steady");
    assert_eq!(steady["status"], "both");
    assert_eq!(steady["calls"]["delta"], 0);
    let d = i(&steady["wall_ns"]["delta"]);
    assert!(d.abs() <= 2 * slack, "steady's wall changed by {d} ns");
    assert!(d.abs() * 5 < i(&top["wall_ns"]["delta"]), "steady changed by {d} ns");

    // The text: the same top row, rounded as the report rounds, and a note
    // on the commands.
    let text = compare(&t.before, &t.after, &[]);
    eprintln!("{text}");
    assert!(text.contains("NOTE: the traces record different commands"), "{text}");
    assert!(!text.contains("different JDKs"), "{text}");
    let rows = table_rows(&text, "== Methods by change of wall time");
    assert!(rows[0].starts_with("CompareWork$Work.nap "), "{text}");
    let ms = |ns: u64| format!("{}.{:03}", ns / 1_000_000, (ns % 1_000_000) / 1000);
    let cells: Vec<&str> = rows[0].split_whitespace().collect();
    assert_eq!(cells[1], format!("{CALLS}→{CALLS}"));
    assert_eq!(cells[2], ms(top["wall_ns"]["before"].as_u64().unwrap()));
    assert_eq!(cells[3], ms(top["wall_ns"]["after"].as_u64().unwrap()));
    assert_eq!(cells[4], format!("+{}", ms(top["wall_ns"]["delta"].as_u64().unwrap())));
    let means = table_rows(&text, "== Per call");
    assert!(means[0].starts_with("CompareWork$Work.nap "), "{text}");
}

#[test]
fn a_trace_against_itself_changes_by_nothing() {
    let t = traces();
    let v = compare_json(&t.before, &t.before, &[]);
    assert_eq!(v["differences"], serde_json::json!([]));
    assert_eq!(v["before"], v["after"]);
    let mut changes = 0;
    let mut zero = |ch: &Value, what: &str| {
        assert_eq!(ch["before"], ch["after"], "{what}: {ch}");
        assert_eq!(ch["delta"], 0, "{what}: {ch}");
        changes += 1;
    };
    let methods = v["methods"].as_array().unwrap();
    assert_eq!(methods.len(), 2, "{v:#}");
    for m in methods {
        assert_eq!(m["status"], "both");
        for key in ["calls", "wall_ns", "cpu_ns", "mean_wall_ns", "mean_cpu_ns"] {
            zero(&m[key], key);
        }
        for key in ["off_cpu_ns", "mean_off_cpu_ns"] {
            for (cause, ch) in m[key].as_object().unwrap() {
                zero(ch, &format!("{key}.{cause}"));
            }
        }
    }
    for (key, ch) in v["threads"].as_object().unwrap() {
        zero(ch, key);
    }
    for c in v["causes"].as_array().unwrap() {
        zero(&c["off_cpu_ns"], c["cause"].as_str().unwrap());
    }
    assert!(changes > 10, "only {changes} figures compared");
    let text = compare(&t.before, &t.before, &[]);
    assert!(!text.contains("NOTE:"), "{text}");
    for row in table_rows(&text, "== Methods by change of wall time") {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[4], "0.000", "{row}");
        assert_eq!(cells[5], "0.0%", "{row}");
    }
}

#[test]
fn filters_apply_to_both_traces() {
    let t = traces();
    // Only the main thread: its sleep is nap's and steady's, so over the
    // threads it grows by calls × D too (unfiltered, the tracer's own
    // threads' time grows with the trace's length).
    let v = compare_json(&t.before, &t.after, &["--thread", "main", "--cause", "sleep"]);
    assert_eq!(v["sorted_by"], "sleep");
    assert_eq!(v["causes"][0]["cause"], "sleep");
    let sleep = &v["causes"][0]["off_cpu_ns"];
    check_change(sleep);
    let expected = (CALLS * D_MS * MS) as i64;
    assert!(
        (i(&sleep["delta"]) - expected).abs() <= 2 * (CALLS * MS) as i64,
        "main's sleep grew by {} ns, not about {expected}",
        sleep["delta"]
    );
    assert_eq!(v["methods"][0]["name"], "nap");
    for m in v["methods"].as_array().unwrap() {
        assert!(m["off_cpu_ns"].get("sleep").is_some(), "{m}");
    }
    // Every thread's totals match main's in each trace's own report.
    for (side, trace) in [("before", &t.before), ("after", &t.after)] {
        let o = Command::new(jtrace())
            .args(["report", "--json", "--thread", "main"])
            .arg(trace)
            .output()
            .unwrap();
        assert!(o.status.success());
        let r: Value = serde_json::from_slice(&o.stdout).unwrap();
        let threads = r["threads"].as_array().unwrap();
        let wall: u64 = threads.iter().map(|t| t["wall_ns"].as_u64().unwrap()).sum();
        assert_eq!(v["threads"]["wall_ns"][side].as_u64(), Some(wall), "{side}");
    }

    // One method, on both sides.
    let v = compare_json(&t.before, &t.after, &["--method", "CompareWork$Work.steady"]);
    let names: Vec<&str> = (v["methods"].as_array().unwrap().iter())
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["steady"]);

    // --top: the text's rows, not the JSON's.
    let text = compare(&t.before, &t.after, &["--top", "1"]);
    let rows = table_rows(&text, "== Methods by change of wall time");
    assert_eq!(rows.len(), 1, "{text}");
    assert!(rows[0].starts_with("CompareWork$Work.nap "), "{text}");
    assert!(text.contains("(1 more method(s), none with a larger change"), "{text}");
    assert_eq!(
        compare_json(&t.before, &t.after, &["--top", "1"])["methods"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn different_jdks_are_said() {
    let t = traces();
    let v = compare_json(&t.before, &t.before_jdk25, &[]);
    let jdk = |side: &str| v[side]["jvms"][0]["vm_version"].as_str().unwrap().to_string();
    assert!(jdk("before").starts_with("17."), "{}", jdk("before"));
    assert!(jdk("after").starts_with("25"), "{}", jdk("after"));
    assert!(
        v["differences"].as_array().unwrap().contains(&Value::from("jdk")),
        "{v:#}"
    );
    // Same workload, same delay: the same methods, none added or removed.
    for m in v["methods"].as_array().unwrap() {
        assert_eq!(m["status"], "both", "{m}");
    }
    let text = compare(&t.before, &t.before_jdk25, &[]);
    let note = format!(
        "NOTE: the traces record different JDKs: JDK {} before, JDK {} after",
        jdk("before"),
        jdk("after")
    );
    assert!(text.contains(&note), "{text}");
}

/// The `jtrace.compare.v1` example of docs/REPORT.md, its placeholders
/// (`SIDE = {…}` lines after it) put in: valid JSON.
fn documented_schema() -> Value {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/REPORT.md")).unwrap();
    let section = doc
        .split("schema `jtrace.compare.v1`")
        .nth(1)
        .expect("docs/REPORT.md documents jtrace.compare.v1");
    let block = section.split("```json\n").nth(1).unwrap().split("```").next().unwrap();
    // The document, then `NAME = value` definitions (each to the next).
    let mut parts: Vec<(String, String)> = vec![(String::new(), String::new())];
    for line in block.lines() {
        match line.split_once(" = ") {
            Some((name, rest)) if !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase()) => {
                parts.push((name.to_string(), rest.to_string()))
            }
            _ => {
                let last = &mut parts.last_mut().unwrap().1;
                last.push('\n');
                last.push_str(line);
            }
        }
    }
    let (_, mut json) = parts.remove(0);
    for (name, value) in &parts {
        json = json.replace(name.as_str(), value);
    }
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("docs/REPORT.md's example: {e}\n{json}"))
}

/// Fields absent when 0 on both sides (docs/REPORT.md says so).
const OPTIONAL: [&str; 1] = ["not_covered_ns"];

/// `got` has every field of `doc` (the optional ones aside) and no other,
/// of the same type; arrays' elements are checked against the documented
/// element, `{"<cause>": …}` maps' values against the documented value
/// (their keys are cause names); a mean may be null.
fn conforms(got: &Value, doc: &Value, path: &str) {
    match (got, doc) {
        (Value::Object(g), Value::Object(d)) if d.len() == 1 && d.contains_key("<cause>") => {
            for (cause, v) in g {
                assert!(
                    [
                        "runqueue",
                        "monitor",
                        "wait",
                        "park",
                        "sleep",
                        "gc",
                        "safepoint",
                        "socket",
                        "file",
                        "page_fault",
                        "lock_native",
                        "syscall_other",
                        "unknown",
                        "tracer",
                        "carrier",
                        "throttled",
                        "steal"
                    ]
                    .contains(&cause.as_str()),
                    "{path}: {cause} is no cause"
                );
                conforms(v, &d["<cause>"], &format!("{path}.{cause}"));
            }
        }
        (Value::Object(g), Value::Object(d)) => fields(g, d, path),
        (Value::Array(g), Value::Array(d)) => {
            if let Some(d0) = d.first() {
                for (n, v) in g.iter().enumerate() {
                    conforms(v, d0, &format!("{path}[{n}]"));
                }
            }
        }
        (Value::Null, Value::Number(_)) if path.contains(".mean_") => {}
        (Value::Number(_), Value::Number(_))
        | (Value::String(_), Value::String(_))
        | (Value::Bool(_), Value::Bool(_)) => {}
        _ => panic!("{path}: {got} where docs/REPORT.md has {doc}"),
    }
}

fn fields(got: &Map<String, Value>, doc: &Map<String, Value>, path: &str) {
    for (k, d) in doc {
        match got.get(k) {
            Some(g) => conforms(g, d, &format!("{path}.{k}")),
            None => assert!(OPTIONAL.contains(&k.as_str()), "{path}.{k}: documented, missing"),
        }
    }
    for k in got.keys() {
        assert!(doc.contains_key(k), "{path}.{k}: not in docs/REPORT.md");
    }
}

#[test]
fn json_has_exactly_the_documented_fields() {
    let t = traces();
    let doc = documented_schema();
    for (before, after) in [
        (&t.before, &t.after),
        (&t.before, &t.before_jdk25),
        (&t.after, &t.after),
    ] {
        let v = compare_json(before, after, &[]);
        conforms(&v, &doc, "");
        // Every figure's delta is after − before.
        for m in v["methods"].as_array().unwrap() {
            for key in ["calls", "wall_ns", "cpu_ns"] {
                check_change(&m[key]);
            }
            for ch in m["off_cpu_ns"].as_object().unwrap().values() {
                check_change(ch);
            }
        }
        for ch in v["threads"].as_object().unwrap().values() {
            check_change(ch);
        }
    }
    // A method only in one trace: removed, then added; its missing side's
    // figures are 0 and its means null.
    for (before, after, status) in [(&t.before, &t.no_nap, "removed"), (&t.no_nap, &t.before, "added")] {
        let v = compare_json(before, after, &[]);
        conforms(&v, &doc, "");
        let nap = method(&v, "nap");
        assert_eq!(nap["status"], status, "{nap}");
        let (gone, here) = if status == "removed" {
            ("after", "before")
        } else {
            ("before", "after")
        };
        assert_eq!(nap["calls"][gone], 0);
        assert_eq!(nap["calls"][here], CALLS);
        assert_eq!(nap["wall_ns"][gone], 0);
        assert!(
            nap["mean_wall_ns"][gone].is_null() && nap["mean_wall_ns"]["delta"].is_null(),
            "{nap}"
        );
        assert!(nap["mean_wall_ns"][here].as_u64().unwrap() >= D_MS * MS, "{nap}");
        assert_eq!(method(&v, "steady")["status"], "both");
        let text = compare(before, after, &[]);
        let row = table_rows(&text, "== Methods by change of wall time")
            .into_iter()
            .find(|r| r.starts_with("CompareWork$Work.nap "))
            .unwrap_or_else(|| panic!("{text}"));
        let calls = if status == "removed" {
            format!("{CALLS}→-")
        } else {
            format!("-→{CALLS}")
        };
        assert_eq!(row.split_whitespace().nth(1), Some(calls.as_str()), "{text}");
        assert!(
            text.contains("(calls -→N: the method is only in AFTER (added)"),
            "{text}"
        );
    }
}

#[test]
fn a_missing_or_unreadable_trace_is_a_clear_error() {
    let t = traces();
    let dir = tempdir("compare-missing");
    let missing = dir.join("nothing-here.jtrace");
    let empty = dir.join("empty.jtrace");
    std::fs::create_dir_all(&empty).unwrap();
    let cases = [
        (missing.as_path(), t.after.as_path(), "BEFORE trace", &missing),
        (t.before.as_path(), missing.as_path(), "AFTER trace", &missing),
        (t.before.as_path(), empty.as_path(), "AFTER trace", &empty),
    ];
    for (before, after, which, bad) in cases {
        for json in [false, true] {
            let args: &[&str] = if json { &["--json"] } else { &[] };
            let o = compare_output(before, after, args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{which} {}: {err}", bad.display());
            assert!(err.contains(which) && err.contains(&bad.display().to_string()), "{err}");
            assert!(!err.contains("panicked"), "{err}");
            assert!(o.stdout.is_empty(), "{}", String::from_utf8_lossy(&o.stdout));
        }
    }
    // One trace only is not a comparison: clap says so.
    let o = Command::new(jtrace())
        .args(["report", "--compare"])
        .arg(&t.before)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("AFTER"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
