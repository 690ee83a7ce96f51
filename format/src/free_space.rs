//! The free-space floor: a recording never fills its disk. One rule for
//! both writers, the kernel recorder (as root) and the agent (as the JVM's
//! user).

use std::fs::File;

/// Fails if writing `len` more bytes to `file` would leave its file system
/// fewer than `min_free` bytes free for unprivileged users (0: no floor).
/// jtrace writes as root, which could also take the blocks the file system
/// keeps for root; the floor counts those as taken.
pub fn check_free_space(file: &File, len: u64, min_free: u64) -> std::io::Result<()> {
    if min_free == 0 {
        return Ok(());
    }
    let Some(free) = free_bytes(file) else {
        return Ok(());
    };
    if free < len.saturating_add(min_free) {
        return Err(std::io::Error::other(format!(
            "the trace's file system is down to its free-space floor: {} MiB free, --min-free {} MiB",
            free >> 20,
            min_free.div_ceil(1 << 20)
        )));
    }
    Ok(())
}

/// Bytes free for unprivileged users on the file system of `file`.
pub fn free_bytes(file: &File) -> Option<u64> {
    let st = rustix::fs::fstatvfs(file).ok()?;
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}
