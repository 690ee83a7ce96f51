//! DWARF line info: the source file and line of a code address in an ELF
//! binary, with the functions DWARF says were inlined there as frames of
//! their own (innermost first).
//!
//! The DWARF is looked for in the binary itself, then in a separate debug
//! file: by build id (`<debug root>/.build-id/xx/yyyy.debug`, the build id
//! checked), then by `.gnu_debuglink` (next to the binary, in its `.debug/`
//! directory, or under a debug root; the link's CRC32 checked, and the build
//! id when both files have one). A dwz supplementary file
//! (`.gnu_debugaltlink`) is found the same ways. Compressed sections
//! (SHF_COMPRESSED with zlib or zstd, and the older `.zdebug_*`) are
//! decompressed; the others are read from the mapped file, not copied.
//! Every file is opened through the caller's `open` (the rights of the
//! trace's owner, [`crate::access`]).
//!
//! Lookups are done by the `addr2line` crate (gimli), chosen on measured
//! speed, equal accuracy and its fit with the `object`-based ELF code
//! (BENCHMARKS.md, "DWARF line info"). A binary without DWARF has no
//! lines; an address the line table does not cover has none either: a line
//! is never guessed.

use std::fs::File;
use std::io;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::file_bytes::FileBytes;
use anyhow::{anyhow, Result};
use object::{Object, ObjectSection, ObjectSegment};

/// Where separate debug files are installed by default.
pub const DEBUG_ROOT: &str = "/usr/lib/debug";

/// A source location.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceLine {
    /// The source file's path as DWARF composes it (compilation directory,
    /// include directory, file name).
    pub file: String,
    /// The line (1-based).
    pub line: u32,
}

impl SourceLine {
    /// `file.c:123`: the file's base name and the line, as frames show it.
    pub fn short(&self) -> String {
        let base = self.file.rsplit('/').next().unwrap_or(&self.file);
        format!("{base}:{}", self.line)
    }
}

/// One frame at an address, from DWARF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineFrame {
    /// The function as DWARF names it (its linkage name if it has one, so
    /// C++ and Rust names come mangled), if a function covers the address.
    pub function: Option<String>,
    /// Its source location: for the innermost frame the address's own, for
    /// the others the line of the call that was inlined.
    pub line: Option<SourceLine>,
}

/// The bytes of a DWARF section: a range of a mapped file, or a
/// decompressed copy. Cloning shares them.
#[derive(Debug, Clone)]
struct Bytes {
    buf: Rc<Buf>,
    start: usize,
    len: usize,
}

#[derive(Debug)]
enum Buf {
    File(FileBytes),
    Owned(Vec<u8>),
}

impl Bytes {
    fn empty() -> Bytes {
        Bytes {
            buf: Rc::new(Buf::Owned(Vec::new())),
            start: 0,
            len: 0,
        }
    }
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        let all: &[u8] = match &*self.buf {
            Buf::File(m) => m,
            Buf::Owned(v) => v,
        };
        &all[self.start..self.start + self.len]
    }
}

// SAFETY: the bytes live in the Rc'd buffer (a mapping or a Vec that is
// never changed), so the slice's address stays the same when a `Bytes` is
// moved or cloned.
#[allow(unsafe_code)]
unsafe impl stable_deref_trait::StableDeref for Bytes {}
// SAFETY: as above; clones share the buffer.
#[allow(unsafe_code)]
unsafe impl stable_deref_trait::CloneStableDeref for Bytes {}

/// How gimli reads the sections.
type Reader = gimli::EndianReader<gimli::RunTimeEndian, Bytes>;

/// The DWARF line info of one binary.
pub struct DebugLines {
    ctx: addr2line::Context<Reader>,
    /// The binary's loadable segments: (file offset, file size, address).
    segments: Vec<(u64, u64, u64)>,
    /// The file the DWARF was read from (the binary or its debug file).
    pub source: PathBuf,
}

impl std::fmt::Debug for DebugLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DebugLines").field("source", &self.source).finish()
    }
}

/// How a binary is found for [`DebugLines::load`].
pub struct Binary<'a> {
    /// The binary, open (already checked to be the traced one).
    pub file: &'a File,
    /// Where it was found (under a sysroot, say).
    pub path: &'a Path,
    /// Where the traced process had it: debug roots mirror this path.
    pub recorded: &'a Path,
    /// The build id the trace recorded (empty: none recorded, not checked).
    pub build_id: &'a [u8],
}

/// A mapped ELF file.
struct Mapped {
    map: Rc<Buf>,
    path: PathBuf,
}

impl Mapped {
    fn new(file: &File, path: &Path) -> Result<Mapped> {
        let m = Mapped {
            map: Rc::new(Buf::File(FileBytes::of(file)?)),
            path: path.to_path_buf(),
        };
        m.elf()
            .map_err(|e| anyhow!("{}: not an ELF file: {e}", path.display()))?;
        Ok(m)
    }

    fn data(&self) -> &[u8] {
        match &*self.map {
            Buf::File(m) => m,
            Buf::Owned(v) => v,
        }
    }

    fn elf(&self) -> object::Result<object::File<'_>> {
        object::File::parse(self.data())
    }

    fn build_id(&self) -> Option<Vec<u8>> {
        self.elf().ok()?.build_id().ok().flatten().map(<[u8]>::to_vec)
    }

    /// Whether it holds DWARF (a `.debug_info` with contents, not the
    /// empty NOBITS of a stripped section).
    fn has_dwarf(&self) -> bool {
        self.elf().is_ok_and(|elf| {
            elf.section_by_name(".debug_info")
                .is_some_and(|s| s.size() > 0 && s.file_range().is_some())
        })
    }

    /// A DWARF section's bytes: borrowed from the map, or decompressed
    /// (empty if the file has no such section).
    fn section(&self, name: &str) -> Result<Bytes> {
        let elf = self.elf()?;
        let Some(s) = elf.section_by_name(name) else {
            return Ok(Bytes::empty());
        };
        // NOBITS (a stripped file's placeholder) has no bytes.
        let Some((off, size)) = s.file_range() else {
            return Ok(Bytes::empty());
        };
        let data = s
            .uncompressed_data()
            .map_err(|e| anyhow!("{}: {name}: {e}", self.path.display()))?;
        let base = self.data().as_ptr() as usize;
        Ok(match data {
            // Borrowed bytes of the map: the same range, shared.
            std::borrow::Cow::Borrowed(b) if b.as_ptr() as usize == base + off as usize => Bytes {
                buf: self.map.clone(),
                start: off as usize,
                len: (size as usize).min(b.len()),
            },
            other => {
                let v = other.into_owned();
                let len = v.len();
                Bytes {
                    buf: Rc::new(Buf::Owned(v)),
                    start: 0,
                    len,
                }
            }
        })
    }

    fn endian(&self) -> Result<gimli::RunTimeEndian> {
        Ok(if self.elf()?.is_little_endian() {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        })
    }

    fn dwarf(&self) -> Result<gimli::Dwarf<Reader>> {
        let endian = self.endian()?;
        gimli::Dwarf::load(|id| -> Result<Reader> {
            // Variable locations say nothing of lines: not read.
            if matches!(id, gimli::SectionId::DebugLoc | gimli::SectionId::DebugLocLists) {
                return Ok(Reader::new(Bytes::empty(), endian));
            }
            Ok(Reader::new(self.section(id.name())?, endian))
        })
    }
}

/// The build id's debug file name under a debug root: `.build-id/xx/yyyy.debug`.
pub fn build_id_path(root: &Path, build_id: &[u8]) -> Option<PathBuf> {
    if build_id.len() < 2 {
        return None;
    }
    let hex: String = build_id.iter().map(|b| format!("{b:02x}")).collect();
    Some(
        root.join(".build-id")
            .join(&hex[..2])
            .join(format!("{}.debug", &hex[2..])),
    )
}

/// `root` + `dir` (an absolute directory, made relative to `root`).
fn under(root: &Path, dir: &Path) -> PathBuf {
    root.join(dir.strip_prefix("/").unwrap_or(dir))
}

impl DebugLines {
    /// The DWARF of `binary`: its own, else that of its separate debug file
    /// found by build id or debug link under `debug_roots` (e.g.
    /// [`DEBUG_ROOT`], and the same under a sysroot). Files are opened with
    /// `open`. `Ok(None)`: no DWARF found; `Err`: DWARF found but unreadable.
    pub fn load(
        binary: &Binary<'_>,
        debug_roots: &[PathBuf],
        open: &dyn Fn(&Path) -> io::Result<File>,
    ) -> Result<Option<DebugLines>> {
        let bin = Mapped::new(binary.file, binary.path)?;
        // The file may have changed since it was checked: its lines would be another's.
        if !binary.build_id.is_empty() && bin.build_id().as_deref() != Some(binary.build_id) {
            return Err(anyhow!(
                "{}: not the build id the trace recorded",
                binary.path.display()
            ));
        }
        let elf = bin.elf()?;
        let segments = elf
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        let Some(dwarf_file) = find_debug_file(&bin, binary, debug_roots, open) else {
            return Ok(None);
        };
        let mut dwarf = dwarf_file.dwarf()?;
        if let Some(sup) = find_sup(&dwarf_file, debug_roots, open) {
            let endian = sup.endian()?;
            dwarf.load_sup(|id| -> Result<Reader> { Ok(Reader::new(sup.section(id.name())?, endian)) })?;
        }
        let ctx =
            addr2line::Context::from_dwarf(dwarf).map_err(|e| anyhow!("{}: DWARF: {e}", dwarf_file.path.display()))?;
        Ok(Some(DebugLines {
            ctx,
            segments,
            source: dwarf_file.path,
        }))
    }

    /// The frames at file offset `off` of the binary, innermost first
    /// (several where DWARF records inlining; empty where DWARF has
    /// nothing). `return_address`: `off` is where a call returns to (every
    /// stack frame but the innermost), so the call itself, one byte
    /// before, is looked up.
    pub fn frames_at_offset(&self, off: u64, return_address: bool) -> Vec<LineFrame> {
        let Some(va) = self
            .segments
            .iter()
            .find(|&&(o, size, _)| off >= o && off - o < size)
            .map(|&(o, _, va)| va + (off - o))
        else {
            return Vec::new();
        };
        self.frames(if return_address { va.saturating_sub(1) } else { va })
    }

    /// The frames at virtual address `va`, innermost first.
    pub fn frames(&self, va: u64) -> Vec<LineFrame> {
        let mut out = Vec::new();
        // Split DWARF (.dwo) is not loaded: its units give no frames.
        let Ok(mut it) = self.ctx.find_frames(va).skip_all_loads() else {
            return out;
        };
        while let Ok(Some(f)) = it.next() {
            let function = f
                .function
                .as_ref()
                .and_then(|n| n.raw_name().ok())
                .map(|n| n.into_owned());
            let line = f.location.and_then(|l| match (l.file, l.line) {
                (Some(file), Some(line)) if line > 0 => Some(SourceLine {
                    file: file.to_string(),
                    line,
                }),
                _ => None,
            });
            out.push(LineFrame { function, line });
        }
        out
    }
}

/// The file holding `bin`'s DWARF: itself, or its debug file.
fn find_debug_file(
    bin: &Mapped,
    binary: &Binary<'_>,
    roots: &[PathBuf],
    open: &dyn Fn(&Path) -> io::Result<File>,
) -> Option<Mapped> {
    if bin.has_dwarf() {
        return Some(Mapped {
            map: bin.map.clone(),
            path: bin.path.clone(),
        });
    }
    let id = bin.build_id();
    let load = |p: &Path| -> Option<Mapped> {
        let m = Mapped::new(&open(p).ok()?, p).ok()?;
        m.has_dwarf().then_some(m)
    };
    if let Some(id) = &id {
        for root in roots {
            let Some(p) = build_id_path(root, id) else { continue };
            if let Some(m) = load(&p).filter(|m| m.build_id().as_ref() == Some(id)) {
                return Some(m);
            }
        }
    }
    let elf = bin.elf().ok()?;
    let (name, crc) = elf.gnu_debuglink().ok().flatten()?;
    let name = Path::new(std::str::from_utf8(name).ok()?);
    // A link is a file name; one with directories is not followed.
    if name.components().count() != 1 {
        return None;
    }
    let dir = binary.path.parent()?;
    let recorded_dir = binary.recorded.parent()?;
    let mut candidates = vec![dir.join(name), dir.join(".debug").join(name)];
    candidates.extend(roots.iter().map(|r| under(r, recorded_dir).join(name)));
    candidates.into_iter().filter(|p| p != binary.path).find_map(|p| {
        let m = load(&p)?;
        let same_id = match (&id, m.build_id()) {
            (Some(a), Some(b)) => *a == b,
            _ => true,
        };
        (same_id && crc32fast::hash(m.data()) == crc).then_some(m)
    })
}

/// The dwz supplementary file of `dwarf` (`.gnu_debugaltlink`), found by
/// its build id under the debug roots or at its recorded path (absolute,
/// or relative to the debug file), its build id checked.
fn find_sup(dwarf: &Mapped, roots: &[PathBuf], open: &dyn Fn(&Path) -> io::Result<File>) -> Option<Mapped> {
    let elf = dwarf.elf().ok()?;
    let (name, id) = elf.gnu_debugaltlink().ok().flatten()?;
    let name = Path::new(std::str::from_utf8(name).ok()?);
    let mut candidates: Vec<PathBuf> = roots.iter().filter_map(|r| build_id_path(r, id)).collect();
    candidates.push(match dwarf.path.parent() {
        Some(dir) if name.is_relative() => dir.join(name),
        _ => name.to_path_buf(),
    });
    candidates.into_iter().find_map(|p| {
        let m = Mapped::new(&open(&p).ok()?, &p).ok()?;
        (m.build_id().as_deref() == Some(id)).then_some(m)
    })
}
