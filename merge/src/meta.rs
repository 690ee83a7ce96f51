//! `meta.json`: what a trace directory says about itself.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

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

    /// Writes `meta.json` atomically (temporary file, then rename), so a
    /// reader never sees half a file.
    pub fn store(&self, dir: &Path) -> anyhow::Result<()> {
        let tmp = dir.join(".meta.json.tmp");
        let path = dir.join(jtrace_format::META_FILE);
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)?;
        std::fs::rename(&tmp, &path)?;
        Ok(())
    }

    /// Total kernel records lost.
    pub fn kernel_lost_total(&self) -> u64 {
        self.kernel_lost.values().sum()
    }
}
