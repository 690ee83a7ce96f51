//! The process a thread belongs to, as every view groups threads.

use jtrace_merge::{ThreadInfo, Trace};

/// The process of a thread: its thread-group id, or the traced JVM's pid
/// when the recording did not name one.
pub(crate) fn pid_of(trace: &Trace, t: &ThreadInfo) -> u32 {
    if t.tgid != 0 {
        t.tgid
    } else {
        trace.meta.pid
    }
}
