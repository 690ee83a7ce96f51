//! `meta.json`: what a trace directory says about itself.

use rustix::fs::{AtFlags, Mode, OFlags, CWD};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::fd::AsFd;
use std::path::Path;

/// The temporary file `meta.json` is written to before it is renamed.
const META_TMP: &str = ".meta.json.tmp";

/// Contents of `meta.json`, written by `jtrace run` when recording ends.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Meta {
    /// Always `"jtrace"`.
    pub format: String,
    /// On-disk format version ([`jtrace_format::FORMAT_VERSION`]).
    pub version: u32,
    /// True only once the recorder finished cleanly; a trace without it is a
    /// readable prefix of an interrupted recording.
    pub complete: bool,
    /// The jtrace version that wrote the trace.
    pub jtrace_version: String,
    /// CLOCK_REALTIME at start, paired with `start_monotonic_ns`.
    pub start_realtime_ns: u64,
    /// CLOCK_MONOTONIC at start (the clock of every event).
    pub start_monotonic_ns: u64,
    /// CLOCK_MONOTONIC when recording stopped.
    pub end_monotonic_ns: u64,
    /// Process id of the traced command (or attached process).
    pub pid: u32,
    /// The traced command line.
    pub command: Vec<String>,
    /// Exit code of the command (128 + signal if killed), if it ran under jtrace.
    pub exit_code: Option<i32>,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Method selection rules given to the agent.
    pub methods: Vec<String>,
    /// Kernel records written.
    pub kernel_records: u64,
    /// Kernel records lost, by kind (ring buffer full, bad sample).
    pub kernel_lost: BTreeMap<String, u64>,
    /// Switch-ins the kernel did not report and the recorder inferred.
    #[serde(default)]
    pub kernel_inferred_switch_ins: u64,
    /// Whether the kernel recorder stopped cleanly with every record it
    /// took from the ring buffer written; absent in traces of older jtrace
    /// versions, and while recording: then `complete` says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_complete: Option<bool>,
    /// Kernel records the recorder took from the ring buffer but could not
    /// write to kernel.bin (disk full), by kind.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kernel_unwritten: BTreeMap<String, u64>,
    /// The earliest time of a kernel record not written: the kernel stream
    /// covers the recording up to here only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_covered_until_ns: Option<u64>,
    /// Why kernel.bin could not be written to the end, if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_write_error: Option<String>,
    /// CPU samples per second per CPU (CPU_SAMPLE records), 0: none. A
    /// sample stands for 1e9 / hz ns of CPU time.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cpu_sample_hz: u32,
    /// Deferred stacks: blocks at least this long (ns) got their stacks;
    /// absent when every switch-out got them (or none did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_min_block_ns: Option<u64>,
    /// Deferred stacks: at most this many shorter blocks per CPU and
    /// second got theirs (samples).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub short_block_stacks_hz: u32,
    /// A ring recording (a flight recorder): the size it was kept within
    /// (`--max-size`, bytes), if bounded by size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<u64>,
    /// A ring recording: the age it was kept within (`--max-age`, ns), if
    /// bounded by age.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_ns: Option<u64>,
    /// A ring recording: chunk files deleted because they fell out of it.
    #[serde(default, skip_serializing_if = "is_zero64")]
    pub ring_dropped_chunks: u64,
    /// A ring recording: the bytes of those chunks.
    #[serde(default, skip_serializing_if = "is_zero64")]
    pub ring_dropped_bytes: u64,
    /// A snapshot (`jtrace dump`) of a recording that went on: when it was
    /// taken (CLOCK_MONOTONIC ns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_ns: Option<u64>,
    /// Whether the recording's kernel let the recorder time CPU-quota
    /// throttling (cause `throttled`), and how; absent in traces of older
    /// jtrace versions (docs/REPORT.md, "throttled and steal").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_timing: Option<Measured>,
    /// Whether it let the recorder measure steal (cause `steal`), and how;
    /// absent in traces of older jtrace versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_timing: Option<Measured>,
    /// Switch-outs of throttled threads whose throttle could not be timed
    /// (their time stays `runqueue`).
    #[serde(default, skip_serializing_if = "is_zero64")]
    pub kernel_throttles_untimed: u64,
    /// The traced processes the recorder saw exec (or attached to), each
    /// with its cgroup in the CPU controller's hierarchy as it exec'd;
    /// absent in older traces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub process_cgroups: Vec<ProcessCgroup>,
    /// The CPU quotas (CFS bandwidth) of those cgroups and their
    /// ancestors, with what they did during the recording.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_limits: Vec<CpuLimit>,
    /// `attach --cgroup`: the JVMs of the cgroup whose methods were not
    /// traced (the agent could not be attached), each with why; their
    /// kernel side is recorded all the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jvms_not_attached: Vec<JvmNotAttached>,
    /// The kernel does not show its addresses to the invoking user, so the
    /// kernel stacks hold none: their functions were named at record time
    /// and frames stored as offsets into them (docs/SECURITY.md, "What a
    /// trace reveals"); absent when they hold real addresses.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kernel_addresses_hidden: bool,
}

/// A JVM an `attach --cgroup` recording did not attach to.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct JvmNotAttached {
    /// The JVM's process (host pid).
    pub pid: u32,
    /// Why it was not attached.
    pub why: String,
}

/// A traced process's cgroup.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProcessCgroup {
    /// The process.
    pub pid: u32,
    /// Its cgroup in the hierarchy of the CPU controller (`/`: the root).
    pub cgroup: String,
    /// A cgroup v2 path (else v1's `cpu` hierarchy).
    pub cgroup_v2: bool,
    /// The cgroups among it and its ancestors with a CPU quota, innermost
    /// first: `cgroup` of entries of [`Meta::cpu_limits`].
    pub cpu_limited_by: Vec<String>,
}

/// A cgroup's CPU quota, and what it did while recording (the counters
/// of its cpu.stat from when a traced process was first seen in it to
/// the end).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CpuLimit {
    /// The cgroup.
    pub cgroup: String,
    /// A cgroup v2 path.
    pub cgroup_v2: bool,
    /// CPU time allowed per period (µs).
    pub quota_us: u64,
    /// The period (µs).
    pub period_us: u64,
    /// Periods with runnable tasks (`nr_periods`).
    pub periods: u64,
    /// Periods that ran out of quota (`nr_throttled`).
    pub throttled_periods: u64,
    /// Time its run queues were throttled, summed over CPUs (ns).
    pub throttled_ns: u64,
}

/// What a recording could measure of one cause on its kernel.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Measured {
    /// Whether it was measured.
    pub measured: bool,
    /// How, or why not.
    pub how: String,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero64(n: &u64) -> bool {
    *n == 0
}

impl Meta {
    /// Reads `meta.json` from a trace directory.
    pub fn load(dir: &Path) -> anyhow::Result<Meta> {
        let path = dir.join(jtrace_format::META_FILE);
        let text =
            std::fs::read_to_string(&path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let meta: Meta = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{} is not a jtrace meta file: {e}", path.display()))?;
        if meta.format != "jtrace" {
            anyhow::bail!("{} is not a jtrace meta file", path.display());
        }
        if meta.version > jtrace_format::FORMAT_VERSION {
            anyhow::bail!(
                "{} has format version {}, this jtrace reads up to {}",
                path.display(),
                meta.version,
                jtrace_format::FORMAT_VERSION
            );
        }
        Ok(meta)
    }

    /// Writes `meta.json` into the directory at `dir` (not followed if it
    /// is a symbolic link); see [`Meta::store_in`].
    pub fn store(&self, dir: &Path) -> anyhow::Result<()> {
        let fd = rustix::fs::openat(
            CWD,
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| anyhow::anyhow!("cannot open the trace directory {}: {e}", dir.display()))?;
        self.store_in(&fd).map(|_| ())
    }

    /// Writes `meta.json` (mode 0600) into the open directory `dir`
    /// atomically: a new temporary file, then a rename, so that a reader
    /// never sees half a file. Safe in a directory another user can write
    /// (jtrace runs as root): nothing there is followed or reused, a stale
    /// or planted temporary file is unlinked, not written through.
    /// Returns the inode of the file written.
    pub fn store_in(&self, dir: impl AsFd) -> anyhow::Result<u64> {
        let dir = dir.as_fd();
        let bytes = serde_json::to_vec_pretty(self)?;
        match rustix::fs::unlinkat(dir, META_TMP, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => anyhow::bail!("cannot remove the old {META_TMP}: {e}"),
        }
        let fd = rustix::fs::openat(
            dir,
            META_TMP,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| anyhow::anyhow!("cannot create {META_TMP}: {e}"))?;
        let ino = rustix::fs::fstat(&fd)?.st_ino;
        std::fs::File::from(fd)
            .write_all(&bytes)
            .map_err(|e| anyhow::anyhow!("cannot write {META_TMP}: {e}"))?;
        rustix::fs::renameat(dir, META_TMP, dir, jtrace_format::META_FILE)
            .map_err(|e| anyhow::anyhow!("cannot rename {META_TMP} to {}: {e}", jtrace_format::META_FILE))?;
        Ok(ino)
    }

    /// Total kernel records lost: not put into the ring buffer, or taken
    /// from it and not written.
    pub fn kernel_lost_total(&self) -> u64 {
        self.kernel_lost.values().sum::<u64>() + self.kernel_unwritten.values().sum::<u64>()
    }

    /// Whether the kernel stream was written to its end (see
    /// [`Meta::kernel_complete`]).
    pub fn kernel_stream_complete(&self) -> bool {
        self.kernel_complete.unwrap_or(self.complete)
    }
}
