//! The clocks jtrace reads: CLOCK_MONOTONIC, the trace's one clock, and
//! CLOCK_REALTIME for the date of its start.

/// Nanoseconds on `clock`.
pub(crate) fn clock_ns(clock: rustix::time::ClockId) -> u64 {
    let ts = rustix::time::clock_gettime(clock);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
