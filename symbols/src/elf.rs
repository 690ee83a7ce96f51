//! ELF files: their GNU build id, their function symbols (`.symtab`,
//! `.dynsym`, and the `.symtab` of `.gnu_debugdata`, the xz-compressed
//! "MiniDebugInfo" some distributions ship instead of a full one), and
//! file offsets of named functions (what uprobes are placed by). Build ids
//! and function offsets, which the recording commands look up as root in
//! files users control, are read within the bounds of
//! [`crate::bounded_read`].

use std::fs::File;
use std::path::Path;

use crate::bounded_read::{open_regular, BoundedRead, Refused};
use crate::file_bytes::FileBytes;
use anyhow::{anyhow, bail, Result};
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, ReadRef, SymbolFlags};

const STT_FUNC: u8 = 2;
const STT_GNU_IFUNC: u8 = 10;

/// The GNU build id of the ELF image `data`, if it has one.
pub fn build_id_of(data: &[u8]) -> Option<Vec<u8>> {
    let elf = object::File::parse(data).ok()?;
    elf.build_id().ok().flatten().map(<[u8]>::to_vec)
}

/// The GNU build id of the ELF file at `path` (`Ok(None)`: it has none).
pub fn build_id(path: &Path) -> Result<Option<Vec<u8>>> {
    let file = open_regular(path).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    build_id_in(&file, path)
}

/// The GNU build id of the open ELF file `file` (named `name` in errors):
/// its headers and notes are read, within the bounds of
/// [`crate::bounded_read`], nothing else.
pub fn build_id_in(file: &File, name: &Path) -> Result<Option<Vec<u8>>> {
    let data = BoundedRead::new(file).map_err(|e| anyhow!("{}: {e}", name.display()))?;
    let found = match object::FileKind::parse(&data) {
        Ok(object::FileKind::Elf32) => gnu_build_id::<object::elf::FileHeader32<object::Endianness>>(&data),
        Ok(object::FileKind::Elf64) => gnu_build_id::<object::elf::FileHeader64<object::Endianness>>(&data),
        Ok(kind) => bail!("{}: not an ELF file ({kind:?})", name.display()),
        Err(e) => Err(e),
    };
    match found {
        Ok(id) => Ok(id),
        Err(_) if data.exceeded() => bail!("{}: {}", name.display(), Refused::TooMuchToRead),
        Err(e) => bail!("{}: not an ELF file: {e}", name.display()),
    }
}

/// The GNU build id in the notes of an ELF file of class `Elf`: in its
/// note sections, or without sections in its note segments (as object's
/// `build_id`, without reading the symbol tables as its parse does).
fn gnu_build_id<Elf: FileHeader<Endian = object::Endianness>>(
    data: &BoundedRead<'_>,
) -> object::read::Result<Option<Vec<u8>>> {
    let header = Elf::parse(data)?;
    let endian = header.endian()?;
    let is_build_id =
        |name: &[u8], kind: u32| name == object::elf::ELF_NOTE_GNU && kind == object::elf::NT_GNU_BUILD_ID;
    let sections = header.section_headers(endian, data)?;
    if !sections.is_empty() {
        for section in sections {
            if let Some(mut notes) = section.notes(endian, data)? {
                while let Some(note) = notes.next()? {
                    if is_build_id(note.name(), note.n_type(endian)) {
                        return Ok(Some(note.desc().to_vec()));
                    }
                }
            }
        }
    } else {
        for segment in header.program_headers(endian, data)? {
            if let Some(mut notes) = segment.notes(endian, data)? {
                while let Some(note) = notes.next()? {
                    if is_build_id(note.name(), note.n_type(endian)) {
                        return Ok(Some(note.desc().to_vec()));
                    }
                }
            }
        }
    }
    Ok(None)
}

/// How a name is defined in an ELF file ([`lookup_functions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sym {
    /// A function, at this file offset.
    Function(u64),
    /// A GNU indirect function: its address is chosen at load time.
    Ifunc,
    /// Defined, but not a function.
    NotFunction,
    /// Not defined.
    Missing,
}

/// How each of `names` is defined in the ELF file at `path`: looked up in
/// its `.dynsym` and `.symtab` (defined symbols only; local ones count, so
/// that HotSpot's internal functions can be probed), in one pass. Functions
/// come with their file offset, found through the loadable segment that
/// maps their address (what the kernel's uprobes are placed by).
pub fn lookup_functions(path: &Path, names: &[&str]) -> Result<Vec<Sym>> {
    let file = open_regular(path).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    lookup_functions_in(&file, path, names)
}

/// [`lookup_functions`] in the open file `file` (named `name` in errors):
/// its headers and symbol tables are read, within the bounds of
/// [`crate::bounded_read`] (past them, an error that says so), nothing else.
pub fn lookup_functions_in(file: &File, name: &Path, names: &[&str]) -> Result<Vec<Sym>> {
    let data = BoundedRead::new(file).map_err(|e| anyhow!("{}: {e}", name.display()))?;
    let too_much = || anyhow!("{}: {}", name.display(), Refused::TooMuchToRead);
    let elf = match object::File::parse(&data) {
        Ok(elf) => elf,
        Err(_) if data.exceeded() => return Err(too_much()),
        Err(e) => bail!("{}: not an ELF file: {e}", name.display()),
    };
    // The names, read at once rather than one by one.
    for table in [".dynstr", ".strtab"] {
        if let Some((off, size)) = elf.section_by_name(table).and_then(|s| s.file_range()) {
            data.preload(off..off.saturating_add(size));
        }
    }
    let path = name;
    let file_offset = |addr: u64| {
        elf.segments().find_map(|seg| {
            let (off, size) = seg.file_range();
            let start = seg.address();
            (addr >= start && addr - start < size).then(|| off + (addr - start))
        })
    };
    let mut out = vec![Sym::Missing; names.len()];
    for sym in elf.dynamic_symbols().chain(elf.symbols()) {
        // A function found stays found: nothing left to look for.
        if out.iter().all(|s| matches!(s, Sym::Function(_))) {
            break;
        }
        if sym.is_undefined() {
            continue;
        }
        // Bytes, not `name()`: libjvm has 100 000 symbols, and checking each
        // name's UTF-8 cost more than the comparisons.
        let Ok(name) = sym.name_bytes() else { continue };
        let SymbolFlags::Elf { st_info, .. } = sym.flags() else {
            continue;
        };
        for (i, _) in names.iter().enumerate().filter(|(_, n)| n.as_bytes() == name) {
            let name = String::from_utf8_lossy(name);
            out[i] = match (st_info & 0xf, out[i]) {
                (_, Sym::Function(off)) => Sym::Function(off),
                (STT_FUNC, _) => match file_offset(sym.address()) {
                    Some(off) => Sym::Function(off),
                    None => bail!(
                        "{}: function {name} at {:#x} is in no loadable segment",
                        path.display(),
                        sym.address()
                    ),
                },
                (STT_GNU_IFUNC, _) => Sym::Ifunc,
                (_, Sym::Missing) => Sym::NotFunction,
                (_, was) => was,
            };
        }
    }
    // A name that could not be read for the bound is not "missing".
    if data.exceeded() {
        return Err(too_much());
    }
    Ok(out)
}

/// A function symbol: its address range and its (raw, mangled) name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FuncSym {
    start: u64,
    size: u64,
    name: String,
}

/// The function symbols of one ELF file, to name a file offset.
#[derive(Debug, Clone, Default)]
pub struct SymbolTable {
    /// Sorted by start.
    syms: Vec<FuncSym>,
    /// The PLT sections' (start, size): stubs no symbol covers, named
    /// [`PLT`]. Kept apart, so that a stripped file still counts as one.
    plt: Vec<(u64, u64)>,
    /// Loadable segments: (file offset, file size, virtual address).
    segments: Vec<(u64, u64, u64)>,
    /// The file's build id.
    pub build_id: Option<Vec<u8>>,
}

impl SymbolTable {
    /// Reads the function symbols of the ELF file at `path`.
    pub fn load(path: &Path) -> Result<SymbolTable> {
        let file = open_regular(path).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        SymbolTable::load_file(&file, path)
    }

    /// Reads the function symbols of the open ELF file `file` (named `name`
    /// in errors): a regular file of at most
    /// [`crate::bounded_read::MAX_ELF_FILE`] bytes, mapped
    /// if only root can change it, else its headers and symbol tables read
    /// within the bounds of [`crate::bounded_read`] ([`FileBytes`]).
    pub fn load_file(file: &File, name: &Path) -> Result<SymbolTable> {
        let named = |e: &dyn std::fmt::Display| anyhow!("{}: {e}", name.display());
        match FileBytes::of(file).map_err(|e| named(&e))? {
            FileBytes::Mapped(map) => SymbolTable::parse(&map).map_err(|e| named(&e)),
            FileBytes::Unmapped(file, _) => {
                let data = BoundedRead::new(&file).map_err(|e| named(&e))?;
                let elf = match object::File::parse(&data) {
                    Ok(elf) => elf,
                    Err(_) if data.exceeded() => return Err(named(&Refused::TooMuchToRead)),
                    Err(e) => return Err(named(&format!("not an ELF file: {e}"))),
                };
                // The names, read at once rather than one by one.
                for table in [".dynstr", ".strtab"] {
                    if let Some((off, size)) = elf.section_by_name(table).and_then(|s| s.file_range()) {
                        data.preload(off..off.saturating_add(size));
                    }
                }
                let t = SymbolTable::of_elf(&elf);
                // Tables cut short by the bound would name frames wrongly.
                match data.exceeded() {
                    true => Err(named(&Refused::TooMuchToRead)),
                    false => Ok(t),
                }
            }
        }
    }

    /// Reads the function symbols of the ELF image `data`.
    pub fn parse(data: &[u8]) -> Result<SymbolTable> {
        let elf = object::File::parse(data).map_err(|e| anyhow!("not an ELF file: {e}"))?;
        Ok(SymbolTable::of_elf(&elf))
    }

    /// The function symbols of the parsed ELF file `elf`.
    fn of_elf<'d, R: ReadRef<'d>>(elf: &object::File<'d, R>) -> SymbolTable {
        let mut t = SymbolTable {
            build_id: elf.build_id().ok().flatten().map(<[u8]>::to_vec),
            ..Default::default()
        };
        for seg in elf.segments() {
            let (off, size) = seg.file_range();
            t.segments.push((off, size, seg.address()));
        }
        add_functions(elf, &mut t.syms);
        t.plt = plt_sections(elf);
        // MiniDebugInfo: an xz-compressed ELF whose .symtab has the local
        // functions the stripped file lost.
        if let Some(sec) = elf.section_by_name(".gnu_debugdata") {
            if let Some(out) = sec.data().ok().and_then(unxz) {
                if let Ok(mini) = object::File::parse(&*out) {
                    add_functions(&mini, &mut t.syms);
                }
            }
        }
        t.syms.sort_by(|a, b| a.start.cmp(&b.start).then(b.size.cmp(&a.size)));
        t.syms.dedup_by_key(|s| s.start);
        t
    }

    /// Adds the function symbols of `debug`, the file's separate debug
    /// file (the same build, so the same addresses), that it lacks: a
    /// distribution's libraries keep only their exported functions
    /// (`.dynsym`), their debug files have all of them (`.symtab`).
    pub fn add_debug_symbols(&mut self, debug: SymbolTable) {
        if debug.syms.is_empty() {
            return;
        }
        self.syms.extend(debug.syms);
        self.syms
            .sort_by(|a, b| a.start.cmp(&b.start).then(b.size.cmp(&a.size)));
        self.syms.dedup_by_key(|s| s.start);
    }

    /// Number of function symbols (0: a stripped file).
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// Whether the file has no function symbols (stripped).
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The virtual address of file offset `off`, through the loadable
    /// segment that holds it.
    pub fn vaddr_of_offset(&self, off: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(o, size, _)| off >= o && off - o < size)
            .map(|&(o, _, va)| va + (off - o))
    }

    /// The function at virtual address `addr` and the offset into it: only
    /// inside a symbol's extent (a symbol without a size counts up to the
    /// next one), never the nearest one below.
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        if let Some(&(start, _)) = self
            .plt
            .iter()
            .find(|&&(start, size)| addr >= start && addr - start < size)
        {
            return Some((PLT, addr - start));
        }
        let i = self.syms.partition_point(|s| s.start <= addr).checked_sub(1)?;
        let s = &self.syms[i];
        let end = if s.size > 0 {
            s.start + s.size
        } else {
            self.syms.get(i + 1).map_or(s.start + 1, |n| n.start)
        };
        (addr < end).then(|| (s.name.as_str(), addr - s.start))
    }
}

/// Name of the procedure linkage table's stubs, which no symbol covers
/// (as perf names their entries `…@plt`).
pub const PLT: &str = "@plt";

/// The PLT sections' (start, size): a thread preempted in a stub (a call
/// on its way through it) then has its frame named.
fn plt_sections<'d, R: ReadRef<'d>>(elf: &object::File<'d, R>) -> Vec<(u64, u64)> {
    [".plt", ".plt.sec", ".plt.got"]
        .iter()
        .filter_map(|name| elf.section_by_name(name))
        .filter(|s| s.size() > 0 && s.address() > 0)
        .map(|s| (s.address(), s.size()))
        .collect()
}

fn add_functions<'d, R: ReadRef<'d>>(elf: &object::File<'d, R>, out: &mut Vec<FuncSym>) {
    for sym in elf.symbols().chain(elf.dynamic_symbols()) {
        if sym.is_undefined() || sym.address() == 0 {
            continue;
        }
        let SymbolFlags::Elf { st_info, .. } = sym.flags() else {
            continue;
        };
        if !matches!(st_info & 0xf, STT_FUNC | STT_GNU_IFUNC) {
            continue;
        }
        if let Ok(name) = sym.name() {
            out.push(FuncSym {
                start: sym.address(),
                size: sym.size(),
                name: name.to_string(),
            });
        }
    }
}

/// The most bytes a `.gnu_debugdata` decompresses to: 64 MiB (a
/// distribution's are a few MiB; libjvm's would be 2 MiB).
const MAX_MINI_DEBUG_INFO: u64 = 64 << 20;

/// The xz-compressed `data` decompressed, if it is at most
/// [`MAX_MINI_DEBUG_INFO`] bytes (an xz bomb in a user's binary costs
/// no more).
fn unxz(data: &[u8]) -> Option<Vec<u8>> {
    // The decoder's window grows with what it wrote: bounded too.
    let mut out = Capped(Vec::new());
    lzma_rs::xz_decompress(&mut std::io::Cursor::new(data), &mut out).ok()?;
    Some(out.0)
}

/// A buffer that refuses to grow past [`MAX_MINI_DEBUG_INFO`].
struct Capped(Vec<u8>);

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.len() as u64 + buf.len() as u64 > MAX_MINI_DEBUG_INFO {
            return Err(std::io::Error::other("MiniDebugInfo larger than jtrace reads"));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `name` demangled if it is a Rust name (without its hash) or a C++
/// (Itanium ABI) name, as async-profiler and perf show them
/// (`ObjectMonitor::enter(JavaThread*)`), else as is.
pub fn demangle(name: &str) -> String {
    // Rust's own manglings first (legacy `_ZN…17h<hash>E` is valid C++
    // mangling too, which would keep the hash): named without the hash.
    if let Ok(sym) = rustc_demangle::try_demangle(name) {
        return format!("{sym:#}");
    }
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            let opts = cpp_demangle::DemangleOptions::new().no_return_type();
            if let Ok(s) = sym.demangle(&opts) {
                return s;
            }
        }
    }
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn libc() -> std::path::PathBuf {
        ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"]
            .iter()
            .map(std::path::PathBuf::from)
            .find(|p| p.is_file())
            .expect("libc.so.6")
    }

    /// libc exports its public functions (`.dynsym`); the others, such as
    /// the futex wait every blocked thread sits in, are only in its debug
    /// file's `.symtab` (libc6-dbg, which scripts/setup.sh installs).
    #[test]
    fn a_debug_files_symbols_name_what_the_library_does_not_export() {
        let lib = SymbolTable::load(&libc()).unwrap();
        let id = lib.build_id.clone().expect("libc has a build id");
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let debug_path = format!("/usr/lib/debug/.build-id/{}/{}.debug", &hex[..2], &hex[2..]);
        let debug = SymbolTable::load(Path::new(&debug_path)).expect("libc6-dbg's debug file of this libc");
        assert_eq!(debug.build_id, lib.build_id);
        const WAIT: &str = "__futex_abstimed_wait_common";
        let wait = debug
            .syms
            .iter()
            .find(|s| s.name == WAIT)
            .expect("in the debug file")
            .clone();
        assert!(wait.size > 1);
        let inside = wait.start + wait.size / 2;
        assert_ne!(lib.lookup(inside).map(|(n, _)| n), Some(WAIT), "libc exports it?");
        // What libc exports is still named (by one of its aliases).
        let exported: Vec<u64> = lib.syms.iter().filter(|s| s.size > 0).map(|s| s.start).collect();
        assert!(exported.len() > 1000);
        let mut both = lib;
        both.add_debug_symbols(debug);
        assert_eq!(both.lookup(inside), Some((WAIT, wait.size / 2)));
        assert!(exported
            .iter()
            .all(|&a| both.lookup(a).is_some_and(|(_, off)| off == 0)));
    }

    #[test]
    fn rust_and_cpp_names_are_demangled() {
        assert_eq!(
            demangle("_ZN12jtrace_agent11stream_file6grower17h1411f2802439ce8aE"),
            "jtrace_agent::stream_file::grower"
        );
        assert_eq!(demangle("_ZN6Thread8call_runEv"), "Thread::call_run()");
        assert_eq!(demangle("clock_nanosleep"), "clock_nanosleep");
    }

    #[test]
    fn names_libc_functions_by_offset_and_only_inside_them() {
        let path = libc();
        let t = SymbolTable::load(&path).unwrap();
        assert!(t.len() > 1000, "{}", t.len());
        assert!(t.build_id.as_ref().is_some_and(|b| b.len() == 20));
        let Sym::Function(off) = lookup_functions(&path, &["getpid"]).unwrap()[0] else {
            panic!("getpid is a function")
        };
        let va = t.vaddr_of_offset(off).unwrap();
        let (name, into) = t.lookup(va + 1).unwrap();
        assert!(name.contains("getpid"), "{name}");
        assert_eq!(into, 1);
        assert_eq!(build_id(&path).unwrap(), t.build_id);
    }

    /// A preemption inside a PLT stub (seen in CI: libc's `.plt`) is named.
    #[test]
    fn plt_stubs_are_named() {
        let path = libc();
        let data = std::fs::read(&path).unwrap();
        let elf = object::File::parse(&*data).unwrap();
        let plt = elf.section_by_name(".plt").expect("libc has a .plt");
        let t = SymbolTable::load(&path).unwrap();
        assert_eq!(t.lookup(plt.address() + 0x10), Some((PLT, 0x10)));
        assert_eq!(t.lookup(plt.address() + plt.size() - 1).map(|(n, _)| n), Some(PLT));
        // A stripped file with a PLT still counts as stripped.
        let empty = SymbolTable {
            plt: t.plt.clone(),
            ..Default::default()
        };
        assert!(empty.is_empty() && empty.lookup(plt.address()).is_some());
    }

    /// A copy of libc grown to 1 GiB (sparse) is looked up reading only
    /// its tables; one whose `.dynsym` the headers make larger than
    /// MAX_ELF_READ is refused with a message that says so.
    #[test]
    fn only_the_tables_are_read_and_within_the_bound() {
        use crate::bounded_read::MAX_ELF_READ;
        use std::os::unix::fs::FileExt;
        let p = std::env::temp_dir().join(format!("jtrace-sym-grown-{}", std::process::id()));
        std::fs::copy(libc(), &p).unwrap();
        let f = std::fs::OpenOptions::new().read(true).write(true).open(&p).unwrap();
        f.set_len(1 << 30).unwrap();
        let found = lookup_functions(&p, &["getpid"]).unwrap();
        assert_eq!(found, lookup_functions(&libc(), &["getpid"]).unwrap());
        assert_eq!(build_id(&p).unwrap(), build_id(&libc()).unwrap());
        // The .dynsym section's size (sh_size, at 0x20 in its header).
        let mut h = [0u8; 64];
        f.read_exact_at(&mut h, 0).unwrap();
        let shoff = u64::from_le_bytes(h[0x28..0x30].try_into().unwrap());
        let (entsize, count) = (
            u64::from(u16::from_le_bytes([h[0x3a], h[0x3b]])),
            u64::from(u16::from_le_bytes([h[0x3c], h[0x3d]])),
        );
        let dynsym = (0..count)
            .map(|i| shoff + i * entsize)
            .find(|&at| {
                let mut t = [0u8; 4];
                f.read_exact_at(&mut t, at + 4).unwrap();
                u32::from_le_bytes(t) == 11
            })
            .expect("libc has a .dynsym");
        f.write_all_at(&(MAX_ELF_READ + 24).to_le_bytes(), dynsym + 0x20)
            .unwrap();
        let e = lookup_functions(&p, &["getpid"]).unwrap_err().to_string();
        assert!(
            e.contains("take more than the 128 MiB jtrace reads of an ELF file"),
            "{e}"
        );
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn a_file_that_is_not_elf_is_an_error() {
        let p = std::env::temp_dir().join(format!("jtrace-sym-notelf-{}", std::process::id()));
        std::fs::write(&p, b"not an elf").unwrap();
        assert!(SymbolTable::load(&p).is_err());
        assert!(build_id(&p).is_err());
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn demangles_cpp_names_only() {
        assert_eq!(
            demangle("_ZN13ObjectMonitor5enterEP10JavaThread"),
            "ObjectMonitor::enter(JavaThread*)"
        );
        assert_eq!(demangle("read"), "read");
    }
}
