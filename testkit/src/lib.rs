//! Test support shared by the workspace's tests (not published): traces
//! written with the real encoder, so that the reader does exactly what it
//! does on a recorded trace.
//!
//! | module | job |
//! |---|---|
//! | `builder` | [`TraceBuilder`]: a hand-made trace, event by event |
//! | `synth` | a synthetic trace of N events of every kind, for equality tests and benchmarks |
//! | `callback_log` | a visitor that writes down every callback, to compare two analyses |
#![deny(missing_docs)]

pub mod builder;
pub mod callback_log;
pub mod synth;

pub use builder::{TraceBuilder, PID};
