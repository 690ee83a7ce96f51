//! The Parquet export (`jtrace export --format parquet -o DIR`): one file
//! per table, for DuckDB, Spark, DataFusion, pandas. The schema is
//! documented in docs/EXPORTS.md (keep both in step: a column's meaning
//! never changes; new columns are added at the end).
//!
//! It streams: one walk ([`stream::analyze_answering_wakers`]) writes every
//! table at once, each in row groups of [`table::ROW_GROUP`] rows, so memory
//! is the budget plus one row group per table. The waker's method of each
//! wakeup is known only after the walk: the `wakeups` rows are logged and
//! written after it, and the `off_cpu_intervals` row groups wait for their
//! `waker_method_id` column (`wakes.rs`, `waiting.rs`), both in temporary
//! files. Files are written under temporary names and renamed into place
//! when all are complete: a failed export leaves no half-written table.

mod column;
mod table;
mod waiting;
mod wakes;

use crate::evidence::{evidence_key, EvidenceKey};
use crate::windows::{pair_windows, window_name, WindowMarks};
use anyhow::Context;
use column::Kind;
use jtrace_merge::stream::{self, unlinked_temp_file, StreamOptions};
use jtrace_merge::{
    describe_evidence, describe_syscall, Breakdown, Cause, Event, Evidence, FrameKind, Invocation, MethodIdx,
    OffCpuInterval, Symbolizer, SyscallInfo, ThreadInfo, ThreadTotals, Timed, Trace, Visitor, Wake,
};
use parquet::data_type::ByteArray;
use rustc_hash::FxHashMap;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use table::Table;
use wakes::WakeLog;

/// The tables, in the order they are created.
pub const TABLES: &[&str] = &[
    "threads",
    "methods",
    "invocations",
    "off_cpu_intervals",
    "wakeups",
    "windows",
    "stacks",
];

fn cols(fixed: &[(&str, Kind)]) -> Vec<(String, Kind)> {
    fixed.iter().map(|(n, k)| (n.to_string(), *k)).collect()
}

/// `wall_ns`, `cpu_ns`, `off_cpu_ns`, one `<cause>_ns` per cause,
/// `not_covered_ns`, `voluntary_switches`, `involuntary_switches`.
fn breakdown_cols() -> Vec<(String, Kind)> {
    let mut v = cols(&[("wall_ns", Kind::I64), ("cpu_ns", Kind::I64), ("off_cpu_ns", Kind::I64)]);
    v.extend(Cause::ALL.iter().map(|c| (format!("{}_ns", c.name()), Kind::I64)));
    v.extend(cols(&[
        ("not_covered_ns", Kind::I64),
        ("voluntary_switches", Kind::I64),
        ("involuntary_switches", Kind::I64),
    ]));
    v
}

fn put_breakdown(t: &mut Table, b: &Breakdown) {
    t.u64(b.wall).u64(b.cpu).u64(b.off.total());
    for c in Cause::ALL {
        t.u64(b.off.get(c));
    }
    t.u64(b.not_covered).u64(b.voluntary).u64(b.involuntary);
}

/// Each table's columns, in order (docs/EXPORTS.md).
fn table_columns(name: &str) -> Vec<(String, Kind)> {
    use Kind::*;
    match name {
        "threads" => {
            let mut v = cols(&[
                ("tid", I64),
                ("pid", I64),
                ("name", Str),
                ("java", Bool),
                ("comm", Str),
                ("thread_group", OptStr),
                ("daemon", Bool),
                ("virtual", Bool),
                ("carrier_tid", OptI64),
                ("first_ns", I64),
                ("last_ns", I64),
            ]);
            v.extend(breakdown_cols());
            v.extend(cols(&[("anomalies", I64)]));
            v
        }
        "methods" => cols(&[
            ("method_id", I64),
            ("class", Str),
            ("name", Str),
            ("signature", Str),
            ("native", Bool),
        ]),
        "invocations" => {
            let mut v = cols(&[
                ("tid", I64),
                ("method_id", I64),
                ("entry_ns", I64),
                ("exit_ns", I64),
                ("depth", I64),
                ("outermost", Bool),
                ("exception", Bool),
                ("unfinished", Bool),
                ("compiled", OptBool),
            ]);
            v.extend(breakdown_cols());
            v
        }
        "off_cpu_intervals" => {
            let mut v = cols(&[
                ("tid", I64),
                ("start_ns", I64),
                ("end_ns", I64),
                ("method_id", OptI64),
                ("depth", I64),
                ("preempted", Bool),
                ("prev_state", I64),
                ("cause", Str),
                ("evidence", OptStr),
                ("waker_tid", OptI64),
                ("waker_pid", OptI64),
                ("waker_method_id", OptI64),
                ("wake_ns", OptI64),
            ]);
            v.extend(Cause::ALL.iter().map(|c| (format!("{}_ns", c.name()), I64)));
            v.extend(cols(&[("stack_id", OptI64)]));
            v
        }
        "wakeups" => cols(&[
            ("ts_ns", I64),
            ("tid", I64),
            ("waker_tid", I64),
            ("waker_pid", I64),
            ("waker_method_id", OptI64),
        ]),
        "windows" => cols(&[
            ("pid", I64),
            ("kind", Str),
            ("seq", I64),
            ("start_ns", I64),
            ("end_ns", I64),
            ("open", Bool),
        ]),
        "stacks" => cols(&[("stack_id", I64), ("frame", I64), ("name", Str), ("kind", Str)]),
        _ => unreachable!("a table of TABLES"),
    }
}

/// Every table's writer, driven by the walk.
struct Writer<'a> {
    trace: &'a Trace,
    tables: Vec<Table>,
    error: Option<anyhow::Error>,
    /// The thread's open methods.
    stack: Vec<MethodIdx>,
    syscalls: VecDeque<(u32, SyscallInfo)>,
    /// The `cause` column's values: "none", then each cause's name.
    cause_names: Vec<ByteArray>,
    /// Evidence strings made so far.
    evidence: EvidenceStrings,
    /// The wakeups, for the `wakeups` table after the walk.
    wakes: WakeLog,
    /// The thread's latest wakeup: (its time, its index in `wakes`).
    last_wake: Option<(u64, u64)>,
    windows: WindowMarks,
    window_last: HashMap<u32, u64>,
}

const THREADS: usize = 0;
const METHODS: usize = 1;
const INVOCATIONS: usize = 2;
const OFF_CPU: usize = 3;
const WAKEUPS: usize = 4;
const WINDOWS: usize = 5;
const STACKS: usize = 6;

/// The `waker_method_id` column of `off_cpu_intervals`.
const OFF_CPU_WAKER_METHOD: usize = 11;

/// Tables `a` and `b` (`a` ≠ `b`), both mutable.
fn pair_mut(tables: &mut [Table], a: usize, b: usize) -> (&mut Table, &mut Table) {
    assert!(a != b);
    if a < b {
        let (l, r) = tables.split_at_mut(b);
        (&mut l[a], &mut r[0])
    } else {
        let (l, r) = tables.split_at_mut(a);
        (&mut r[0], &mut l[b])
    }
}

/// The `kind` column of the stacks table.
fn frame_kind(k: FrameKind) -> &'static str {
    match k {
        FrameKind::Kernel => "kernel",
        FrameKind::Native => "native",
        FrameKind::Jit => "jit",
        FrameKind::Inlined => "inlined",
        FrameKind::Interpreted => "interpreted",
        FrameKind::C1 => "c1",
        FrameKind::Stub => "stub",
        FrameKind::Unresolved => "unresolved",
    }
}

impl Writer<'_> {
    fn row(&mut self, table: usize, fill: impl FnOnce(&mut Table)) {
        if self.error.is_some() {
            return;
        }
        let t = &mut self.tables[table];
        fill(t);
        if let Err(e) = t.end_row() {
            self.error = Some(e);
        }
    }
}

impl Visitor for Writer<'_> {
    fn thread_begin(&mut self, _t: &ThreadInfo) {
        self.stack.clear();
        self.syscalls.clear();
        self.last_wake = None;
    }
    fn event(&mut self, t: &ThreadInfo, e: &Timed) {
        if let Event::Window { cause, begin } = e.event {
            let pid = crate::process::pid_of(self.trace, t);
            self.windows
                .entry(pid)
                .or_default()
                .insert((e.ts, begin, cause as usize, begin));
            let l = self.window_last.entry(pid).or_default();
            *l = (*l).max(t.last_ts);
        }
    }
    fn enter(&mut self, _t: &ThreadInfo, _ts: u64, depth: usize, m: MethodIdx) {
        self.stack.truncate(depth);
        self.stack.push(m);
    }
    fn exit(&mut self, t: &ThreadInfo, depth: usize, inv: &Invocation) {
        self.stack.truncate(depth);
        let trace = self.trace;
        let native = trace.methods.get(inv.method as usize).is_some_and(|m| m.native);
        let compiled = if native {
            None
        } else {
            trace
                .jit
                .compiled_at(crate::process::pid_of(trace, t), inv.method, inv.entry)
        };
        self.row(INVOCATIONS, |r| {
            r.u64(t.tid as u64)
                .u64(inv.method as u64)
                .u64(inv.entry)
                .u64(inv.exit)
                .u64(depth as u64)
                .bool(inv.outermost)
                .bool(inv.exception)
                .bool(inv.unfinished)
                .opt_bool(compiled);
            put_breakdown(r, &inv.breakdown);
        });
    }
    fn syscall(&mut self, _t: &ThreadInfo, idx: u32, sc: &SyscallInfo) {
        if self.syscalls.len() >= 8 {
            self.syscalls.pop_front();
        }
        self.syscalls.push_back((idx, *sc));
    }
    fn wakeup(&mut self, t: &ThreadInfo, _depth: usize, w: &Wake) {
        match self.wakes.push(t.tid, w) {
            Ok(k) => self.last_wake = Some((w.ts, k)),
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
    }
    fn off_cpu(&mut self, t: &ThreadInfo, depth: usize, o: &OffCpuInterval) {
        let trace = self.trace;
        // The main cause (the last of the largest, as max_by_key).
        let mut main = None;
        let mut most = 0;
        for c in Cause::ALL {
            let ns = o.split.off.get(c);
            if ns > 0 && ns >= most {
                (main, most) = (Some(c), ns);
            }
        }
        let cause = self.cause_names[main.map_or(0, |c| c as usize + 1)].clone();
        let evidence = match o.evidence {
            Evidence::None | Evidence::Preempted => None,
            Evidence::Syscall(i) => {
                let sc = self.syscalls.iter().rev().find(|(idx, _)| *idx == i).map(|(_, sc)| sc);
                Some(self.evidence.get(&o.evidence, sc, || match sc {
                    Some(sc) => format!("in {}", describe_syscall(trace, sc)),
                    None => describe_evidence(trace, &o.evidence),
                }))
            }
            e => Some(self.evidence.get(&e, None, || describe_evidence(trace, &e))),
        };
        let method = depth.checked_sub(1).and_then(|d| self.stack.get(d)).copied();
        // The waker's method of the latest wakeup, if it ended this
        // interval: known after the walk, a reference to it until then.
        let waker_method = match (o.wake, self.last_wake) {
            (Some(w), Some((ts, k))) if ts == w.ts => Some(k),
            _ => None,
        };
        self.row(OFF_CPU, |r| {
            r.u64(t.tid as u64)
                .u64(o.start)
                .u64(o.end)
                .opt_u64(method.map(u64::from))
                .u64(depth as u64)
                .bool(o.preempted)
                .u64(o.prev_state as u64)
                .bytes(cause);
            match evidence {
                Some(e) => r.bytes(e),
                None => r.null(),
            };
            r.opt_u64(o.wake.map(|w| w.waker_tid as u64))
                .opt_u64(o.wake.map(|w| w.waker_tgid as u64))
                .opt_u64(waker_method)
                .opt_u64(o.wake.map(|w| w.ts));
            for c in Cause::ALL {
                r.u64(o.split.off.get(c));
            }
            r.opt_u64(o.stack.map(u64::from));
        });
    }
    fn thread_end(&mut self, t: &ThreadInfo, totals: &ThreadTotals) {
        self.row(THREADS, |r| {
            r.u64(t.tid as u64)
                .u64(t.tgid as u64)
                .str(t.display_name())
                .bool(t.java_name.is_some())
                .str(&t.comm)
                .opt_str(t.java_name.as_ref().map(|_| t.group.as_str()))
                .bool(t.daemon)
                .bool(t.virtual_id.is_some())
                .opt_u64(t.carrier.map(u64::from))
                .u64(t.first_ts)
                .u64(t.last_ts);
            put_breakdown(r, &totals.breakdown);
            r.u64(totals.anomalies);
        });
    }
}

/// Evidence strings made so far, by what determines them (at most
/// [`MAX_EVIDENCE`]; past it the table starts again).
#[derive(Default)]
struct EvidenceStrings(FxHashMap<EvidenceKey, ByteArray>);

const MAX_EVIDENCE: usize = 1 << 16;

impl EvidenceStrings {
    /// The string of evidence `e` (with its syscall record, if kept), made
    /// by `make` the first time.
    fn get(&mut self, e: &Evidence, sc: Option<&SyscallInfo>, make: impl FnOnce() -> String) -> ByteArray {
        let key = evidence_key(e, sc);
        if let Some(b) = self.0.get(&key) {
            return b.clone();
        }
        if self.0.len() >= MAX_EVIDENCE {
            self.0.clear();
        }
        let b = ByteArray::from(make().into_bytes());
        self.0.insert(key, b.clone());
        b
    }
}

/// Makes `dir` (if missing) for the tables; refuses a symbolic link or a
/// file there.
fn out_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => {
            anyhow::bail!("{} is a symbolic link; give the directory itself", dir.display())
        }
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => anyhow::bail!("{} exists and is not a directory", dir.display()),
        Err(_) => std::fs::create_dir(dir).with_context(|| format!("cannot create directory {}", dir.display())),
    }
}

/// Writes the trace directory `trace_dir` as Parquet tables in `dir`
/// (`threads.parquet`, `methods.parquet`, …; [`TABLES`]), streamed within
/// `opts`' memory budget. Returns the paths written.
pub fn write_parquet(trace_dir: &Path, dir: &Path, opts: &StreamOptions) -> anyhow::Result<Vec<PathBuf>> {
    let opts = StreamOptions {
        waker_methods: true,
        ..opts.clone()
    };
    let (trace, events) = crate::open_streamed(trace_dir, &opts)?;
    out_dir(dir)?;
    let names: Vec<(PathBuf, PathBuf)> = TABLES
        .iter()
        .map(|name| {
            let temp = dir.join(format!(".{name}.parquet.{}.tmp", std::process::id()));
            (temp, dir.join(format!("{name}.parquet")))
        })
        .collect();
    let result = (|| {
        let mut tables = Vec::new();
        for (name, (temp, _)) in TABLES.iter().zip(&names) {
            let temp = temp.clone();
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temp)
                .with_context(|| format!("cannot create {}", temp.display()))?;
            tables.push(Table::new(name, table_columns(name), file, temp)?);
        }
        // The off-CPU rows' waker method and the wakeups wait in temporary
        // files, where the sort spills its runs.
        let temp_dir = opts.temp_dir.clone().unwrap_or_else(std::env::temp_dir);
        let temp = |what: &str| {
            unlinked_temp_file(&temp_dir, what).with_context(|| {
                format!(
                    "cannot create a temporary file in {} for the Parquet export (set TMPDIR or --temp-dir)",
                    temp_dir.display()
                )
            })
        };
        tables[OFF_CPU].wait_for(OFF_CPU_WAKER_METHOD, temp("parquet-waiting")?);
        let mut w = Writer {
            trace: &trace,
            tables,
            error: None,
            stack: Vec::new(),
            syscalls: VecDeque::new(),
            cause_names: std::iter::once("none")
                .chain(Cause::ALL.iter().map(|c| c.name()))
                .map(|n| ByteArray::from(n.as_bytes().to_vec()))
                .collect(),
            evidence: EvidenceStrings::default(),
            wakes: WakeLog::new(temp("parquet-wakes")?),
            last_wake: None,
            windows: WindowMarks::new(),
            window_last: HashMap::new(),
        };
        for (i, m) in trace.methods.iter().enumerate() {
            w.row(METHODS, |r| {
                r.u64(i as u64)
                    .str(&m.class)
                    .str(&m.name)
                    .str(&m.signature)
                    .bool(m.native);
            });
        }
        let answers = stream::analyze_answering_wakers(&trace, events, &mut w);
        let mut tables = std::mem::take(&mut w.tables);
        let answers = answers?;
        if let Some(e) = w.error.take() {
            return Err(e);
        }
        let (wakeups, off_cpu) = pair_mut(&mut tables, WAKEUPS, OFF_CPU);
        wakes::write_after_walk(&trace, answers, w.wakes, wakeups, off_cpu)?;
        for win in pair_windows(std::mem::take(&mut w.windows), &w.window_last) {
            let t = &mut tables[WINDOWS];
            t.u64(win.pid as u64)
                .str(window_name(win.cause))
                .u64(win.seq as u64)
                .u64(win.start)
                .u64(win.end)
                .bool(win.open);
            t.end_row()?;
        }
        // Every recorded stack (switch-outs' and CPU samples'), its frames
        // named as the collapsed export names them, innermost first.
        let symbols = Symbolizer::new(&trace);
        for id in 0..trace.stacks.pairs.len() as u32 {
            for (i, f) in symbols.frames(id).iter().enumerate() {
                let t = &mut tables[STACKS];
                t.u64(id as u64)
                    .u64(i as u64)
                    .str(&f.flame_name())
                    .str(frame_kind(f.kind));
                t.end_row()?;
            }
        }
        for t in tables {
            t.finish()?;
        }
        // Every table is complete: only now do they take their names.
        for (temp, path) in &names {
            std::fs::rename(temp, path).with_context(|| format!("cannot write {}", path.display()))?;
        }
        Ok(names.iter().map(|(_, p)| p.clone()).collect())
    })();
    if result.is_err() {
        for (temp, _) in &names {
            let _ = std::fs::remove_file(temp);
        }
    }
    result
}
