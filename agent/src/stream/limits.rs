//! The sizes that bound the stream file's mapping ([`crate::stream::file`]),
//! and the resident mapping they allow. Plain constants, nothing else: the
//! end-to-end test of the unmapping (tests/loss.rs) includes this file to
//! check the JVM against the same numbers the agent uses.

/// The file is grown in steps that double from [`INITIAL`] up to this size.
pub(crate) const GROW_STEP: u64 = 32 << 20;
/// Allocated at creation, with the [`RESERVE`]: enough for the records of
/// the JVM's start, while the grower, woken by the first append, allocates
/// ahead. Small, because the creator prepares it on the JVM's start-up path.
pub(crate) const INITIAL: u64 = 1 << 20;
/// Growing allocates and faults in this much at a time and publishes it at
/// once, so an appender that has to wait for the grower waits for little.
pub(crate) const CHUNK: u64 = 2 << 20;
/// Bytes of the file kept allocated beyond what appenders may use: room for
/// the last records (`StreamFile::close`) on a full disk.
pub(crate) const RESERVE: u64 = 1 << 20;
/// Bytes of the mapping left mapped behind the last append; before that,
/// written pages are unmapped (MADV_DONTNEED: a shared file mapping keeps
/// their data in the page cache, and an appender still writing there only
/// faults them back in) and their writeback started.
pub(crate) const KEEP_MAPPED: u64 = 64 << 20;
/// How far ahead of the position the grower allocates, in grow steps.
pub(crate) const STEPS_AHEAD: u64 = 3;

/// The most of the mapping resident once the grower has run after the last
/// append (a JVM at rest, or between two grower runs): behind the position,
/// [`KEEP_MAPPED`] plus less than one [`GROW_STEP`] (the grower releases
/// only in steps of at least that) plus a page (rounding); ahead of it,
/// [`STEPS_AHEAD`] steps and the [`RESERVE`] (all faulted in when
/// allocated). 193 MiB.
pub(crate) const MAX_RESIDENT_AT_REST: u64 = KEEP_MAPPED + GROW_STEP + 4096 + STEPS_AHEAD * GROW_STEP + RESERVE;

/// The most resident while a grower run is under way, if the grower keeps
/// up: it allocates up to [`STEPS_AHEAD`] steps ahead of the position
/// before releasing what the position passed since its last run (which
/// woke it when the position came within one step of the allocated end,
/// [`STEPS_AHEAD`] − 1 steps on), so that run's allocation is added to
/// [`MAX_RESIDENT_AT_REST`] until its release. 257 MiB. (A grower starved
/// of CPU for longer leaves the appenders to grow the file themselves and
/// releases nothing meanwhile.)
pub(crate) const MAX_RESIDENT_GROWING: u64 = MAX_RESIDENT_AT_REST + (STEPS_AHEAD - 1) * GROW_STEP;

// The figures the documentation gives.
const _: () = assert!(MAX_RESIDENT_AT_REST == (193 << 20) + 4096 && MAX_RESIDENT_GROWING == (257 << 20) + 4096);
