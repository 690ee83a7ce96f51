//! The 16-byte header at the start of every stream and the one at the start
//! of every record.

/// Format version written into every stream header; bumped on incompatible change.
pub const FORMAT_VERSION: u32 = 1;
/// Magic of the kernel event stream.
pub const KERNEL_MAGIC: [u8; 8] = *b"JTRACEK\0";
/// Magic of a JVM event stream.
pub const JVM_MAGIC: [u8; 8] = *b"JTRACEJ\0";
/// Size of the stream header in bytes.
pub const FILE_HEADER_LEN: usize = 16;
/// Size of the record header in bytes.
pub const RECORD_HEADER_LEN: usize = 16;

/// The 16 bytes at the start of every stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    /// [`KERNEL_MAGIC`] or [`JVM_MAGIC`].
    pub magic: [u8; 8],
    /// [`FORMAT_VERSION`] of the writer.
    pub version: u32,
    /// [`STREAM_COMPLETE`] once the writer finished the stream; other bits zero.
    pub flags: u32,
}

/// Flag in [`FileHeader::flags`]: the writer closed the stream normally (a
/// JVM stream without it was cut off, e.g. by kill -9: it is read up to the
/// first zero-filled record and reported as incomplete).
pub const STREAM_COMPLETE: u32 = 1;

impl FileHeader {
    /// A header for a stream with the given magic, at the current version.
    pub fn new(magic: [u8; 8]) -> Self {
        FileHeader {
            magic,
            version: FORMAT_VERSION,
            flags: 0,
        }
    }

    /// Serialises the header.
    pub fn to_bytes(&self) -> [u8; FILE_HEADER_LEN] {
        let mut b = [0u8; FILE_HEADER_LEN];
        b[..8].copy_from_slice(&self.magic);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&self.flags.to_le_bytes());
        b
    }

    /// Parses a header; `None` if `b` is too short.
    pub fn parse(b: &[u8]) -> Option<Self> {
        if b.len() < FILE_HEADER_LEN {
            return None;
        }
        Some(FileHeader {
            magic: b[..8].try_into().ok()?,
            version: u32::from_le_bytes(b[8..12].try_into().ok()?),
            flags: u32::from_le_bytes(b[12..16].try_into().ok()?),
        })
    }
}

/// The 16 bytes at the start of every record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// One of the [`kind`](crate::kind) constants.
    pub kind: u16,
    /// Total record length in bytes, header and padding included; a multiple of 8.
    pub len: u16,
    /// Kernel thread id the record is about.
    pub tid: u32,
    /// CLOCK_MONOTONIC nanoseconds.
    pub ts: u64,
}
