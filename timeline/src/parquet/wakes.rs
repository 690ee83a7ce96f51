//! What the Parquet export writes after its walk, once the waker's method
//! of every wakeup is known ([`jtrace_merge::stream::analyze_answering_wakers`]):
//! the `wakeups` table, from the wakeups the walk logged in its order, and
//! the `waker_method_id` of the `off_cpu_intervals` rows, whose row groups
//! wait for it (`waiting.rs`) with a reference to the wakeup that ended
//! each interval.

use super::column::NULL;
use super::table::Table;
use anyhow::Context;
use jtrace_merge::stream::{ThreadAnswers, WakerAnswers};
use jtrace_merge::{Trace, Wake};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};

/// Bytes of a logged wakeup: wakee, time, waker, waker's process.
const RECORD: usize = 20;

/// The wakeups of the walk, in its order, in a temporary file.
pub(super) struct WakeLog {
    out: BufWriter<File>,
    /// Wakeups logged: the next one's index.
    count: u64,
}

impl WakeLog {
    /// An empty log in `file` (an unlinked temporary file).
    pub(super) fn new(file: File) -> WakeLog {
        WakeLog {
            out: BufWriter::with_capacity(1 << 16, file),
            count: 0,
        }
    }

    /// Logs thread `wakee`'s wakeup `w`; returns its index (the reference
    /// an `off_cpu_intervals` row keeps).
    pub(super) fn push(&mut self, wakee: u32, w: &Wake) -> anyhow::Result<u64> {
        let mut r = [0u8; RECORD];
        r[..4].copy_from_slice(&wakee.to_le_bytes());
        r[4..12].copy_from_slice(&w.ts.to_le_bytes());
        r[12..16].copy_from_slice(&w.waker_tid.to_le_bytes());
        r[16..].copy_from_slice(&w.waker_tgid.to_le_bytes());
        self.out
            .write_all(&r)
            .map_err(|e| anyhow::anyhow!("cannot log a wakeup in a temporary file: {e}"))?;
        self.count += 1;
        Ok(self.count - 1)
    }
}

/// Writes the `wakeups` table from `log` and fills the waiting
/// `waker_method_id` of `off_cpu`'s row groups, both from `answers`.
pub(super) fn write_after_walk(
    trace: &Trace,
    mut answers: WakerAnswers,
    log: WakeLog,
    wakeups: &mut Table,
    off_cpu: &mut Table,
) -> anyhow::Result<()> {
    let (count, file) = (log.count, log.out.into_inner().map_err(|e| e.into_error())?);
    let mut file = BufReader::with_capacity(1 << 16, file);
    file.seek(SeekFrom::Start(0))?;
    let mut fill = Fill::new(off_cpu)?;
    let mut thread: Option<(u32, ThreadAnswers)> = None;
    for k in 0..count {
        let mut r = [0u8; RECORD];
        file.read_exact(&mut r).context("cannot read the logged wakeups back")?;
        let word = |at: usize| u32::from_le_bytes(r[at..at + 4].try_into().unwrap());
        let (wakee, ts, waker, waker_pid) = (
            word(0),
            u64::from_le_bytes(r[4..12].try_into().unwrap()),
            word(12),
            word(16),
        );
        if thread.as_ref().map(|t| t.0) != Some(wakee) {
            // The walk's order: each thread's wakeups together, in time order.
            let info = trace.threads.get(&wakee).context("a wakeup of an unknown thread")?;
            thread = Some((wakee, answers.thread(info)?));
        }
        let m = thread.as_mut().expect("set above").1.method(ts, waker)?;
        wakeups
            .u64(ts)
            .u64(wakee as u64)
            .u64(waker as u64)
            .u64(waker_pid as u64)
            .opt_u64(m.map(u64::from));
        wakeups.end_row()?;
        fill.answer(k, m.map_or(NULL, i64::from))?;
    }
    fill.finish()
}

/// Fills the waiting column of a table's row groups, in order, from the
/// answers to its references.
struct Fill<'t> {
    table: &'t mut Table,
    /// The loaded group's references (none left: empty).
    refs: Vec<i64>,
    /// Its values so far.
    values: Vec<i64>,
}

impl<'t> Fill<'t> {
    fn new(table: &'t mut Table) -> anyhow::Result<Fill<'t>> {
        let refs = table.next_waiting()?.unwrap_or_default();
        Ok(Fill {
            table,
            refs,
            values: Vec::new(),
        })
    }

    /// Gives reference `k` its value `v` (references come in order): fills
    /// the rows up to the first reference past `k`, writing each group done.
    fn answer(&mut self, k: u64, v: i64) -> anyhow::Result<()> {
        loop {
            while let Some(&r) = self.refs.get(self.values.len()) {
                match r {
                    NULL => self.values.push(NULL),
                    r if r as u64 == k => self.values.push(v),
                    r if (r as u64) < k => anyhow::bail!("a row's reference {r} was passed"),
                    _ => return Ok(()),
                }
            }
            if self.refs.is_empty() {
                return Ok(());
            }
            self.next_group()?;
        }
    }

    fn next_group(&mut self) -> anyhow::Result<()> {
        self.table.fill_waiting(&self.values)?;
        self.values.clear();
        self.refs = self.table.next_waiting()?.unwrap_or_default();
        Ok(())
    }

    /// After the last answer: the rest can only be null.
    fn finish(mut self) -> anyhow::Result<()> {
        while !self.refs.is_empty() {
            if let Some(&r) = self.refs[self.values.len()..].iter().find(|&&r| r != NULL) {
                anyhow::bail!("a row refers to wakeup {r}, past the last one");
            }
            self.values.resize(self.refs.len(), NULL);
            self.next_group()?;
        }
        Ok(())
    }
}
