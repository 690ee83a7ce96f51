//! How much memory the in-memory views may use: what the system has
//! available (MemAvailable), within the limit of jtrace's control group
//! (cgroup v2 `memory.max`, or v1 `memory.limit_in_bytes`), less what the
//! group already uses.

use std::path::Path;

/// Bytes jtrace may still allocate, as far as the system says.
pub(crate) fn available() -> u64 {
    let system = meminfo_available().unwrap_or(u64::MAX);
    system.min(cgroup_room().unwrap_or(u64::MAX))
}

/// MemAvailable of /proc/meminfo, in bytes.
fn meminfo_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The limit of our memory control group less its usage, if it has one.
fn cgroup_room() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        let path = path.trim_start_matches('/');
        let (limit, usage) = match controllers {
            // cgroup v2: one hierarchy, "0::/path".
            "" => {
                let dir = Path::new("/sys/fs/cgroup").join(path);
                (
                    read_number(&dir.join("memory.max")),
                    read_number(&dir.join("memory.current")),
                )
            }
            c if c.split(',').any(|c| c == "memory") => {
                let dir = Path::new("/sys/fs/cgroup/memory").join(path);
                (
                    read_number(&dir.join("memory.limit_in_bytes")),
                    read_number(&dir.join("memory.usage_in_bytes")),
                )
            }
            _ => continue,
        };
        if let Some(limit) = limit {
            return Some(limit.saturating_sub(usage.unwrap_or(0)));
        }
    }
    None
}

/// A number in a cgroup file; `None` for "max" (no limit) or no file.
fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// `n` bytes for people: "1.5 GiB", "300 MiB".
pub(crate) fn human(n: u64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    if n >= 1 << 30 {
        format!("{:.1} GiB", n as f64 / GIB)
    } else {
        format!("{} MiB", n.div_ceil(1 << 20))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn available_memory_is_known_and_sane() {
        let a = available();
        assert!(a > 16 << 20 && a < u64::MAX, "{a}");
        assert!(a <= meminfo_available().unwrap());
        assert_eq!(human(300 << 20), "300 MiB");
        assert_eq!(human(3 << 29), "1.5 GiB");
    }
}
