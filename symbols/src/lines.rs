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
//! decompressed. Every file is opened through the caller's `open` (the
//! rights of the trace's viewer, [`crate::access`]), and read only if it
//! is a regular file of at most [`crate::bounded_read::MAX_ELF_FILE`]
//! bytes: mapped if only root can change it, else its headers read within
//! the bounds of [`crate::bounded_read`] and its DWARF sections with
//! `pread`, never the whole file. What is copied into memory (sections
//! read, sections decompressed) comes out of one [`ReadBudget`] per view.
//!
//! Lookups are done by the `addr2line` crate (gimli), chosen on measured
//! speed, equal accuracy and its fit with the `object`-based ELF code
//! (BENCHMARKS.md, "DWARF line info"). A binary without DWARF has no
//! lines; an address the line table does not cover has none either: a line
//! is never guessed.

use std::cell::Cell;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::ops::Deref;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::bounded_read::{BoundedRead, Refused};
use crate::file_bytes::FileBytes;
use anyhow::{anyhow, bail, Result};
use object::{CompressedFileRange, CompressionFormat, Object, ObjectSection, ObjectSegment, ReadRef};

/// Where separate debug files are installed by default.
pub const DEBUG_ROOT: &str = "/usr/lib/debug";

/// The most bytes of DWARF read into memory for one view, over every file
/// ([`ReadBudget`]): 1 GiB. What is copied counts (the sections of a file
/// that is not mapped, decompressed sections); what is mapped does not.
/// A `libjvm.so`'s full DWARF is a few hundred MB; a hostile trace naming
/// many sparse files that claim large sections costs root no more.
pub const MAX_DWARF_READ: u64 = 1 << 30;

/// What may still be read into memory of DWARF: one budget shared by every
/// file a view reads lines from. Cloning shares it.
#[derive(Debug, Clone)]
pub struct ReadBudget(Rc<Cell<u64>>);

impl ReadBudget {
    /// A budget of `bytes`.
    pub fn new(bytes: u64) -> ReadBudget {
        ReadBudget(Rc::new(Cell::new(bytes)))
    }

    /// Bytes left.
    pub fn left(&self) -> u64 {
        self.0.get()
    }

    /// Takes `n` bytes for `what`, or says that the budget is spent.
    fn take(&self, n: u64, what: &str) -> Result<()> {
        let left = self.0.get();
        if n > left {
            bail!(
                "{what}: {n} bytes, more than the {left} left of the {} MiB of DWARF jtrace reads for a view",
                MAX_DWARF_READ >> 20
            );
        }
        self.0.set(left - n);
        Ok(())
    }
}

impl Default for ReadBudget {
    fn default() -> ReadBudget {
        ReadBudget::new(MAX_DWARF_READ)
    }
}

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

/// The bytes of a DWARF section: a range of a mapped file, or a copy
/// (read, or decompressed). Cloning shares them.
#[derive(Debug, Clone)]
struct Bytes {
    buf: Rc<Buf>,
    start: usize,
    len: usize,
}

#[derive(Debug)]
enum Buf {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Bytes {
    fn empty() -> Bytes {
        Bytes::owned(Vec::new())
    }

    fn owned(v: Vec<u8>) -> Bytes {
        let len = v.len();
        Bytes {
            buf: Rc::new(Buf::Owned(v)),
            start: 0,
            len,
        }
    }
}

impl Deref for Buf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Buf::Map(m) => m,
            Buf::Owned(v) => v,
        }
    }
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
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

/// How an ELF file's bytes are had.
enum Content {
    /// The whole file, mapped ([`FileBytes::Mapped`]).
    Mapped(Rc<Buf>),
    /// Read in parts with `pread` ([`FileBytes::Unmapped`]).
    Read(File),
}

/// What lines need of an ELF file's headers, read once.
struct ElfInfo {
    build_id: Option<Vec<u8>>,
    little_endian: bool,
    /// Loadable segments: (file offset, file size, address).
    segments: Vec<(u64, u64, u64)>,
    /// `.gnu_debuglink`: the debug file's name and its CRC32.
    debuglink: Option<(Vec<u8>, u32)>,
    /// `.gnu_debugaltlink`: the dwz file's name and its build id.
    altlink: Option<(Vec<u8>, Vec<u8>)>,
    /// The DWARF sections by `.debug_*` name (`.zdebug_*` under it): where
    /// in the file, and compressed how.
    sections: HashMap<String, CompressedFileRange>,
}

impl ElfInfo {
    /// What lines need of the ELF file `data` (its bytes, or bounded reads).
    fn of<'d, R: ReadRef<'d>>(data: R) -> object::Result<ElfInfo> {
        let elf = object::File::parse(data)?;
        let mut sections = HashMap::new();
        for s in elf.sections() {
            let Ok(name) = s.name() else { continue };
            let key = match name.strip_prefix(".zdebug_") {
                Some(rest) => format!(".debug_{rest}"),
                None if name.starts_with(".debug_") => name.to_string(),
                None => continue,
            };
            if let Ok(range) = s.compressed_file_range() {
                // The plain section wins over an old-style compressed copy.
                if name.starts_with(".debug_") || !sections.contains_key(&key) {
                    sections.insert(key, range);
                }
            }
        }
        let owned = |(a, b): (&[u8], &[u8])| (a.to_vec(), b.to_vec());
        Ok(ElfInfo {
            build_id: elf.build_id().ok().flatten().map(<[u8]>::to_vec),
            little_endian: elf.is_little_endian(),
            segments: elf
                .segments()
                .map(|s| {
                    let (off, size) = s.file_range();
                    (off, size, s.address())
                })
                .collect(),
            debuglink: elf.gnu_debuglink().ok().flatten().map(|(n, crc)| (n.to_vec(), crc)),
            altlink: elf.gnu_debugaltlink().ok().flatten().map(owned),
            sections,
        })
    }
}

/// An ELF file lines are read from: a regular file of at most
/// [`crate::bounded_read::MAX_ELF_FILE`] bytes, its headers read within
/// the bounds of [`crate::bounded_read`], its DWARF sections taken from
/// the map or read (within a [`ReadBudget`]) as they are asked for.
struct ElfImage {
    path: PathBuf,
    content: Content,
    len: u64,
    info: ElfInfo,
}

impl ElfImage {
    fn new(file: &File, path: &Path) -> Result<ElfImage> {
        let named = |e: &dyn std::fmt::Display| anyhow!("{}: {e}", path.display());
        let bytes = FileBytes::of(file).map_err(|e| named(&e))?;
        let len = bytes.len();
        let (content, info) = match bytes {
            FileBytes::Mapped(m) => {
                let info = ElfInfo::of(&*m);
                (Content::Mapped(Rc::new(Buf::Map(m))), info)
            }
            FileBytes::Unmapped(f, _) => {
                let data = BoundedRead::new(&f).map_err(|e| named(&e))?;
                let info = ElfInfo::of(&data);
                if data.exceeded() {
                    return Err(named(&Refused::TooMuchToRead));
                }
                (Content::Read(f), info)
            }
        };
        let info = info.map_err(|e| named(&format!("not an ELF file: {e}")))?;
        Ok(ElfImage {
            path: path.to_path_buf(),
            content,
            len,
            info,
        })
    }

    /// Whether it holds DWARF (a `.debug_info` with contents, not the
    /// empty NOBITS of a stripped section).
    fn has_dwarf(&self) -> bool {
        self.info
            .sections
            .get(".debug_info")
            .is_some_and(|r| r.compressed_size > 0)
    }

    /// The CRC32 of the whole file (what `.gnu_debuglink` checks), read
    /// in bounded parts if it is not mapped.
    fn crc32(&self) -> io::Result<u32> {
        let file = match &self.content {
            Content::Mapped(m) => return Ok(crc32fast::hash(m)),
            Content::Read(f) => f,
        };
        let mut hasher = crc32fast::Hasher::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut at = 0;
        while at < self.len {
            let want = (self.len - at).min(buf.len() as u64) as usize;
            match file.read_at(&mut buf[..want], at)? {
                0 => break, // shortened since: its CRC is not the link's
                n => {
                    hasher.update(&buf[..n]);
                    at += n as u64;
                }
            }
        }
        Ok(hasher.finalize())
    }

    /// A DWARF section's bytes: borrowed from the map, or read and
    /// decompressed within `budget` (empty if the file has no such
    /// section).
    fn section(&self, name: &str, budget: &ReadBudget) -> Result<Bytes> {
        let Some(r) = self.info.sections.get(name).filter(|r| r.compressed_size > 0) else {
            return Ok(Bytes::empty());
        };
        let what = format!("{}: {name}", self.path.display());
        if r.offset.checked_add(r.compressed_size).is_none_or(|end| end > self.len) {
            bail!("{what}: past the end of the file");
        }
        let raw = match &self.content {
            Content::Mapped(m) => Bytes {
                buf: m.clone(),
                start: r.offset as usize,
                len: r.compressed_size as usize,
            },
            Content::Read(f) => {
                budget.take(r.compressed_size, &what)?;
                let mut v = vec![0u8; r.compressed_size as usize];
                f.read_exact_at(&mut v, r.offset).map_err(|e| anyhow!("{what}: {e}"))?;
                Bytes::owned(v)
            }
        };
        match r.format {
            CompressionFormat::None => Ok(raw),
            CompressionFormat::Zlib | CompressionFormat::Zstandard => {
                budget.take(r.uncompressed_size, &what)?;
                let v = decompress(r.format, &raw, r.uncompressed_size).map_err(|e| anyhow!("{what}: {e}"))?;
                Ok(Bytes::owned(v))
            }
            _ => bail!("{what}: compressed in a format jtrace does not read"),
        }
    }

    fn endian(&self) -> gimli::RunTimeEndian {
        match self.info.little_endian {
            true => gimli::RunTimeEndian::Little,
            false => gimli::RunTimeEndian::Big,
        }
    }

    fn dwarf(&self, budget: &ReadBudget) -> Result<gimli::Dwarf<Reader>> {
        let endian = self.endian();
        gimli::Dwarf::load(|id| -> Result<Reader> {
            // Variable locations say nothing of lines: not read.
            if matches!(id, gimli::SectionId::DebugLoc | gimli::SectionId::DebugLocLists) {
                return Ok(Reader::new(Bytes::empty(), endian));
            }
            Ok(Reader::new(self.section(id.name(), budget)?, endian))
        })
    }
}

/// `data` compressed with `format`, decompressed to exactly `size` bytes:
/// at most one byte more is written (a section that says less than it
/// holds is an error, not a larger buffer).
fn decompress(format: CompressionFormat, data: &[u8], size: u64) -> Result<Vec<u8>> {
    let size = usize::try_from(size)?;
    let mut out = Vec::new();
    out.try_reserve_exact(size + 1)?;
    match format {
        CompressionFormat::Zlib => {
            // Writes only into the capacity reserved.
            let status =
                flate2::Decompress::new(true).decompress_vec(data, &mut out, flate2::FlushDecompress::Finish)?;
            if status != flate2::Status::StreamEnd {
                bail!("the compressed data does not end where its header says");
            }
        }
        _ => {
            let mut input = data;
            while !input.is_empty() && out.len() <= size {
                let mut frame = ruzstd::StreamingDecoder::new(&mut input).map_err(|e| anyhow!("zstd: {e}"))?;
                let room = (size - out.len()) as u64 + 1;
                (&mut frame).take(room).read_to_end(&mut out)?;
            }
        }
    }
    if out.len() != size {
        bail!("the compressed data does not hold the size its header says");
    }
    Ok(out)
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
    /// `open`; what is copied into memory is taken from `budget`.
    /// `Ok(None)`: no DWARF found; `Err`: DWARF found but unreadable.
    pub fn load(
        binary: &Binary<'_>,
        debug_roots: &[PathBuf],
        open: &dyn Fn(&Path) -> io::Result<File>,
        budget: &ReadBudget,
    ) -> Result<Option<DebugLines>> {
        let bin = Rc::new(ElfImage::new(binary.file, binary.path)?);
        // The file may have changed since it was checked: its lines would be another's.
        if !binary.build_id.is_empty() && bin.info.build_id.as_deref() != Some(binary.build_id) {
            return Err(anyhow!(
                "{}: not the build id the trace recorded",
                binary.path.display()
            ));
        }
        let Some(dwarf_file) = find_debug_file(&bin, binary, debug_roots, open) else {
            return Ok(None);
        };
        let mut dwarf = dwarf_file.dwarf(budget)?;
        if let Some(sup) = find_sup(&dwarf_file, debug_roots, open) {
            let endian = sup.endian();
            dwarf.load_sup(|id| -> Result<Reader> { Ok(Reader::new(sup.section(id.name(), budget)?, endian)) })?;
        }
        let ctx =
            addr2line::Context::from_dwarf(dwarf).map_err(|e| anyhow!("{}: DWARF: {e}", dwarf_file.path.display()))?;
        Ok(Some(DebugLines {
            ctx,
            segments: bin.info.segments.clone(),
            source: dwarf_file.path.clone(),
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
    bin: &Rc<ElfImage>,
    binary: &Binary<'_>,
    roots: &[PathBuf],
    open: &dyn Fn(&Path) -> io::Result<File>,
) -> Option<Rc<ElfImage>> {
    if bin.has_dwarf() {
        return Some(bin.clone());
    }
    let id = &bin.info.build_id;
    let load = |p: &Path| -> Option<Rc<ElfImage>> {
        let m = ElfImage::new(&open(p).ok()?, p).ok()?;
        m.has_dwarf().then(|| Rc::new(m))
    };
    if let Some(id) = id {
        for root in roots {
            let Some(p) = build_id_path(root, id) else { continue };
            if let Some(m) = load(&p).filter(|m| m.info.build_id.as_ref() == Some(id)) {
                return Some(m);
            }
        }
    }
    let (name, crc) = bin.info.debuglink.as_ref()?;
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
        let same_id = match (id, &m.info.build_id) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        (same_id && m.crc32().ok()? == *crc).then_some(m)
    })
}

/// The dwz supplementary file of `dwarf` (`.gnu_debugaltlink`), found by
/// its build id under the debug roots or at its recorded path (absolute,
/// or relative to the debug file), its build id checked.
fn find_sup(dwarf: &ElfImage, roots: &[PathBuf], open: &dyn Fn(&Path) -> io::Result<File>) -> Option<ElfImage> {
    let (name, id) = dwarf.info.altlink.as_ref()?;
    let name = Path::new(std::str::from_utf8(name).ok()?);
    let mut candidates: Vec<PathBuf> = roots.iter().filter_map(|r| build_id_path(r, id)).collect();
    candidates.push(match dwarf.path.parent() {
        Some(dir) if name.is_relative() => dir.join(name),
        _ => name.to_path_buf(),
    });
    candidates.into_iter().find_map(|p| {
        let m = ElfImage::new(&open(&p).ok()?, &p).ok()?;
        (m.info.build_id.as_ref() == Some(id)).then_some(m)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zstd frame of `data` in one raw block.
    fn zstd_frame(data: &[u8]) -> Vec<u8> {
        assert!(data.len() < 256);
        let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, 0x20, data.len() as u8];
        let block = 1 | (data.len() as u32) << 3; // last, raw
        f.extend_from_slice(&block.to_le_bytes()[..3]);
        f.extend_from_slice(data);
        f
    }

    /// Compressed data that holds more than its header says is refused,
    /// never decompressed past the size given; what it says it holds is
    /// decompressed.
    #[test]
    fn decompression_stops_at_the_size_the_header_gives() {
        use std::io::Write;
        let data: Vec<u8> = (0..200u8).collect();
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&data).unwrap();
        let zlib = z.finish().unwrap();
        let zstd = zstd_frame(&data);
        for (format, packed) in [(CompressionFormat::Zlib, &zlib), (CompressionFormat::Zstandard, &zstd)] {
            assert_eq!(decompress(format, packed, 200).unwrap(), data, "{format:?}");
            for size in [0, 100, 199] {
                let e = decompress(format, packed, size).unwrap_err().to_string();
                assert!(e.contains("does not"), "{format:?} {size}: {e}");
            }
            assert!(decompress(format, packed, 201).is_err(), "{format:?}");
        }
    }

    /// A budget gives out what it has, and says when it is spent.
    #[test]
    fn a_budget_is_shared_and_spent() {
        let b = ReadBudget::new(100);
        let shared = b.clone();
        b.take(60, "a").unwrap();
        let e = shared.take(41, "b").unwrap_err().to_string();
        assert!(e.starts_with("b: 41 bytes, more than the 40 left"), "{e}");
        shared.take(40, "c").unwrap();
        assert_eq!(b.left(), 0);
    }
}
