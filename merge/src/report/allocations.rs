//! The report's `allocations`: the agent's sampled allocations by class
//! and site over the threads and methods kept.

use crate::model::event::ThreadInfo;
use crate::model::trace::Trace;
use crate::report::filter::{glob_match, ReportFilter};
use serde::Serialize;
use std::collections::BTreeMap;

/// Sampled allocations of one class at one site.
#[derive(Debug, Clone, Serialize)]
pub struct AllocJson {
    /// Allocated class (`java.lang.String`, `[B`).
    pub class: String,
    /// Allocating method as `class.method` (the innermost frame outside the
    /// JDK's own packages, else the innermost), "" if unknown.
    pub site: String,
    /// Source line in it, -1 if unknown.
    pub line: i32,
    /// Samples (the JVM takes one per ~512 KiB allocated, on average).
    pub samples: u64,
    /// Σ size of the sampled objects.
    pub sampled_bytes: u64,
}

/// The report's allocation table: per (class, site) over the threads kept.
pub(crate) fn allocations(
    trace: &Trace,
    filter: &ReportFilter,
    keep_thread: &dyn Fn(&ThreadInfo) -> bool,
) -> Vec<AllocJson> {
    let mut by_site: BTreeMap<(&str, String, i32), (u64, u64)> = BTreeMap::new();
    for ((tid, class, method, line), c) in &trace.allocations {
        if trace.threads.get(tid).is_some_and(|t| !keep_thread(t)) {
            continue;
        }
        let site = method.map_or(String::new(), |m| trace.methods[m as usize].qualified());
        if filter.method.as_deref().is_some_and(|p| !glob_match(p, &site)) {
            continue;
        }
        let e = by_site.entry((class.as_str(), site, *line)).or_default();
        e.0 += c.samples;
        e.1 += c.bytes;
    }
    let mut v: Vec<AllocJson> = by_site
        .into_iter()
        .map(|((class, site, line), (samples, sampled_bytes))| AllocJson {
            class: class.to_string(),
            site,
            line,
            samples,
            sampled_bytes,
        })
        .collect();
    v.sort_by(|a, b| b.samples.cmp(&a.samples).then(b.sampled_bytes.cmp(&a.sampled_bytes)));
    v
}
