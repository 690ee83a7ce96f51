//! Symbols: what jtrace knows about the names of code it does not own.
//!
//! The design gives this crate address-to-symbol resolution (ELF/DWARF,
//! kallsyms, JIT code maps); today it holds the names of HotSpot functions
//! the kernel recorder probes and the merge recognises ([`hotspot`]).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod hotspot;
