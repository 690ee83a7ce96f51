//! The report's `processes`: each traced process's cgroup, the container
//! it names, and the CPU quotas over it, as the recorder read them.

use crate::model::trace::Trace;
use crate::report::container_id;
use serde::Serialize;

/// A traced process's cgroup and the CPU quotas over it, as the recorder
/// read them (meta.json).
#[derive(Debug, Clone, Serialize)]
pub struct ProcessJson {
    /// The process.
    pub pid: u32,
    /// Its cgroup in the CPU controller's hierarchy (`/`: the root).
    pub cgroup: String,
    /// The quotas of it and its ancestors, innermost first (empty: none),
    /// with the periods they throttled during the trace.
    pub cpu_limits: Vec<crate::meta::CpuLimit>,
    /// The container (and Kubernetes pod) `cgroup` names, if any.
    #[serde(flatten)]
    pub container: container_id::ContainerId,
}

/// The report's `processes`: each traced process with its cgroup's quotas.
pub fn processes(trace: &Trace) -> Vec<ProcessJson> {
    let m = &trace.meta;
    m.process_cgroups
        .iter()
        .map(|p| ProcessJson {
            pid: p.pid,
            cgroup: p.cgroup.clone(),
            container: container_id::container_of(&p.cgroup),
            cpu_limits: p
                .cpu_limited_by
                .iter()
                .filter_map(|c| {
                    m.cpu_limits
                        .iter()
                        .find(|l| &l.cgroup == c && l.cgroup_v2 == p.cgroup_v2)
                        .cloned()
                })
                .collect(),
        })
        .collect()
}

/// One line per cgroup of the traced processes: its CPU quotas and how
/// often they throttled it during the trace (`report` and `info` print them).
pub fn describe_cgroups(processes: &[ProcessJson]) -> Vec<String> {
    let ms = |ns: u64| format!("{}.{:03}", ns / 1_000_000, ns / 1000 % 1000);
    let mut by_cgroup: Vec<(&str, Vec<u32>, &[crate::meta::CpuLimit])> = Vec::new();
    for p in processes {
        match by_cgroup.iter_mut().find(|(c, _, _)| *c == p.cgroup) {
            Some((_, pids, _)) => pids.push(p.pid),
            None => by_cgroup.push((&p.cgroup, vec![p.pid], &p.cpu_limits)),
        }
    }
    by_cgroup
        .into_iter()
        .map(|(cgroup, pids, limits)| {
            let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
            let who = format!("pid {} in {cgroup}{}", pids.join(", "), container_id::describe(cgroup));
            if limits.is_empty() {
                return format!("{who}: no CPU quota");
            }
            let quotas: Vec<String> = limits
                .iter()
                .map(|l| {
                    let of = if l.cgroup == cgroup {
                        String::new()
                    } else {
                        format!(" (of {})", l.cgroup)
                    };
                    format!(
                        "CPU quota {} ms per {} ms{of}, throttled in {} of {} periods ({} ms) during the trace",
                        ms(l.quota_us * 1000),
                        ms(l.period_us * 1000),
                        l.throttled_periods,
                        l.periods,
                        ms(l.throttled_ns)
                    )
                })
                .collect();
            format!("{who}: {}", quotas.join("; "))
        })
        .collect()
}
