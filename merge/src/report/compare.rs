//! `jtrace report --compare BEFORE AFTER`: what changed between the
//! reports of two traces (schema `jtrace.compare.v1`, docs/REPORT.md).
//!
//! Pure: two [`Report`]s in, a [`Comparison`] out. Methods are matched by
//! class, name and signature; each gets its calls, wall, CPU and off-CPU
//! time by cause before and after, in total and per call, and the change.
//! The threads' totals give the whole trace's off-CPU time per cause.

use super::{JvmJson, LostJson, MethodJson, Report};
use crate::cause::{Cause, OffCpu};
use serde::ser::SerializeMap;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Schema name of the comparison's JSON.
pub const SCHEMA: &str = "jtrace.compare.v1";

/// A figure before and after, in integer nanoseconds (or calls), and its
/// change, `after - before`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Change {
    /// In the BEFORE trace.
    pub before: u64,
    /// In the AFTER trace.
    pub after: u64,
    /// `after - before`.
    pub delta: i64,
}

impl Change {
    /// The change from `before` to `after`.
    pub fn new(before: u64, after: u64) -> Change {
        Change {
            before,
            after,
            delta: signed_delta(before, after),
        }
    }

    /// The size of the change, whichever its sign.
    pub fn abs_delta(&self) -> u64 {
        self.delta.unsigned_abs()
    }

    /// Zero on both sides.
    pub fn is_zero(&self) -> bool {
        self.before == 0 && self.after == 0
    }
}

/// `after - before`, kept within an `i64` (nanoseconds never come near).
fn signed_delta(before: u64, after: u64) -> i64 {
    let d = i128::from(after) - i128::from(before);
    i64::try_from(d).unwrap_or(if d < 0 { i64::MIN } else { i64::MAX })
}

/// A mean per call before and after (the total divided by the calls,
/// rounded down, as the report's `wall_mean_ns`), and its change; a side
/// without calls has no mean (`None`, JSON `null`), nor then has the change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MeanChange {
    /// Per call in the BEFORE trace.
    pub before: Option<u64>,
    /// Per call in the AFTER trace.
    pub after: Option<u64>,
    /// `after - before`, when both are known.
    pub delta: Option<i64>,
}

impl MeanChange {
    /// The means of `total` over `calls` on each side.
    fn of(total: Change, calls: Change) -> MeanChange {
        let mean = |t: u64, n: u64| t.checked_div(n);
        let (before, after) = (mean(total.before, calls.before), mean(total.after, calls.after));
        MeanChange {
            before,
            after,
            delta: before.zip(after).map(|(b, a)| signed_delta(b, a)),
        }
    }
}

/// Figures per cause, in the report's column order, only for the causes
/// with time on either side; serialises as `{"<cause>": value}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerCause<T>(pub Vec<(Cause, T)>);

impl<T> PerCause<T> {
    /// The figure of cause `c`, if it had time on either side.
    pub fn get(&self, c: Cause) -> Option<&T> {
        self.0.iter().find(|(x, _)| *x == c).map(|(_, v)| v)
    }
}

impl<T: Serialize> Serialize for PerCause<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (c, v) in &self.0 {
            m.serialize_entry(c.name(), v)?;
        }
        m.end()
    }
}

/// Whether a method is in both traces or in one only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Called in both traces.
    Both,
    /// Only in AFTER: its BEFORE figures are 0 and its BEFORE means null.
    Added,
    /// Only in BEFORE: its AFTER figures are 0 and its AFTER means null.
    Removed,
}

/// One method (class, name and signature) before and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MethodChange {
    /// Class.
    pub class: String,
    /// Method name.
    pub name: String,
    /// JVM signature.
    pub signature: String,
    /// In both traces, or added or removed.
    pub status: Status,
    /// Calls.
    pub calls: Change,
    /// Σ wall (inclusive of callees).
    pub wall_ns: Change,
    /// Σ CPU.
    pub cpu_ns: Change,
    /// Σ off-CPU by cause, the causes with time on either side.
    pub off_cpu_ns: PerCause<Change>,
    /// Σ time no kernel data covered; absent when 0 on both sides.
    #[serde(skip_serializing_if = "Change::is_zero")]
    pub not_covered_ns: Change,
    /// Wall per call.
    pub mean_wall_ns: MeanChange,
    /// CPU per call.
    pub mean_cpu_ns: MeanChange,
    /// Off-CPU per call by cause (the causes of `off_cpu_ns`).
    pub mean_off_cpu_ns: PerCause<MeanChange>,
}

impl MethodChange {
    /// Σ off-CPU over every cause.
    pub fn off_cpu_total(&self) -> Change {
        let sum = |f: fn(&Change) -> u64| -> u64 { self.off_cpu_ns.0.iter().map(|(_, c)| f(c)).sum() };
        Change::new(sum(|c| c.before), sum(|c| c.after))
    }

    /// The change a comparison sorts by: of wall, or of `cause`'s time.
    fn key(&self, cause: Option<Cause>) -> u64 {
        match cause {
            None => self.wall_ns.abs_delta(),
            Some(c) => self.off_cpu_ns.get(c).map_or(0, Change::abs_delta),
        }
    }
}

/// One cause's off-CPU time summed over all the (selected) threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CauseChange {
    /// The cause (its name in JSON).
    #[serde(serialize_with = "cause_name")]
    pub cause: Cause,
    /// Its time, over the threads.
    pub off_cpu_ns: Change,
}

fn cause_name<S: serde::Serializer>(c: &Cause, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(c.name())
}

/// The threads' totals, summed over all the (selected) threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ThreadsChange {
    /// Σ wall of the threads over their traced lives.
    pub wall_ns: Change,
    /// Σ CPU.
    pub cpu_ns: Change,
    /// Σ off-CPU, all causes.
    pub off_cpu_ns: Change,
    /// Σ time no kernel data covered; absent when 0 on both sides.
    #[serde(skip_serializing_if = "Change::is_zero")]
    pub not_covered_ns: Change,
}

/// What a comparison says of each trace (from its report's `trace`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SideJson {
    /// Trace directory.
    pub path: String,
    /// Command line.
    pub command: String,
    /// Traced process.
    pub pid: u32,
    /// CLOCK_REALTIME at start.
    pub start_realtime_ns: u64,
    /// Recording duration.
    pub duration_ns: u64,
    /// The traced JVMs and their versions (empty: none wrote a stream).
    pub jvms: Vec<JvmJson>,
    /// Losses.
    pub lost_events: LostJson,
    /// Recording finished cleanly.
    pub complete: bool,
    /// The report's `trace.problems`.
    pub problems: Vec<String>,
}

impl SideJson {
    fn of(r: &Report) -> SideJson {
        let t = &r.trace;
        SideJson {
            path: t.path.clone(),
            command: t.command.clone(),
            pid: t.pid,
            start_realtime_ns: t.start_realtime_ns,
            duration_ns: t.duration_ns,
            jvms: t.jvms.clone(),
            lost_events: t.lost_events.clone(),
            complete: t.complete,
            problems: t.problems.clone(),
        }
    }

    /// The distinct JDK versions of its JVMs (those known).
    pub fn jdks(&self) -> BTreeSet<&str> {
        (self.jvms.iter())
            .map(|j| j.vm_version.as_str())
            .filter(|v| !v.is_empty())
            .collect()
    }
}

/// Metadata in which the two traces differ: said, not an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Difference {
    /// They record different command lines.
    Command,
    /// Their JVMs' versions differ (`java.vm.version`).
    Jdk,
}

/// The whole `jtrace.compare.v1` document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Comparison {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// The BEFORE trace.
    pub before: SideJson,
    /// The AFTER trace.
    pub after: SideJson,
    /// Metadata the traces differ in (empty: none).
    pub differences: Vec<Difference>,
    /// What `methods` are sorted by the change of: `wall`, or a cause's name.
    pub sorted_by: &'static str,
    /// The threads' totals.
    pub threads: ThreadsChange,
    /// Off-CPU time per cause over the threads, for every cause with time
    /// on either side, the largest change first (the cause sorted by
    /// first, if one is).
    pub causes: Vec<CauseChange>,
    /// Methods of either trace, the largest change of `sorted_by` first.
    pub methods: Vec<MethodChange>,
}

/// How to compare.
#[derive(Debug, Clone, Copy, Default)]
pub struct CompareOptions {
    /// Only methods with time off CPU for this cause on either side,
    /// sorted by its change (else all, sorted by the change of wall).
    pub cause: Option<Cause>,
}

/// A method's figures in one report (its entries summed, were there several).
#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    calls: u64,
    wall: u64,
    cpu: u64,
    off: OffCpu,
    not_covered: u64,
}

type Key<'a> = (&'a str, &'a str, &'a str);

fn by_method(methods: &[MethodJson]) -> BTreeMap<Key<'_>, Sums> {
    let mut map: BTreeMap<Key, Sums> = BTreeMap::new();
    for m in methods {
        let s = map
            .entry((m.class.as_str(), m.name.as_str(), m.signature.as_str()))
            .or_default();
        s.calls += m.calls;
        s.wall += m.wall_ns;
        s.cpu += m.cpu_ns;
        s.off += m.off_cpu_ns;
        s.not_covered += m.not_covered_ns;
    }
    map
}

fn method_change(key: Key, before: Option<&Sums>, after: Option<&Sums>) -> MethodChange {
    let status = match (before, after) {
        (Some(_), Some(_)) => Status::Both,
        (None, _) => Status::Added,
        (_, None) => Status::Removed,
    };
    let (b, a) = (before.copied().unwrap_or_default(), after.copied().unwrap_or_default());
    let calls = Change::new(b.calls, a.calls);
    let wall_ns = Change::new(b.wall, a.wall);
    let cpu_ns = Change::new(b.cpu, a.cpu);
    let off_cpu_ns = PerCause(
        (Cause::ALL.into_iter())
            .map(|c| (c, Change::new(b.off.get(c), a.off.get(c))))
            .filter(|(_, ch)| !ch.is_zero())
            .collect(),
    );
    MethodChange {
        class: key.0.to_string(),
        name: key.1.to_string(),
        signature: key.2.to_string(),
        status,
        calls,
        wall_ns,
        cpu_ns,
        not_covered_ns: Change::new(b.not_covered, a.not_covered),
        mean_wall_ns: MeanChange::of(wall_ns, calls),
        mean_cpu_ns: MeanChange::of(cpu_ns, calls),
        mean_off_cpu_ns: PerCause(
            (off_cpu_ns.0.iter())
                .map(|&(c, ch)| (c, MeanChange::of(ch, calls)))
                .collect(),
        ),
        off_cpu_ns,
    }
}

/// The threads' totals of one report.
fn thread_sums(r: &Report) -> Sums {
    let mut s = Sums::default();
    for t in &r.threads {
        s.wall += t.wall_ns;
        s.cpu += t.cpu_ns;
        s.off += t.off_cpu_ns;
        s.not_covered += t.not_covered_ns;
    }
    s
}

/// Compares the reports of two traces, BEFORE and AFTER, built with the
/// same filters (and without [`ReportFilter::cause`](super::ReportFilter::cause),
/// which would leave out the methods that lost all of that cause's time:
/// `opts.cause` selects them here, on either side).
pub fn compare(before: &Report, after: &Report, opts: &CompareOptions) -> Comparison {
    let (b, a) = (by_method(&before.methods), by_method(&after.methods));
    let keys: BTreeSet<Key> = b.keys().chain(a.keys()).copied().collect();
    let mut methods: Vec<MethodChange> = (keys.into_iter())
        .map(|k| method_change(k, b.get(&k), a.get(&k)))
        .filter(|m| opts.cause.is_none_or(|c| m.off_cpu_ns.get(c).is_some()))
        .collect();
    // Largest change first; the keys were in (class, name, signature)
    // order, which a stable sort keeps among equal changes.
    methods.sort_by_key(|m| std::cmp::Reverse(m.key(opts.cause)));

    let (tb, ta) = (thread_sums(before), thread_sums(after));
    let mut causes: Vec<CauseChange> = (Cause::ALL.into_iter())
        .map(|c| CauseChange {
            cause: c,
            off_cpu_ns: Change::new(tb.off.get(c), ta.off.get(c)),
        })
        .filter(|c| !c.off_cpu_ns.is_zero())
        .collect();
    causes.sort_by_key(|c| (Some(c.cause) != opts.cause, std::cmp::Reverse(c.off_cpu_ns.abs_delta())));

    let (before, after) = (SideJson::of(before), SideJson::of(after));
    let mut differences = Vec::new();
    if before.command != after.command {
        differences.push(Difference::Command);
    }
    if before.jdks() != after.jdks() {
        differences.push(Difference::Jdk);
    }
    Comparison {
        schema: SCHEMA,
        differences,
        sorted_by: opts.cause.map_or("wall", Cause::name),
        threads: ThreadsChange {
            wall_ns: Change::new(tb.wall, ta.wall),
            cpu_ns: Change::new(tb.cpu, ta.cpu),
            off_cpu_ns: Change::new(tb.off.total(), ta.off.total()),
            not_covered_ns: Change::new(tb.not_covered, ta.not_covered),
        },
        causes,
        methods,
        before,
        after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{ThreadJson, TraceJson};

    const MS: u64 = 1_000_000;

    /// A method of a report: `calls` calls of `cpu` ns CPU each and the
    /// given off-CPU ns per call by cause (wall = CPU + off-CPU).
    fn method(name: &str, calls: u64, cpu: u64, off: &[(Cause, u64)]) -> MethodJson {
        let mut off_cpu_ns = OffCpu::default();
        for &(c, ns) in off {
            off_cpu_ns.add(c, ns * calls);
        }
        let wall = (cpu * calls) + off_cpu_ns.total();
        MethodJson {
            class: "com.acme.Work".into(),
            name: name.into(),
            signature: "()V".into(),
            calls,
            wall_ns: wall,
            cpu_ns: cpu * calls,
            off_cpu_ns,
            not_covered_ns: 0,
            voluntary_switches: 0,
            involuntary_switches: 0,
            wall_min_ns: wall / calls,
            wall_max_ns: wall / calls,
            wall_mean_ns: wall / calls,
            wall_stddev_ns: 0,
            wall_p50_ns: wall / calls,
            wall_p90_ns: wall / calls,
            wall_p99_ns: wall / calls,
            calls_compiled: None,
            wall_compiled_ns: None,
            first_compiled_ns: None,
        }
    }

    /// A thread whose totals are its methods' plus `own` CPU ns.
    fn thread(tid: u32, methods: &[MethodJson], own: u64) -> ThreadJson {
        let mut off = OffCpu::default();
        for m in methods {
            off += m.off_cpu_ns;
        }
        let cpu = own + methods.iter().map(|m| m.cpu_ns).sum::<u64>();
        ThreadJson {
            tid,
            name: "main".into(),
            java: true,
            pid: 100,
            wall_ns: cpu + off.total(),
            cpu_ns: cpu,
            off_cpu_ns: off,
            not_covered_ns: 0,
            voluntary_switches: 0,
            involuntary_switches: 0,
            anomalies: 0,
            is_virtual: false,
            java_id: None,
            carrier: None,
            ns_tid: None,
            unmatched: false,
            cgroup: None,
            container_id: None,
            tracer: false,
            idle_off_cpu_ns: OffCpu::default(),
            idle_rule: None,
            waiting_for_work: false,
            methods: methods.to_vec(),
        }
    }

    fn report(command: &str, jdk: &str, methods: Vec<MethodJson>) -> Report {
        Report {
            schema: crate::report::SCHEMA,
            trace: TraceJson {
                path: format!("/t/{command}"),
                start_realtime_ns: 0,
                duration_ns: 5_000 * MS,
                pid: 100,
                command: command.into(),
                jvms: vec![JvmJson {
                    pid: 100,
                    vm_version: jdk.into(),
                }],
                lost_events: LostJson { kernel: 0, jvm: 0 },
                complete: true,
                kernel_covered_ns: None,
                window: None,
                problems: Vec::new(),
            },
            processes: Vec::new(),
            threads: vec![thread(1, &methods, 3 * MS)],
            methods,
            allocations: Vec::new(),
            demoted: Vec::new(),
            short_calls_dropped: Vec::new(),
            trivial_skipped: None,
            stacks: None,
            stack_only_methods: Vec::new(),
            stack_methods: Vec::new(),
            wakers: Vec::new(),
            summary: Default::default(),
        }
    }

    /// BEFORE: nap 10 × (1 ms CPU + 20 ms sleep), steady 10 × (2 ms CPU +
    /// 5 ms park), gone 3 × 1 ms CPU. AFTER: nap sleeps 40 ms, steady
    /// the same, gone is gone, fresh 2 × (1 ms CPU + 1 ms file) is new.
    fn before_after() -> (Report, Report) {
        let before = report(
            "java Work 20",
            "17.0.15+6",
            vec![
                method("nap", 10, MS, &[(Cause::Sleep, 20 * MS)]),
                method("steady", 10, 2 * MS, &[(Cause::Park, 5 * MS)]),
                method("gone", 3, MS, &[]),
            ],
        );
        let after = report(
            "java Work 40",
            "25.0.1+8",
            vec![
                method("nap", 10, MS, &[(Cause::Sleep, 40 * MS)]),
                method("steady", 10, 2 * MS, &[(Cause::Park, 5 * MS)]),
                method("fresh", 2, MS, &[(Cause::File, MS)]),
            ],
        );
        (before, after)
    }

    fn find<'a>(c: &'a Comparison, name: &str) -> &'a MethodChange {
        c.methods.iter().find(|m| m.name == name).unwrap()
    }

    #[test]
    fn a_trace_against_itself_changes_nothing() {
        let (before, _) = before_after();
        let c = compare(&before, &before, &CompareOptions::default());
        assert!(c.differences.is_empty());
        assert_eq!(c.methods.len(), 3);
        for m in &c.methods {
            assert_eq!(m.status, Status::Both);
            let mut all = vec![m.calls, m.wall_ns, m.cpu_ns, m.not_covered_ns];
            all.extend(m.off_cpu_ns.0.iter().map(|(_, ch)| *ch));
            assert!(all.iter().all(|ch| ch.delta == 0 && ch.before == ch.after), "{m:?}");
            let mut means = vec![m.mean_wall_ns, m.mean_cpu_ns];
            means.extend(m.mean_off_cpu_ns.0.iter().map(|(_, ch)| *ch));
            assert!(means.iter().all(|ch| ch.delta == Some(0)), "{m:?}");
        }
        assert!(c.causes.iter().all(|c| c.off_cpu_ns.delta == 0));
        assert_eq!(c.threads.wall_ns.delta, 0);
    }

    #[test]
    fn the_changed_method_comes_first_with_its_cause() {
        let (before, after) = before_after();
        let c = compare(&before, &after, &CompareOptions::default());
        assert_eq!(c.differences, vec![Difference::Command, Difference::Jdk]);
        assert_eq!(c.sorted_by, "wall");
        let names: Vec<&str> = c.methods.iter().map(|m| m.name.as_str()).collect();
        // |Δ wall|: nap 200 ms, gone 3 ms, fresh 4 ms, steady 0.
        assert_eq!(names, ["nap", "fresh", "gone", "steady"]);

        let nap = find(&c, "nap");
        assert_eq!(nap.status, Status::Both);
        assert_eq!(nap.calls, Change::new(10, 10));
        assert_eq!(nap.wall_ns, Change::new(210 * MS, 410 * MS));
        assert_eq!(nap.wall_ns.delta, 200 * MS as i64);
        assert_eq!(nap.cpu_ns.delta, 0);
        assert_eq!(nap.off_cpu_ns.get(Cause::Sleep), Some(&Change::new(200 * MS, 400 * MS)));
        assert_eq!(nap.off_cpu_ns.get(Cause::Park), None);
        assert_eq!(nap.mean_wall_ns.delta, Some(20 * MS as i64));
        assert_eq!(
            nap.mean_off_cpu_ns.get(Cause::Sleep),
            Some(&MeanChange {
                before: Some(20 * MS),
                after: Some(40 * MS),
                delta: Some(20 * MS as i64)
            })
        );
        assert_eq!(nap.off_cpu_total(), Change::new(200 * MS, 400 * MS));

        let steady = find(&c, "steady");
        assert_eq!(steady.wall_ns.delta, 0);
        assert_eq!(steady.off_cpu_ns.get(Cause::Park).unwrap().delta, 0);

        let gone = find(&c, "gone");
        assert_eq!(gone.status, Status::Removed);
        assert_eq!(gone.calls, Change::new(3, 0));
        assert_eq!(gone.wall_ns.delta, -3 * MS as i64);
        assert_eq!(
            gone.mean_wall_ns,
            MeanChange {
                before: Some(MS),
                after: None,
                delta: None
            }
        );

        let fresh = find(&c, "fresh");
        assert_eq!(fresh.status, Status::Added);
        assert_eq!(fresh.mean_cpu_ns.before, None);
        assert_eq!(fresh.off_cpu_ns.get(Cause::File), Some(&Change::new(0, 2 * MS)));

        // The threads' totals per cause, largest change first.
        let causes: Vec<(&str, i64)> = (c.causes.iter())
            .map(|x| (x.cause.name(), x.off_cpu_ns.delta))
            .collect();
        assert_eq!(
            causes,
            [("sleep", 200 * MS as i64), ("file", 2 * MS as i64), ("park", 0)]
        );
        assert_eq!(c.threads.cpu_ns, Change::new(36 * MS, 35 * MS));
        assert_eq!(c.threads.off_cpu_ns.delta, 202 * MS as i64);
    }

    #[test]
    fn a_cause_selects_and_sorts() {
        let (before, after) = before_after();
        let c = compare(
            &before,
            &after,
            &CompareOptions {
                cause: Some(Cause::Park),
            },
        );
        assert_eq!(c.sorted_by, "park");
        let names: Vec<&str> = c.methods.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["steady"]);
        assert_eq!(c.causes[0].cause, Cause::Park);
        // A cause a method lost entirely still selects it (on BEFORE's side).
        let c = compare(
            &after,
            &before,
            &CompareOptions {
                cause: Some(Cause::File),
            },
        );
        assert_eq!(find(&c, "fresh").status, Status::Removed);
        assert_eq!(c.methods.len(), 1);
    }

    #[test]
    fn entries_of_one_method_are_summed() {
        let (before, _) = before_after();
        let mut twice = before.clone();
        twice.methods.push(method("nap", 10, MS, &[(Cause::Sleep, 20 * MS)]));
        let c = compare(&before, &twice, &CompareOptions::default());
        let nap = find(&c, "nap");
        assert_eq!(nap.calls, Change::new(10, 20));
        assert_eq!(nap.mean_wall_ns.delta, Some(0));
    }

    #[test]
    fn json_has_the_documented_fields() {
        let (before, after) = before_after();
        let v = serde_json::to_value(compare(&before, &after, &CompareOptions::default())).unwrap();
        assert_eq!(v["schema"], "jtrace.compare.v1");
        assert_eq!(v["differences"], serde_json::json!(["command", "jdk"]));
        assert_eq!(v["before"]["jvms"][0]["vm_version"], "17.0.15+6");
        let nap = &v["methods"][0];
        assert_eq!(nap["status"], "both");
        assert_eq!(nap["off_cpu_ns"]["sleep"]["delta"], 200 * MS);
        assert_eq!(nap["mean_wall_ns"]["after"], 41 * MS);
        assert!(nap.get("not_covered_ns").is_none());
        let gone = &v["methods"][2];
        assert_eq!(gone["status"], "removed");
        assert!(gone["mean_wall_ns"]["after"].is_null());
        assert_eq!(
            v["causes"][0],
            serde_json::json!({"cause": "sleep", "off_cpu_ns": {"before": 200 * MS, "after": 400 * MS, "delta": 200 * MS}})
        );
    }
}
