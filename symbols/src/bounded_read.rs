//! An ELF file read in bounded parts: what a symbol or build-id lookup
//! needs (the headers, the symbol and string tables, the notes), read
//! from an open file with `pread`, never the whole file, and never more
//! than [`MAX_ELF_READ`] bytes of it.
//!
//! The recording commands run as root and read ELF files that users
//! choose or control: a `--lib-calls` library, the `libjvm.so` of the
//! command's JDK, the files traced processes map. Read whole, a sparse
//! file of a terabyte cost a terabyte of root's memory (or aborted
//! jtrace); mapped, a file its owner shortens meanwhile kills the reader
//! with SIGBUS. Read here, such a file costs at most [`MAX_ELF_READ`] of
//! memory, a shortened one is an error, and a file larger than
//! [`MAX_ELF_FILE`] is refused before anything is read.

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use rustix::fs::OFlags;
use rustix::io::Errno;

/// The largest file parsed as ELF: 4 GiB. Only the headers and symbol
/// tables are read (what memory they may take is [`MAX_ELF_READ`]), so
/// the bound is not what protects memory; it refuses, before anything is
/// read, what is no library or program to probe: a 1 TB sparse
/// `libjvm.so`. Shared libraries and programs are far smaller (the
/// largest ELF file on the development machine, Chromium, is 297 MB; a
/// `libjvm.so` is 24–30 MB), and those with their debug information
/// inside stay within it.
pub const MAX_ELF_FILE: u64 = 4 << 30;

/// The most bytes read into memory from one ELF file: 128 MiB. The
/// symbol and string tables are what is read (and the headers and notes):
/// 5 MB for a `libjvm.so` (Temurin 25: `.symtab` 1.7 MB, `.strtab` 3.3
/// MB), 27 MB for the largest tables on the development machine
/// (libLLVM). A file whose tables need more is refused; a hostile one
/// costs root at most this much memory, for a moment.
pub const MAX_ELF_READ: u64 = 128 << 20;

/// At most this many separate reads of one file (each a buffer kept until
/// the file is done with): a file whose names are not in its string
/// tables' sections would be read one name at a time.
const MAX_READS: usize = 1 << 16;

/// Buffers per block of the arena.
const BLOCK: usize = 256;

/// How far a name is looked for past its start when it lies in no buffer
/// read already (object's own reader looks as far).
const NAME_MAX: u64 = 4096;

/// Regions looked at, nearest first, for one that covers a read.
const LOOKBACK: usize = 64;

/// Opens `path` for reading as a file to parse, with this thread's rights:
/// without blocking (a FIFO or a device must not hang jtrace) and only if
/// it is a regular file. Links are followed, as the thread's user would
/// follow them (the thread runs as the user who named the path).
pub fn open_regular(path: &Path) -> io::Result<File> {
    open_with(path, OFlags::empty())
}

/// [`open_regular`] for root opening a path others may have put a link
/// at: a link is followed only if root put it there (root owns it and its
/// directory, which no one else may write), so no one can lead root
/// through a link of theirs to another file.
pub fn open_regular_as_root(path: &Path) -> io::Result<File> {
    match open_with(path, OFlags::NOFOLLOW) {
        Err(e) if e.raw_os_error() == Some(Errno::LOOP.raw_os_error()) => open_roots_link(path).map_err(|_| e),
        r => r,
    }
}

/// Opens the link at `path`, following it, if root put it there: through
/// a descriptor of its directory, so that it is the link checked.
fn open_roots_link(path: &Path) -> io::Result<File> {
    use rustix::fs::{fstat, openat, statat, AtFlags, Mode};
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(Errno::LOOP.into());
    };
    let dir = rustix::fs::open(dir, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    let (d, link) = (fstat(&dir)?, statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)?);
    if d.st_uid != 0 || d.st_mode & 0o022 != 0 || link.st_uid != 0 {
        return Err(Errno::LOOP.into());
    }
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    regular(File::from(openat(&dir, name, flags, Mode::empty())?))
}

/// Opens `path` to read, with `extra` open flags, if it is a regular file.
fn open_with(path: &Path, extra: OFlags) -> io::Result<File> {
    let flags = OFlags::NONBLOCK | OFlags::NOCTTY | extra;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(path)?;
    regular(file)
}

/// `file` if it is a regular file.
fn regular(file: File) -> io::Result<File> {
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, Refused::NotRegular));
    }
    Ok(file)
}

/// The refusal an open of [`open_regular`] or [`open_regular_as_root`]
/// failed with, if it was one: the file opened, but it is no regular file.
pub fn refusal(e: &io::Error) -> Option<&Refused> {
    e.get_ref()?.downcast_ref::<Refused>()
}

/// Why a file is not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Its status cannot be read (`fstat` failed): the error.
    Status(String),
    /// Not a regular file (a FIFO, a device, a directory).
    NotRegular,
    /// Larger than [`MAX_ELF_FILE`]: its size.
    TooLarge(u64),
    /// Parsing it needed more than [`MAX_ELF_READ`] bytes (or
    /// `MAX_READS` reads).
    TooMuchToRead,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Status(e) => write!(f, "cannot read its status: {e}"),
            Refused::NotRegular => write!(f, "not a regular file"),
            Refused::TooLarge(n) => write!(
                f,
                "{n} bytes, more than the {} GiB jtrace reads an ELF file of",
                MAX_ELF_FILE >> 30
            ),
            Refused::TooMuchToRead => write!(
                f,
                "its headers and symbol tables take more than the {} MiB jtrace reads of an ELF file",
                MAX_ELF_READ >> 20
            ),
        }
    }
}

impl std::error::Error for Refused {}

/// An open ELF file read in bounded parts: implements object's `ReadRef`
/// (on `&BoundedRead`), each part read once with `pread` and kept until
/// this is dropped.
pub struct BoundedRead<'f> {
    file: &'f File,
    len: u64,
    /// Bytes read so far.
    read: Cell<u64>,
    /// A read was refused: [`MAX_ELF_READ`] or `MAX_READS` reached.
    exceeded: Cell<bool>,
    /// The buffers read: (file offset, length) → arena index.
    regions: RefCell<BTreeMap<(u64, u64), usize>>,
    arena: Arena,
}

impl std::fmt::Debug for BoundedRead<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundedRead")
            .field("len", &self.len)
            .field("read", &self.read.get())
            .field("exceeded", &self.exceeded.get())
            .finish()
    }
}

impl<'f> BoundedRead<'f> {
    /// Reads of `file`, if it is a regular file of at most [`MAX_ELF_FILE`] bytes.
    pub fn new(file: &'f File) -> Result<BoundedRead<'f>, Refused> {
        let meta = file.metadata().map_err(|e| Refused::Status(e.to_string()))?;
        if !meta.is_file() {
            return Err(Refused::NotRegular);
        }
        if meta.len() > MAX_ELF_FILE {
            return Err(Refused::TooLarge(meta.len()));
        }
        Ok(BoundedRead {
            file,
            len: meta.len(),
            read: Cell::new(0),
            exceeded: Cell::new(false),
            regions: RefCell::new(BTreeMap::new()),
            arena: Arena::new(),
        })
    }

    /// Whether a read was refused for exceeding [`MAX_ELF_READ`]: then a
    /// parse that failed, or found less than it should, failed for that.
    pub fn exceeded(&self) -> bool {
        self.exceeded.get()
    }

    /// Bytes read into memory so far.
    pub fn bytes_read(&self) -> u64 {
        self.read.get()
    }

    /// Reads `range` of the file at once (a string table: its names are
    /// then found in it, not read one by one); `false` if it cannot be.
    pub fn preload(&self, range: Range<u64>) -> bool {
        range.start <= range.end && self.bytes(range.start, range.end - range.start).is_some()
    }

    /// The bytes at `offset..offset + size`: from a buffer read before
    /// that covers them, else read now (within the bounds).
    fn bytes(&self, offset: u64, size: u64) -> Option<&[u8]> {
        let end = offset.checked_add(size)?;
        if end > self.len {
            return None;
        }
        if let Some(b) = self.covering(offset, end) {
            return Some(b);
        }
        self.read_new(offset, size)
    }

    /// The bytes at `offset..end` from a buffer already read, if one covers them.
    fn covering(&self, offset: u64, end: u64) -> Option<&[u8]> {
        let regions = self.regions.borrow();
        let (&(start, len), &i) = regions
            .range(..=(offset, u64::MAX))
            .rev()
            .take(LOOKBACK)
            .find(|(&(start, len), _)| start + len >= end)?;
        let b = self.arena.get(i)?;
        debug_assert_eq!(b.len() as u64, len);
        b.get((offset - start) as usize..(end - start) as usize)
    }

    /// Reads `offset..offset + size` into a new buffer, if the bounds allow.
    fn read_new(&self, offset: u64, size: u64) -> Option<&[u8]> {
        let total = self.read.get().checked_add(size)?;
        if total > MAX_ELF_READ || self.arena.used() >= MAX_READS {
            self.exceeded.set(true);
            return None;
        }
        self.read.set(total);
        // Placed so that each byte's address is its file offset modulo 16,
        // as in a mapping: the ELF structures are aligned in the file, and
        // object checks their alignment in memory.
        let mut buf = vec![0u8; size as usize + 15].into_boxed_slice();
        let pad = (offset as usize).wrapping_sub(buf.as_ptr() as usize) % 16;
        self.file
            .read_exact_at(&mut buf[pad..pad + size as usize], offset)
            .ok()?;
        let i = self.arena.push(buf, pad)?;
        self.regions.borrow_mut().insert((offset, size), i);
        self.arena.get(i)
    }

    /// The bytes from `range.start` up to the first `delimiter` before
    /// `range.end`: within a buffer read before, else from a read of at
    /// most [`NAME_MAX`] bytes.
    fn until(&self, range: Range<u64>, delimiter: u8) -> Option<&[u8]> {
        if range.start >= range.end || range.end > self.len {
            return None;
        }
        let found = |b: &'_ [u8]| b.iter().position(|&c| c == delimiter);
        // In a buffer that holds the start (a preloaded string table).
        let held = {
            let regions = self.regions.borrow();
            regions
                .range(..=(range.start, u64::MAX))
                .rev()
                .take(LOOKBACK)
                .find(|(&(start, len), _)| start + len > range.start)
                .map(|(&(start, len), &i)| (start, len, i))
        };
        if let Some((start, len, i)) = held {
            let b = self.arena.get(i)?;
            let from = (range.start - start) as usize;
            let to = (range.end.min(start + len) - start) as usize;
            if let Some(n) = found(&b[from..to]) {
                return Some(&b[from..from + n]);
            }
        }
        let size = (range.end - range.start).min(NAME_MAX);
        let b = self.read_new(range.start, size)?;
        found(b).map(|n| &b[..n])
    }
}

impl<'a> object::ReadRef<'a> for &'a BoundedRead<'_> {
    fn len(self) -> Result<u64, ()> {
        Ok(self.len)
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> Result<&'a [u8], ()> {
        if size == 0 {
            return Ok(&[]);
        }
        self.bytes(offset, size).ok_or(())
    }

    fn read_bytes_at_until(self, range: Range<u64>, delimiter: u8) -> Result<&'a [u8], ()> {
        self.until(range, delimiter).ok_or(())
    }
}

/// Buffers lent out for as long as the arena lives: each is stored once in
/// a cell of a block that never moves, and never changed or dropped
/// before the arena (safe code: `OnceCell` lends what it holds for as
/// long as it is borrowed).
struct Arena {
    /// Blocks of [`BLOCK`] cells, each made when first needed; the vector
    /// itself is never resized.
    blocks: Vec<OnceCell<Vec<Slot>>>,
    used: Cell<usize>,
}

/// One buffer of the arena: the allocation, and where in it the bytes
/// read begin (they end 15 bytes before its end).
type Slot = OnceCell<(Box<[u8]>, usize)>;

impl Arena {
    fn new() -> Arena {
        Arena {
            blocks: (0..MAX_READS.div_ceil(BLOCK)).map(|_| OnceCell::new()).collect(),
            used: Cell::new(0),
        }
    }

    fn used(&self) -> usize {
        self.used.get()
    }

    /// Keeps `buf` (its bytes start at `pad`); its index.
    fn push(&self, buf: Box<[u8]>, pad: usize) -> Option<usize> {
        let i = self.used.get();
        let block = self
            .blocks
            .get(i / BLOCK)?
            .get_or_init(|| (0..BLOCK).map(|_| OnceCell::new()).collect());
        block[i % BLOCK].set((buf, pad)).ok()?;
        self.used.set(i + 1);
        Some(i)
    }

    /// The bytes of buffer `i`.
    fn get(&self, i: usize) -> Option<&[u8]> {
        let (buf, pad) = self.blocks.get(i / BLOCK)?.get()?.get(i % BLOCK)?.get()?;
        // The allocation has 15 bytes more than the read.
        buf.get(*pad..buf.len() - 15 + *pad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::ReadRef;
    use std::io::Write;

    /// A new file with `bytes`, then `len` bytes long (sparse), open.
    fn temp_file(name: &str, bytes: &[u8], len: u64) -> (std::path::PathBuf, File) {
        let p = std::env::temp_dir().join(format!("jtrace-bounded-{name}-{}", std::process::id()));
        let mut f = std::fs::File::create(&p).unwrap();
        f.write_all(bytes).unwrap();
        f.set_len(len).unwrap();
        (p.clone(), File::open(&p).unwrap())
    }

    #[test]
    fn reads_are_served_from_what_was_read() {
        let data: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let (p, f) = temp_file("serve", &data, data.len() as u64);
        let r = BoundedRead::new(&f).unwrap();
        assert!(r.preload(100..5000));
        assert_eq!(r.bytes_read(), 4900);
        // Inside the preloaded part: no new read.
        assert_eq!((&r).read_bytes_at(200, 10).unwrap(), &data[200..210]);
        assert_eq!(r.bytes_read(), 4900);
        // A name ends at the first delimiter; one in the preloaded part is
        // found there.
        assert_eq!((&r).read_bytes_at_until(300..9000, 255).unwrap(), &data[300..511]);
        assert_eq!(r.bytes_read(), 4900);
        // Outside it, read (at most NAME_MAX bytes for a name).
        assert_eq!(
            (&r).read_bytes_at_until(6000..9000, 0).unwrap(),
            &data[6000..6000 + 144]
        );
        assert_eq!(r.bytes_read(), 4900 + 3000);
        // Beyond the end, an error.
        assert!((&r).read_bytes_at(9990, 11).is_err());
        assert!(!r.exceeded());
        // Each byte's address is its offset modulo 16.
        let b = (&r).read_bytes_at(7001, 3).unwrap();
        assert_eq!(b.as_ptr() as usize % 16, 7001 % 16);
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn reading_more_than_the_bound_is_refused() {
        let (p, f) = temp_file("bound", b"x", MAX_ELF_READ + 4096);
        let r = BoundedRead::new(&f).unwrap();
        assert!((&r).read_bytes_at(0, MAX_ELF_READ + 1).is_err());
        assert!(r.exceeded());
        assert_eq!(r.bytes_read(), 0, "nothing read past the bound");
        let _ = std::fs::remove_file(p);
    }

    /// Root follows its own link in a directory only root may write, not
    /// another's there, nor its own in a directory anyone may write.
    #[cfg(feature = "system-tests")]
    #[test]
    fn root_follows_only_links_root_put_there() {
        use std::os::unix::fs::{lchown, symlink, PermissionsExt};
        let base = std::env::temp_dir().join(format!("jtrace-as-root-{}", std::process::id()));
        let sealed = base.join("sealed");
        std::fs::create_dir_all(&sealed).unwrap();
        let open = base.join("open");
        std::fs::create_dir_all(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let target = base.join("target");
        std::fs::write(&target, b"x").unwrap();
        for (dir, name, owner) in [(&sealed, "root", 0), (&sealed, "theirs", 65534), (&open, "root", 0)] {
            let link = dir.join(name);
            symlink(&target, &link).unwrap();
            lchown(&link, Some(owner), Some(owner)).unwrap();
        }
        assert!(open_regular_as_root(&sealed.join("root")).is_ok());
        for link in [sealed.join("theirs"), open.join("root")] {
            let e = open_regular_as_root(&link).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(Errno::LOOP.raw_os_error()), "{}", link.display());
        }
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn huge_and_irregular_files_are_refused_before_reading() {
        let (p, f) = temp_file("huge", b"", MAX_ELF_FILE + 1);
        assert_eq!(BoundedRead::new(&f).unwrap_err(), Refused::TooLarge(MAX_ELF_FILE + 1));
        let _ = std::fs::remove_file(p);
        let dir = File::open("/").unwrap();
        assert_eq!(BoundedRead::new(&dir).unwrap_err(), Refused::NotRegular);
        let e = open_regular(Path::new("/dev/null")).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file");
    }
}
