//! The timeline index `jtrace why` walks back through: per thread, its
//! off-CPU intervals ([`OffRec`]: when it left the CPU, when it was woken
//! and by whom, when it ran again, the cause of the blocked part) and its
//! contended monitor enters ([`Region`]: from the first switch-out to the
//! wakeup by the thread that released the monitor). Between two intervals
//! the thread was on CPU.
//!
//! Records are fixed-size and appended thread by thread in tid order, so a
//! thread's records are one sorted range searched by bisection. They stay
//! in memory up to a limit (a quarter of the memory budget), then go on to
//! an unlinked temporary file, mapped for the lookups: memory stays bounded
//! whatever the trace's length.

use crate::cause::Cause;
use crate::file_io::unlinked_temp_file;
use crate::model::tid_map::TidMap;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

/// The interval was an involuntary switch (all of it is runqueue).
pub(crate) const PREEMPTED: u8 = 1;
/// A wakeup ended the blocked part at `wake`.
pub(crate) const WOKEN: u8 = 2;
/// Inside a contended monitor enter (HotSpot's timed back-off: its own
/// waker is a timer unless it is the last; [`Region`] names the owner).
pub(crate) const MONITOR: u8 = 4;
/// No switch-in ended it: the thread's last event came first.
pub(crate) const OPEN: u8 = 8;
/// The blocked part has more than one cause: see [`Index::causes`].
pub(crate) const MULTI: u8 = 16;
/// A virtual thread woken while unmounted: after `wake` it waited for a
/// carrier (`carrier`), not for a CPU; `holder` is the virtual thread the
/// carrier that mounted it ran before.
pub(crate) const CARRIER: u8 = 32;

/// The causes of a blocked part of several, in layout order, with their ns.
pub(crate) type Causes = Vec<(Cause, u64)>;

/// One off-CPU interval of a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OffRec {
    /// Switch-out.
    pub start: u64,
    /// Switch-in (or the thread's last event, [`OPEN`]).
    pub end: u64,
    /// End of the blocked part: the wakeup, after which the thread waited
    /// for a CPU (`runqueue`) until `end`; `start` when preempted, `end`
    /// when nothing woke it.
    pub wake: u64,
    /// The waking thread ([`WOKEN`]); 0 is the idle task (an interrupt).
    pub waker: u32,
    /// Who had the CPU: the thread that preempted it, or that ran on the
    /// CPU just before it came back (0 idle, u32::MAX unknown).
    pub holder: u32,
    /// The cause of the blocked part ([`Cause::Runqueue`] when preempted).
    pub cause: Cause,
    /// [`PREEMPTED`], [`WOKEN`], [`MONITOR`], [`OPEN`], [`MULTI`].
    pub flags: u8,
}

const OFF_LEN: usize = 40;

impl OffRec {
    fn to_bytes(self) -> [u8; OFF_LEN] {
        let mut b = [0u8; OFF_LEN];
        b[0..8].copy_from_slice(&self.start.to_le_bytes());
        b[8..16].copy_from_slice(&self.end.to_le_bytes());
        b[16..24].copy_from_slice(&self.wake.to_le_bytes());
        b[24..28].copy_from_slice(&self.waker.to_le_bytes());
        b[28..32].copy_from_slice(&self.holder.to_le_bytes());
        b[32] = self.cause as u8;
        b[33] = self.flags;
        b
    }
    fn from_bytes(b: &[u8]) -> OffRec {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        OffRec {
            start: u64_at(0),
            end: u64_at(8),
            wake: u64_at(16),
            waker: u32_at(24),
            holder: u32_at(28),
            cause: Cause::ALL.get(b[32] as usize).copied().unwrap_or(Cause::Unknown),
            flags: b[33],
        }
    }
}

/// A contended monitor enter of a thread that a release ended: blocked
/// from `start` (its first switch-out) to `wake`, by `owner`, the thread
/// whose wakeup ended its last back-off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Region {
    /// First switch-out inside the enter.
    pub start: u64,
    /// The owner's wakeup.
    pub wake: u64,
    /// The thread that released the monitor.
    pub owner: u32,
}

const REGION_LEN: usize = 24;

impl Region {
    fn to_bytes(self) -> [u8; REGION_LEN] {
        let mut b = [0u8; REGION_LEN];
        b[0..8].copy_from_slice(&self.start.to_le_bytes());
        b[8..16].copy_from_slice(&self.wake.to_le_bytes());
        b[16..20].copy_from_slice(&self.owner.to_le_bytes());
        b
    }
    fn from_bytes(b: &[u8]) -> Region {
        Region {
            start: u64::from_le_bytes(b[0..8].try_into().expect("8 bytes")),
            wake: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
            owner: u32::from_le_bytes(b[16..20].try_into().expect("4 bytes")),
        }
    }
}

/// Fixed-size records appended in memory, moved to an unlinked temporary
/// file once they pass a limit, read back by index.
struct Store {
    len: usize,
    mem: Vec<u8>,
    file: Option<std::io::BufWriter<std::fs::File>>,
    map: Option<memmap2::Mmap>,
    count: u64,
}

impl Store {
    fn new(len: usize) -> Store {
        Store {
            len,
            mem: Vec::new(),
            file: None,
            map: None,
            count: 0,
        }
    }

    fn push(&mut self, rec: &[u8], limit: usize, temp: &Option<PathBuf>) -> anyhow::Result<()> {
        self.count += 1;
        if let Some(f) = &mut self.file {
            f.write_all(rec)?;
            return Ok(());
        }
        self.mem.extend_from_slice(rec);
        if self.mem.len() >= limit {
            let dir = temp.clone().unwrap_or_else(std::env::temp_dir);
            let file = unlinked_temp_file(&dir, "why-index").map_err(|e| {
                anyhow::anyhow!(
                    "cannot create the critical-path index in {} (it exceeds a quarter of the memory \
                     budget): {e} (set TMPDIR or --temp-dir, or raise --memory-budget)",
                    dir.display()
                )
            })?;
            let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
            w.write_all(&self.mem)?;
            self.mem = Vec::new();
            self.file = Some(w);
        }
        Ok(())
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        if let Some(w) = self.file.take() {
            let file = w.into_inner().map_err(|e| e.into_error())?;
            // SAFETY: a private, unlinked file nobody else can open; it is
            // not written or truncated after this point.
            let map = unsafe { memmap2::MmapOptions::new().map(&file) }?;
            let _ = map.advise(memmap2::Advice::Random);
            self.map = Some(map);
        }
        Ok(())
    }

    #[inline]
    fn get(&self, i: u64) -> &[u8] {
        let bytes: &[u8] = match &self.map {
            Some(m) => m,
            None => &self.mem,
        };
        let at = i as usize * self.len;
        &bytes[at..at + self.len]
    }

    fn spilled(&self) -> bool {
        self.map.is_some() || self.file.is_some()
    }
}

/// A thread's ranges in the stores.
#[derive(Debug, Clone, Copy, Default)]
struct Ranges {
    off: (u64, u64),
    regions: (u64, u64),
}

/// Every thread's off-CPU intervals and monitor regions.
pub(crate) struct Index {
    offs: Store,
    regions: Store,
    threads: TidMap<Ranges>,
    /// Blocked parts of several causes ([`MULTI`]), by record number:
    /// the causes in the order the views lay them out.
    multi: BTreeMap<u64, Causes>,
    limit: usize,
    temp: Option<PathBuf>,
    open: Option<(u32, Ranges)>,
}

impl Index {
    /// An empty index that keeps up to `limit` bytes in memory per store.
    pub(crate) fn new(limit: usize, temp: Option<PathBuf>) -> Index {
        Index {
            offs: Store::new(OFF_LEN),
            regions: Store::new(REGION_LEN),
            threads: TidMap::default(),
            multi: BTreeMap::new(),
            limit,
            temp,
            open: None,
        }
    }

    /// The records of thread `tid` follow (threads come one at a time).
    pub(crate) fn begin_thread(&mut self, tid: u32) {
        self.end_thread();
        let r = Ranges {
            off: (self.offs.count, self.offs.count),
            regions: (self.regions.count, self.regions.count),
        };
        self.open = Some((tid, r));
    }

    /// Closes the current thread's ranges.
    pub(crate) fn end_thread(&mut self) {
        if let Some((tid, mut r)) = self.open.take() {
            r.off.1 = self.offs.count;
            r.regions.1 = self.regions.count;
            self.threads.insert(tid, r);
        }
    }

    /// Appends an interval of the current thread (in time order) and, for a
    /// blocked part of several causes, those causes.
    pub(crate) fn push_off(&mut self, rec: OffRec, causes: Option<Causes>) -> anyhow::Result<()> {
        if let Some(c) = causes {
            self.multi.insert(self.offs.count, c);
        }
        self.offs.push(&rec.to_bytes(), self.limit, &self.temp)
    }

    /// Appends a monitor region of the current thread (in time order).
    pub(crate) fn push_region(&mut self, r: Region) -> anyhow::Result<()> {
        self.regions.push(&r.to_bytes(), self.limit, &self.temp)
    }

    /// Ends the building: the index is read from here on.
    pub(crate) fn finish(&mut self) -> anyhow::Result<()> {
        self.end_thread();
        self.offs.finish()?;
        self.regions.finish()
    }

    /// Whether the records went to disk.
    pub(crate) fn spilled(&self) -> bool {
        self.offs.spilled() || self.regions.spilled()
    }

    /// Intervals recorded.
    pub(crate) fn intervals(&self) -> u64 {
        self.offs.count
    }

    /// Thread `tid`'s intervals: the range of record numbers.
    fn off_range(&self, tid: u32) -> (u64, u64) {
        self.threads.get(&tid).map_or((0, 0), |r| r.off)
    }

    /// Record number `i`.
    pub(crate) fn off(&self, i: u64) -> OffRec {
        OffRec::from_bytes(self.offs.get(i))
    }

    /// The last interval of `tid` that began before `t`: (record number, record).
    pub(crate) fn off_before(&self, tid: u32, t: u64) -> Option<(u64, OffRec)> {
        let (lo, hi) = self.off_range(tid);
        let n = partition(lo, hi, |i| self.off(i).start < t);
        (n > lo).then(|| (n - 1, self.off(n - 1)))
    }

    /// The first interval of `tid` (record number), for scans.
    pub(crate) fn off_bounds(&self, tid: u32) -> (u64, u64) {
        self.off_range(tid)
    }

    /// The causes of a [`MULTI`] interval's blocked part.
    pub(crate) fn causes(&self, i: u64) -> Option<&[(Cause, u64)]> {
        self.multi.get(&i).map(|v| v.as_slice())
    }

    /// The monitor region of `tid` that holds `t` (start < t ≤ wake).
    pub(crate) fn region_at(&self, tid: u32, t: u64) -> Option<Region> {
        let (lo, hi) = self.threads.get(&tid).map_or((0, 0), |r| r.regions);
        let get = |i: u64| Region::from_bytes(self.regions.get(i));
        let n = partition(lo, hi, |i| get(i).start < t);
        (n > lo).then(|| get(n - 1)).filter(|r| t <= r.wake)
    }
}

/// The first i in [lo, hi) where `before(i)` is false (`before` holds for
/// a prefix).
fn partition(mut lo: u64, mut hi: u64, before: impl Fn(u64) -> bool) -> u64 {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(start: u64, end: u64) -> OffRec {
        OffRec {
            start,
            end,
            wake: end - 1,
            waker: 7,
            holder: u32::MAX,
            cause: Cause::Socket,
            flags: WOKEN,
        }
    }

    /// The same lookups whether the records stayed in memory or went to a file.
    #[test]
    fn lookups_in_memory_and_spilled() {
        for limit in [usize::MAX, 0] {
            let mut ix = Index::new(limit, None);
            ix.begin_thread(5);
            for k in 0..5000u64 {
                ix.push_off(rec(k * 100 + 10, k * 100 + 50), None).unwrap();
            }
            ix.push_region(Region {
                start: 110,
                wake: 349,
                owner: 9,
            })
            .unwrap();
            ix.begin_thread(6);
            ix.push_off(rec(0, 5), Some(vec![(Cause::LockNative, 2), (Cause::Gc, 2)]))
                .unwrap();
            ix.finish().unwrap();
            assert_eq!(ix.spilled(), limit == 0);
            assert_eq!(ix.off_before(5, 10), None);
            assert_eq!(ix.off_before(5, 11).unwrap().1, rec(10, 50));
            assert_eq!(ix.off_before(5, 250).unwrap().1, rec(210, 250));
            assert_eq!(ix.off_before(5, u64::MAX).unwrap().1, rec(499_910, 499_950));
            assert_eq!(ix.off_before(6, 1).unwrap(), (5000, rec(0, 5)));
            assert_eq!(ix.causes(5000).unwrap().len(), 2);
            assert_eq!(ix.off_before(7, 100), None);
            assert_eq!(ix.region_at(5, 200).unwrap().owner, 9);
            assert_eq!(ix.region_at(5, 110), None);
            assert_eq!(ix.region_at(5, 350), None);
            assert_eq!(ix.region_at(6, 200), None);
        }
    }
}
