//! `lines-bench <addr2line|blazesym> <elf-with-dwarf> <pcs-file>`: resolves
//! every pc of `pcs-file` (hex virtual addresses, one a line) to its
//! inlined frames with one library, printing them as binutils'
//! `addr2line -a -i -f` does (address line, then function / file:line
//! pairs, innermost first), and on stderr the load time (open + first
//! lookup: both libraries parse lazily), the time of the first pass over
//! the pcs (cold: units parsed on demand), of a second pass (warm), the
//! heap in use after the passes and its peak (a counting allocator), and
//! the process's peak RSS (VmHWM).

use std::alloc::{GlobalAlloc, Layout, System};
use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(l.size(), Relaxed) + l.size();
        PEAK.fetch_max(live, Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Relaxed);
        System.dealloc(p, l)
    }
}

#[global_allocator]
static A: Counting = Counting;

/// One frame: function, file (as the library composes its path), line.
type Frame = (String, String, u32);

fn hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

trait Resolver {
    fn frames(&mut self, pc: u64) -> Vec<Frame>;
}

/// addr2line over gimli, its sections read (and decompressed) by `object`,
/// as the symbols crate would: only what lines and inlining need.
struct Gimli {
    ctx: addr2line::Context<gimli::EndianRcSlice<gimli::RunTimeEndian>>,
}

impl Gimli {
    fn load(path: &str) -> Gimli {
        use object::{Object, ObjectSection};
        let file = std::fs::File::open(path).unwrap();
        // SAFETY: a read-only map of a file the bench does not change.
        let map = unsafe { memmap2::Mmap::map(&file).unwrap() };
        let elf = object::File::parse(&*map).unwrap();
        let endian = if elf.is_little_endian() {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        };
        let dwarf = gimli::Dwarf::load(|id: gimli::SectionId| -> Result<_, gimli::Error> {
            // Locations are not needed for lines: left empty.
            let skip = matches!(id, gimli::SectionId::DebugLoc | gimli::SectionId::DebugLocLists);
            let data = match elf.section_by_name(id.name()) {
                Some(s) if !skip => s.uncompressed_data().unwrap_or(Cow::Borrowed(&[])),
                _ => Cow::Borrowed(&[][..]),
            };
            Ok(gimli::EndianRcSlice::new(std::rc::Rc::from(&*data), endian))
        })
        .unwrap();
        Gimli {
            ctx: addr2line::Context::from_dwarf(dwarf).unwrap(),
        }
    }
}

impl Resolver for Gimli {
    fn frames(&mut self, pc: u64) -> Vec<Frame> {
        let mut out = Vec::new();
        let Ok(mut it) = self.ctx.find_frames(pc).skip_all_loads() else {
            return out;
        };
        while let Ok(Some(f)) = it.next() {
            let name = f
                .function
                .as_ref()
                .and_then(|n| n.raw_name().ok().map(|n| n.into_owned()))
                .unwrap_or_else(|| "??".into());
            let (file, line) = f
                .location
                .map(|l| (l.file.unwrap_or("??").to_string(), l.line.unwrap_or(0)))
                .unwrap_or(("??".into(), 0));
            out.push((name, file, line));
        }
        out
    }
}

/// blazesym's symbolizer on an ELF source with its DWARF.
struct Blaze {
    sym: blazesym::symbolize::Symbolizer,
    src: blazesym::symbolize::source::Source<'static>,
}

impl Blaze {
    fn load(path: &str) -> Blaze {
        use blazesym::symbolize::{source::Elf, Symbolizer};
        let sym = Symbolizer::builder()
            .enable_code_info(true)
            .enable_inlined_fns(true)
            .enable_demangling(false)
            .set_debug_dirs(None::<&[&str]>)
            .build();
        Blaze {
            sym,
            src: Elf::new(path).into(),
        }
    }
}

fn code(ci: Option<&blazesym::symbolize::CodeInfo<'_>>) -> (String, u32) {
    match ci {
        Some(c) => (c.to_path().display().to_string(), c.line.unwrap_or(0)),
        None => ("??".into(), 0),
    }
}

impl Resolver for Blaze {
    fn frames(&mut self, pc: u64) -> Vec<Frame> {
        use blazesym::symbolize::{Input, Symbolized};
        let Ok(Symbolized::Sym(s)) = self.sym.symbolize_single(&self.src, Input::VirtOffset(pc)) else {
            return Vec::new();
        };
        // blazesym: `inlined` outer to inner; each one's code_info is the
        // location inside it (the innermost's is the pc's), the symbol's
        // is the call site of the first inlined function (or the pc's).
        let mut out = Vec::new();
        for f in s.inlined.iter().rev() {
            let (file, line) = code(f.code_info.as_ref());
            out.push((f.name.to_string(), file, line));
        }
        let (file, line) = code(s.code_info.as_deref());
        out.push((s.name.to_string(), file, line));
        out
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, lib, elf, pcs] = &args[..] else {
        eprintln!("usage: lines-bench <addr2line|blazesym> <elf> <pcs-file>");
        std::process::exit(2);
    };
    let pcs: Vec<u64> = std::fs::read_to_string(pcs)
        .unwrap()
        .lines()
        .filter_map(|l| u64::from_str_radix(l.trim().trim_start_matches("0x"), 16).ok())
        .collect();
    let t0 = Instant::now();
    let mut r: Box<dyn Resolver> = match lib.as_str() {
        "addr2line" => Box::new(Gimli::load(elf)),
        "blazesym" => Box::new(Blaze::load(elf)),
        _ => panic!("unknown library {lib}"),
    };
    r.frames(pcs[0]);
    let load = t0.elapsed();
    let t1 = Instant::now();
    let mut results = Vec::with_capacity(pcs.len());
    for &pc in &pcs {
        results.push(r.frames(pc));
    }
    let cold = t1.elapsed();
    let t2 = Instant::now();
    let mut n = 0usize;
    for &pc in &pcs {
        n += r.frames(pc).len();
    }
    let warm = t2.elapsed();
    let live = LIVE.load(Relaxed);
    let mut out = String::new();
    for (pc, frames) in pcs.iter().zip(&results) {
        writeln!(out, "0x{pc:016x}").unwrap();
        if frames.is_empty() {
            out.push_str("??\n??:0\n");
        }
        for (name, file, line) in frames {
            writeln!(out, "{name}\n{file}:{line}").unwrap();
        }
    }
    print!("{out}");
    eprintln!(
        "{lib}: {} pcs, {n} frames; load+first {:.2} ms; cold {:.2} us/pc; warm {:.2} us/pc; heap live {:.1} MiB, peak {:.1} MiB; VmHWM {:.1} MiB",
        pcs.len(),
        load.as_secs_f64() * 1e3,
        cold.as_secs_f64() * 1e6 / pcs.len() as f64,
        warm.as_secs_f64() * 1e6 / pcs.len() as f64,
        live as f64 / 1048576.0,
        PEAK.load(Relaxed) as f64 / 1048576.0,
        hwm_kib() as f64 / 1024.0
    );
}
