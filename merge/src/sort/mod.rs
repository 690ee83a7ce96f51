//! The external sort behind the streamed reads: per-thread events are
//! written in sorted runs (`spill`, in the run encoding of `run`) and merged
//! back per thread in time order (`kway`).

pub(crate) mod kway;
pub(crate) mod run;
pub(crate) mod spill;
