//! Symbols: one home for naming code jtrace does not own.
//!
//! * [`access`]: whose rights the binaries a trace names are opened with,
//!   and the thread that takes a user's identity to open them (the CLI's
//!   too).
//! * [`file_bytes`]: how a view reads a binary: a regular file of a
//!   bounded size, mapped only when root alone can change it (a mapped
//!   file shortened by its owner kills the reader), else in bounded parts.
//! * [`bounded_read`]: an ELF file read in bounded parts (its headers,
//!   symbol tables and notes, at most [`bounded_read::MAX_ELF_READ`]),
//!   as the recording commands read the files users choose or control.
//! * [`elf`]: ELF files — build ids, function symbols (`.symtab`,
//!   `.dynsym`, `.gnu_debugdata`), file offsets of named functions (for
//!   uprobes), C++ demangling.
//! * [`lines`]: DWARF line info — the source file and line of an address,
//!   and the functions inlined there — from the binary or its separate
//!   debug file (by build id or `.gnu_debuglink`).
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
//! Line numbers are read only when a view asks for them (`--lines`), with
//! the `addr2line` crate (gimli). It was chosen over blazesym on measured
//! figures (BENCHMARKS.md, "DWARF line info", `bench/lines.sh`): on 4000
//! return addresses of libbpf.so (-g -O2) and of libc (its compressed
//! separate debug file) both gave the same file:line and inline chain as
//! llvm-symbolizer for every address; addr2line looked up 1.7-1.9 times
//! faster on first use and 4.5-6.5 times faster again (blazesym loads
//! lazier: 2 times faster to its first lookup). And addr2line reads
//! sections that this crate maps itself with `object`, so binaries stay
//! opened with the trace owner's rights ([`access`]); blazesym opens paths
//! on its own.

#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod access;
pub mod bounded_read;
pub mod codemap;
pub mod elf;
pub mod file_bytes;
pub mod hotspot;
pub mod kallsyms;
pub mod lines;
