//! What the agent asks the kernel directly: the one clock of the trace, the
//! calling thread's id and the pid namespace the ids are in. A leaf: the
//! recorder and the thread state both use it.

use std::cell::Cell;

/// CLOCK_MONOTONIC in nanoseconds (the one clock of the whole trace).
pub(crate) fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

thread_local! {
    /// Kernel thread id of the calling thread, 0 until first asked.
    static TID: Cell<u32> = const { Cell::new(0) };
}

/// gettid() of the calling thread, cached.
pub(crate) fn tid() -> u32 {
    TID.try_with(|t| {
        if t.get() == 0 {
            // SAFETY: gettid has no preconditions.
            t.set(unsafe { libc::syscall(libc::SYS_gettid) } as u32);
        }
        t.get()
    })
    // During thread teardown the cache may be gone; ask the kernel directly.
    // SAFETY: gettid has no preconditions.
    .unwrap_or_else(|_| unsafe { libc::syscall(libc::SYS_gettid) } as u32)
}

/// The inode of the calling process's pid namespace (`/proc/self/ns/pid`),
/// if /proc says; the tids [`tid`] gives are that namespace's.
pub(crate) fn pid_namespace() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}
