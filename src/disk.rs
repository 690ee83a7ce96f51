//! The disk a recording may use (`--min-free`, `--max-size`, `--max-age`):
//! the free-space floor every recording keeps, and the ring of chunks a
//! flight recording is written as. [`DiskArgs`] are the options, [`DiskPlan`]
//! what they come to on the trace directory's file system.

use crate::options::parse_duration;
use crate::trace_dir::TraceDir;
use anyhow::bail;
use std::time::Duration;

/// The default floor is this share of the file system's size ...
const FLOOR_PERCENT: u64 = 5;
/// ... but never more than this.
const FLOOR_CAP: u64 = 1 << 30;
/// The ring holds about this many chunks per stream: each stream begins a
/// new chunk at 1/CHUNKS of `--max-size` (or `--max-age`), so the ring
/// keeps at least (CHUNKS − 1)/CHUNKS of what it may.
const CHUNKS: u64 = 8;
/// The smallest chunk: a JVM stream's file starts with 4 MiB allocated.
const MIN_CHUNK_BYTES: u64 = 4 << 20;
/// The shortest chunk lifetime.
const MIN_CHUNK_NS: u64 = 100_000_000;

/// The disk options of `run`, `attach` and `record`.
#[derive(clap::Args, Clone, Debug, Default)]
pub(crate) struct DiskArgs {
    /// Stop writing (and count what is not written, as on a full disk)
    /// when the trace's file system would keep fewer free bytes than this
    /// (`512M`, `2G`; `0`: write until it is full). Default: 5 % of the file
    /// system, at most 1G. The traced program runs on either way.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub(crate) min_free: Option<u64>,
    /// A flight recording: keep only the last SIZE of the trace (`256M`,
    /// `4G`, at least 32M). Each stream is written as numbered chunk files;
    /// the oldest chunks are deleted while the trace is larger. The report
    /// says which window of time the trace still covers.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub(crate) max_size: Option<u64>,
    /// A flight recording: keep only about the last DURATION (`30s`, `10m`):
    /// chunks that ended longer ago are deleted.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) max_age: Option<Duration>,
}

/// `256M`, `4G`, `1048576`: a size in bytes.
fn parse_size(s: &str) -> Result<u64, String> {
    jtrace_merge::stream::parse_size(s).map(|n| n as u64)
}

/// What the disk options come to for one recording.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DiskPlan {
    /// The free-space floor in bytes (0: none).
    pub(crate) min_free: u64,
    /// The ring, for a flight recording.
    pub(crate) ring: Option<Ring>,
}

/// The bounds of a flight recording and the chunks they make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ring {
    /// `--max-size` in bytes.
    pub(crate) max_size: Option<u64>,
    /// `--max-age` in ns.
    pub(crate) max_age_ns: Option<u64>,
    /// A stream begins a new chunk past this many bytes (0: never for size).
    pub(crate) chunk_bytes: u64,
    /// ... or past this age in ns (0: never for age).
    pub(crate) chunk_ns: u64,
}

impl DiskArgs {
    /// Checks the options before anything is written.
    pub(crate) fn validate(&self) -> anyhow::Result<()> {
        if let Some(n) = self.max_size.filter(|&n| n < 32 << 20) {
            bail!("--max-size {} MiB is too small: at least 32M", n >> 20);
        }
        if self.max_age.is_some_and(|d| d < Duration::from_secs(1)) {
            bail!("--max-age must be at least 1s");
        }
        Ok(())
    }

    /// The plan on the file system of `dir`.
    pub(crate) fn plan(&self, dir: &TraceDir) -> DiskPlan {
        self.plan_on(dir.file_system_size())
    }

    /// The plan on a file system of `fs_size` bytes (if known).
    fn plan_on(&self, fs_size: Option<u64>) -> DiskPlan {
        let min_free = self.min_free.unwrap_or_else(|| fs_size.map_or(0, default_floor));
        let ring = (self.max_size.is_some() || self.max_age.is_some()).then(|| {
            let max_age_ns = self.max_age.map(|d| d.as_nanos() as u64);
            Ring {
                max_size: self.max_size,
                max_age_ns,
                chunk_bytes: self.max_size.map_or(0, |n| (n / CHUNKS).max(MIN_CHUNK_BYTES)),
                chunk_ns: max_age_ns.map_or(0, |n| (n / CHUNKS).max(MIN_CHUNK_NS)),
            }
        });
        DiskPlan { min_free, ring }
    }
}

/// The default floor on a file system of `size` bytes: 5 % of it, as
/// ext4 keeps for root (what a full disk would take from everyone else,
/// logs and databases included), and at most 1 GiB, plenty on a large disk
/// for the rest of the system to go on while the user reacts. A share
/// rather than a fixed amount, so that small file systems (a tmpfs, a
/// container's volume) stay usable.
pub(crate) fn default_floor(size: u64) -> u64 {
    (size / 100 * FLOOR_PERCENT).min(FLOOR_CAP)
}

impl DiskPlan {
    /// The agent's configuration lines for this plan.
    pub(crate) fn agent_lines(&self) -> String {
        let mut s = format!("min_free_bytes {}\n", self.min_free);
        if let Some(r) = &self.ring {
            s.push_str(&format!(
                "chunk_bytes {}\nchunk_ms {}\n",
                r.chunk_bytes,
                r.chunk_ns / 1_000_000
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_floor_is_a_share_capped() {
        assert_eq!(default_floor(12 << 20), (12 << 20) / 100 * 5);
        assert_eq!(default_floor(10 << 30), (10u64 << 30) / 100 * 5);
        assert_eq!(default_floor(1 << 40), 1 << 30);
    }

    #[test]
    fn chunks_are_an_eighth_of_the_bounds() {
        let a = DiskArgs {
            min_free: Some(0),
            max_size: Some(256 << 20),
            max_age: Some(Duration::from_secs(8)),
        };
        a.validate().unwrap();
        let r = Ring {
            max_size: Some(256 << 20),
            max_age_ns: Some(8_000_000_000),
            chunk_bytes: 32 << 20,
            chunk_ns: 1_000_000_000,
        };
        assert_eq!(
            a.plan_on(Some(1 << 30)),
            DiskPlan {
                min_free: 0,
                ring: Some(r)
            }
        );
        assert_eq!(DiskArgs::default().plan_on(Some(1 << 30)).min_free, (1 << 30) / 100 * 5);
        let small = DiskArgs {
            max_size: Some(16 << 20),
            ..Default::default()
        };
        assert!(small.validate().unwrap_err().to_string().contains("at least 32M"));
    }
}
