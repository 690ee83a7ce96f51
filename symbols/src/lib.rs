//! Symbols: one home for naming code jtrace does not own.
//!
//! * [`access`]: whose rights the binaries a trace names are opened with.
//! * [`elf`]: ELF files — build ids, function symbols (`.symtab`,
//!   `.dynsym`, `.gnu_debugdata`), file offsets of named functions (for
//!   uprobes), C++ demangling.
//! * [`kallsyms`]: kernel symbols, read at record time.
//! * [`codemap`]: code ranges over time (the JVM's JIT-compiled methods
//!   and generated code).
//! * [`hotspot`]: the names of HotSpot functions the kernel recorder
//!   probes and the merge recognises.
//!
//! The trace stores, at record time, what naming needs later (mappings
//! with build ids and file offsets, the kernel symbols used, the JVM's code
//! maps); the reader (`jtrace-merge`) names stacks from that with this
//! crate, so a trace reads the same after its processes are gone and on
//! another machine that has binaries with the same build ids.
//!
//! Line numbers (DWARF) are not read yet: frames are named by function.

#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod access;
pub mod codemap;
pub mod elf;
pub mod hotspot;
pub mod kallsyms;
