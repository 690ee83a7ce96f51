//! The kernel tid of any Java thread, for naming the threads that already
//! exist when the agent attaches (JVMTI gives no tid, and those threads get
//! no ThreadStart).
//!
//! HotSpot describes its own data structures in the exported table
//! `gHotSpotVMStructs` (what the serviceability agent and async-profiler
//! read). From it come the offsets of `JavaThread::_osthread` (in `Thread`
//! on older JDKs) and `OSThread::_thread_id`; `java.lang.Thread.eetop` holds
//! the thread's `JavaThread*`. Every read of VM memory goes through
//! `process_vm_readv` on our own process, so a thread that exits meanwhile
//! yields an error (or a tid the caller checks), never a fault.

use std::ffi::{c_void, CStr};

use crate::jvm::{self, jni};
use crate::sys::*;

/// How to find a thread's tid in this JVM.
pub(crate) struct TidReader {
    eetop: jfieldID,
    osthread: usize,
    thread_id: usize,
}

/// Reads a `T` at `addr` of our own memory; `None` if it is not mapped.
fn read<T: Copy + Default>(addr: usize) -> Option<T> {
    if addr == 0 {
        return None;
    }
    let mut v = T::default();
    let local = libc::iovec {
        iov_base: (&mut v as *mut T).cast(),
        iov_len: std::mem::size_of::<T>(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut c_void,
        iov_len: std::mem::size_of::<T>(),
    };
    // SAFETY: copies from our own address space into `v`; an unmapped
    // source address is an error (EFAULT), not a fault.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    (n == std::mem::size_of::<T>() as isize).then_some(v)
}

/// Chunks [`TableReader`] copies: 4 KiB-aligned, so each lies within one
/// page whatever the page size.
const CHUNK: usize = 4096;

/// Reads the VM's type and struct tables (static data of libjvm.so, not
/// written once the VM runs) a chunk at a time, each chunk copied once: a
/// table scan reads thousands of entries and names, and one
/// `process_vm_readv` per word or byte cost ≈ 0.25 s of system time at
/// every start (BENCHMARKS.md, "Start-up and exit").
#[derive(Default)]
struct TableReader {
    chunks: std::collections::HashMap<usize, Option<Box<[u8; CHUNK]>>>,
}

impl TableReader {
    /// The chunk holding `addr`, copied on first use; `None` if unmapped.
    fn chunk(&mut self, addr: usize) -> Option<&[u8; CHUNK]> {
        let base = addr & !(CHUNK - 1);
        self.chunks
            .entry(base)
            .or_insert_with(|| {
                let mut c = Box::new([0u8; CHUNK]);
                copy_in(base, &mut c[..]).then_some(c)
            })
            .as_deref()
    }

    /// Copies `out.len()` bytes at `addr` into `out`.
    fn bytes(&mut self, mut addr: usize, mut out: &mut [u8]) -> bool {
        if addr == 0 {
            return false;
        }
        while !out.is_empty() {
            let at = addr % CHUNK;
            let n = out.len().min(CHUNK - at);
            let Some(c) = self.chunk(addr) else {
                return false;
            };
            out[..n].copy_from_slice(&c[at..at + n]);
            (addr, out) = (addr + n, &mut out[n..]);
        }
        true
    }

    /// The word at `addr`.
    fn word(&mut self, addr: usize) -> Option<usize> {
        let mut b = [0u8; 8];
        self.bytes(addr, &mut b).then(|| u64::from_ne_bytes(b) as usize)
    }

    /// The C string at `addr` (at most 256 bytes).
    fn cstr(&mut self, addr: usize) -> Option<String> {
        let mut out = Vec::new();
        while out.len() < 256 {
            let mut b = [0u8; 1];
            if !self.bytes(addr + out.len(), &mut b) {
                return None;
            }
            if b[0] == 0 {
                return Some(String::from_utf8_lossy(&out).into_owned());
            }
            out.push(b[0]);
        }
        None
    }
}

/// The value of an exported `uint64_t`/pointer variable of libjvm.so.
///
/// # Safety
/// `lib` is a handle of the loaded libjvm.so.
unsafe fn exported(lib: *mut c_void, name: &CStr) -> Option<usize> {
    // SAFETY: the caller guarantees `lib` is a handle of the loaded libjvm.so (# Safety).
    let p = unsafe { libc::dlsym(lib, name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    read::<u64>(p as usize).map(|v| v as usize)
}

/// The loaded libjvm.so (another reference on it, dropped with this).
struct Libjvm {
    handle: *mut c_void,
    path: std::ffi::CString,
}

impl Libjvm {
    /// libjvm.so is the library that implements the JNI functions.
    ///
    /// # Safety
    /// `jni` is the calling Java thread's JNIEnv.
    unsafe fn open(jni: *mut JNIEnv) -> Option<Libjvm> {
        // SAFETY: the caller guarantees `jni` is this Java thread's JNIEnv, so its function table is
        // libjvm's (# Safety).
        unsafe {
            let f = (**jni).GetVersion? as *const c_void;
            let mut info: libc::Dl_info = std::mem::zeroed();
            if libc::dladdr(f, &mut info) == 0 || info.dli_fname.is_null() {
                return None;
            }
            let path = CStr::from_ptr(info.dli_fname).to_owned();
            let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
            (!handle.is_null()).then_some(Libjvm { handle, path })
        }
    }

    /// Whether `addr` is code or data of libjvm.so.
    fn contains(&self, addr: usize) -> bool {
        // SAFETY: Dl_info is plain C data, for which all zeroes is valid.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr only looks the address up in the loaded objects.
        unsafe {
            libc::dladdr(addr as *const c_void, &mut info) != 0
                && !info.dli_fname.is_null()
                && CStr::from_ptr(info.dli_fname) == self.path.as_c_str()
        }
    }
}

impl Drop for Libjvm {
    fn drop(&mut self) {
        // SAFETY: the reference taken by `open`.
        unsafe { libc::dlclose(self.handle) };
    }
}

/// Reads the address a native method is bound to, which JNI and JVMTI do
/// not tell once it is bound (needed on attach, to call the JVM's own
/// implementation from a wrapper). HotSpot keeps it right after the
/// `Method` object (`Method::native_function_addr()` is `this + 1`); the
/// object's size comes from the VM's type table (`gHotSpotVMTypes`), and a
/// `jmethodID` points at the `Method*`. Trusted only after a check: the
/// address read for `Thread.holdsLock` must be the exported `JVM_HoldsLock`
/// that java.base binds it to.
pub(crate) struct NativeAddresses {
    lib: Libjvm,
    method_size: usize,
}

impl NativeAddresses {
    /// `None` if this JVM does not describe `Method` or fails the check.
    ///
    /// # Safety
    /// Live phase, on a Java thread whose JNIEnv is `jni`.
    pub(crate) unsafe fn new(jni: *mut JNIEnv) -> Option<NativeAddresses> {
        if jni.is_null() {
            return None;
        }
        // SAFETY: the caller guarantees the live phase and that `jni` is this Java thread's JNIEnv
        // (# Safety).
        unsafe {
            let lib = Libjvm::open(jni)?;
            let method_size = Self::type_size(lib.handle, "Method")?;
            let me = NativeAddresses { lib, method_size };
            let expected = libc::dlsym(me.lib.handle, c"JVM_HoldsLock".as_ptr()) as usize;
            let class = jni!(jni, FindClass, c"java/lang/Thread".as_ptr()).unwrap_or(std::ptr::null_mut());
            if class.is_null() {
                jni!(jni, ExceptionClear);
                return None;
            }
            let mid = jni!(
                jni,
                GetStaticMethodID,
                class,
                c"holdsLock".as_ptr(),
                c"(Ljava/lang/Object;)Z".as_ptr()
            )
            .unwrap_or(std::ptr::null_mut());
            jvm::delete_local(jni, class);
            if mid.is_null() {
                jni!(jni, ExceptionClear);
                return None;
            }
            (expected != 0 && me.bound(mid) == Some(expected)).then_some(me)
        }
    }

    /// The address `mid` (a native method) is bound to.
    pub(crate) fn bound(&self, mid: jmethodID) -> Option<usize> {
        let method: usize = read(mid as usize)?;
        read::<usize>(method + self.method_size).filter(|&a| a != 0)
    }

    /// Whether `addr` is in libjvm.so (where the JVM's implementations of
    /// the natives we wrap are).
    pub(crate) fn in_libjvm(&self, addr: usize) -> bool {
        self.lib.contains(addr)
    }

    /// The size of a type of the VM's type table.
    ///
    /// # Safety
    /// `lib` is a handle of the loaded libjvm.so.
    unsafe fn type_size(lib: *mut c_void, name: &str) -> Option<usize> {
        // SAFETY: the caller guarantees `lib` is a handle of the loaded libjvm.so (# Safety).
        unsafe {
            let table = exported(lib, c"gHotSpotVMTypes")?;
            let type_name = exported(lib, c"gHotSpotVMTypeEntryTypeNameOffset")?;
            let size = exported(lib, c"gHotSpotVMTypeEntrySizeOffset")?;
            let stride = exported(lib, c"gHotSpotVMTypeEntryArrayStride")?;
            if table == 0 || stride == 0 {
                return None;
            }
            let mut mem = TableReader::default();
            for i in 0..100_000 {
                let e = table + i * stride;
                let tn = mem.word(e + type_name)?;
                if tn == 0 {
                    return None;
                }
                if mem.cstr(tn)? == name {
                    return mem.word(e + size).filter(|&n| n > 0);
                }
            }
            None
        }
    }
}

// SAFETY: a jfieldID is valid on every thread for as long as its class is
// loaded, and java.lang.Thread is never unloaded; the offsets are plain data.
unsafe impl Send for TidReader {}
// SAFETY: as for Send; TidReader is never mutated after creation.
unsafe impl Sync for TidReader {}

impl TidReader {
    /// Finds the offsets in this JVM; `None` if it is not a HotSpot that
    /// describes them (the caller then falls back to thread names).
    ///
    /// # Safety
    /// Live phase, on a Java thread whose JNIEnv is `jni`.
    pub(crate) unsafe fn new(jni: *mut JNIEnv) -> Option<TidReader> {
        if jni.is_null() {
            return None;
        }
        // SAFETY: the caller guarantees the live phase and that `jni` is this Java thread's JNIEnv
        // (# Safety).
        unsafe {
            let lib = Libjvm::open(jni)?;
            let offsets = Self::offsets(lib.handle);
            let (osthread, thread_id) = offsets?;
            let class = jni!(jni, FindClass, c"java/lang/Thread".as_ptr())?;
            if class.is_null() {
                jni!(jni, ExceptionClear);
                return None;
            }
            let eetop = jni!(jni, GetFieldID, class, c"eetop".as_ptr(), c"J".as_ptr()).unwrap_or(std::ptr::null_mut());
            jvm::delete_local(jni, class);
            if eetop.is_null() {
                jni!(jni, ExceptionClear);
                return None;
            }
            Some(TidReader {
                eetop,
                osthread,
                thread_id,
            })
        }
    }

    /// Offsets of the thread's OSThread and of the OSThread's tid.
    ///
    /// # Safety
    /// `lib` is a handle of the loaded libjvm.so.
    unsafe fn offsets(lib: *mut c_void) -> Option<(usize, usize)> {
        // SAFETY: the caller guarantees `lib` is a handle of the loaded libjvm.so (# Safety).
        let found = unsafe {
            offsets_in(
                lib,
                &[
                    ("JavaThread", "_osthread"),
                    ("Thread", "_osthread"),
                    ("OSThread", "_thread_id"),
                ],
            )
        }?;
        Some((found[0].or(found[1])?, found[2]?))
    }

    /// The `JavaThread*` of `thread` (`java.lang.Thread.eetop`), 0 if it has none.
    ///
    /// # Safety
    /// `jni` is the calling thread's JNIEnv and `thread` a live reference.
    pub(crate) unsafe fn java_thread(&self, jni: *mut JNIEnv, thread: jthread) -> usize {
        // SAFETY: the caller guarantees this thread's `jni` and a live `thread` (# Safety).
        (unsafe { jni!(jni, GetLongField, thread, self.eetop) }).unwrap_or(0) as usize
    }

    /// The kernel tid of `thread`, if it is alive and the VM says.
    ///
    /// # Safety
    /// `jni` is the calling thread's JNIEnv and `thread` a live reference.
    pub(crate) unsafe fn tid(&self, jni: *mut JNIEnv, thread: jthread) -> Option<u32> {
        // SAFETY: the caller guarantees this thread's `jni` and a live `thread` (# Safety).
        let java_thread = unsafe { jni!(jni, GetLongField, thread, self.eetop) }? as usize;
        let os_thread: usize = read(java_thread + self.osthread)?;
        let tid: i32 = read(os_thread + self.thread_id)?;
        // A thread that exited meanwhile may leave stale memory: only a tid
        // of this process counts.
        (tid > 0 && std::path::Path::new(&format!("/proc/self/task/{tid}")).exists()).then_some(tid as u32)
    }
}

/// The offsets of the `(type, field)` pairs of the VM's struct table
/// (`gHotSpotVMStructs`), each `None` if the VM does not describe it.
///
/// # Safety
/// Live phase, on a Java thread whose JNIEnv is `jni`.
pub(crate) unsafe fn field_offsets(jni: *mut JNIEnv, wanted: &[(&str, &str)]) -> Option<Vec<Option<usize>>> {
    if jni.is_null() {
        return None;
    }
    // SAFETY: the caller guarantees the live phase and that `jni` is this Java thread's JNIEnv
    // (# Safety).
    unsafe { offsets_in(Libjvm::open(jni)?.handle, wanted) }
}

/// [`field_offsets`] in the libjvm.so whose handle is `lib`.
///
/// # Safety
/// `lib` is a handle of the loaded libjvm.so.
unsafe fn offsets_in(lib: *mut c_void, wanted: &[(&str, &str)]) -> Option<Vec<Option<usize>>> {
    // SAFETY: the caller guarantees `lib` is a handle of the loaded libjvm.so (# Safety).
    unsafe {
        let table = exported(lib, c"gHotSpotVMStructs")?;
        let type_name = exported(lib, c"gHotSpotVMStructEntryTypeNameOffset")?;
        let field_name = exported(lib, c"gHotSpotVMStructEntryFieldNameOffset")?;
        let offset = exported(lib, c"gHotSpotVMStructEntryOffsetOffset")?;
        let stride = exported(lib, c"gHotSpotVMStructEntryArrayStride")?;
        if table == 0 || stride == 0 {
            return None;
        }
        let mut out = vec![None; wanted.len()];
        let mut mem = TableReader::default();
        // The table ends with an entry without a type name; bounded anyway.
        for i in 0..100_000 {
            let e = table + i * stride;
            let tn = mem.word(e + type_name)?;
            if tn == 0 {
                break;
            }
            let fnp = mem.word(e + field_name)?;
            if fnp == 0 {
                continue;
            }
            let (t, f) = (mem.cstr(tn)?, mem.cstr(fnp)?);
            for (slot, _) in out.iter_mut().zip(wanted).filter(|(_, w)| w.0 == t && w.1 == f) {
                *slot = Some(mem.word(e + offset)?);
            }
        }
        Some(out)
    }
}

/// Reads a pointer-sized word of our own memory; `None` if it is not mapped.
pub(crate) fn read_word(addr: usize) -> Option<usize> {
    read(addr)
}

/// Reads the word at each of `addrs` of our own memory (`None` where it is
/// not mapped), up to 1 024 in one `process_vm_readv`: a class's methods
/// are read together, not with a system call each.
pub(crate) fn read_words_at(addrs: &[usize]) -> Vec<Option<usize>> {
    const BATCH: usize = 1024; // IOV_MAX
    let mut out = vec![None; addrs.len()];
    let mut words = vec![0usize; BATCH];
    let mut start = 0;
    while start < addrs.len() {
        let batch = &addrs[start..addrs.len().min(start + BATCH)];
        let local: Vec<libc::iovec> = words[..batch.len()]
            .iter_mut()
            .map(|w| libc::iovec {
                iov_base: (w as *mut usize).cast(),
                iov_len: 8,
            })
            .collect();
        let remote: Vec<libc::iovec> = batch
            .iter()
            .map(|&a| libc::iovec {
                iov_base: a as *mut c_void,
                iov_len: 8,
            })
            .collect();
        // SAFETY: copies from our own address space into `words`; the
        // transfer stops at the first source that is not mapped.
        let n = unsafe {
            libc::process_vm_readv(
                libc::getpid(),
                local.as_ptr(),
                local.len() as _,
                remote.as_ptr(),
                remote.len() as _,
                0,
            )
        };
        let whole = (n.max(0) as usize) / 8;
        for (o, &w) in out[start..].iter_mut().zip(&words[..whole]) {
            *o = Some(w);
        }
        // The one that stopped the transfer (if any) is unreadable: go on after it.
        start += whole + usize::from(whole < batch.len());
    }
    out
}

/// Reads `N` bytes of our own memory; `None` if they are not mapped.
pub(crate) fn read_bytes<const N: usize>(addr: usize) -> Option<[u8; N]> {
    let mut v = [0u8; N];
    copy_in(addr, &mut v).then_some(v)
}

/// Reads `n` words of our own memory; `None` if any is not mapped.
pub(crate) fn read_words(addr: usize, n: usize) -> Option<Vec<u64>> {
    let mut v = vec![0u64; n];
    // SAFETY: the bytes of `v`, which any bit pattern fills validly.
    let bytes = unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), n * 8) };
    copy_in(addr, bytes).then_some(v)
}

/// Copies `out.len()` bytes at `addr` of our own memory into `out`.
fn copy_in(addr: usize, out: &mut [u8]) -> bool {
    if addr == 0 {
        return false;
    }
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: out.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut c_void,
        iov_len: out.len(),
    };
    // SAFETY: copies from our own address space into `out`; an unmapped
    // source is an error (EFAULT), not a fault.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    n == out.len() as isize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batched_reads_skip_only_the_unmapped_words() {
        let words: Vec<usize> = (0..3000).map(|i| i * 7 + 1).collect();
        let mut addrs: Vec<usize> = words.iter().map(|w| w as *const usize as usize).collect();
        // Unmapped: the first page, at the start, inside a batch and at a batch's end.
        for i in [0, 500, 1023, 2999] {
            addrs[i] = 8 * i;
        }
        let got = read_words_at(&addrs);
        for (i, (g, w)) in got.iter().zip(&words).enumerate() {
            let unmapped = [0, 500, 1023, 2999].contains(&i);
            assert_eq!(*g, (!unmapped).then_some(*w), "word {i}");
        }
    }

    #[test]
    fn table_reads_cross_chunks_and_stop_at_unmapped_memory() {
        let text = vec![b'x'; 3 * CHUNK];
        let mut s = text.clone();
        s.push(0);
        let mut mem = TableReader::default();
        let at = s.as_ptr() as usize + 10;
        assert_eq!(mem.cstr(at).map(|c| c.len()), None, "longer than 256 bytes");
        let end = s.as_ptr() as usize + s.len() - 5;
        assert_eq!(mem.cstr(end).as_deref(), Some("xxxx"));
        let v: [usize; 3] = [11, 22, 33];
        assert_eq!(mem.word(&v[1] as *const usize as usize), Some(22));
        assert_eq!(mem.word(16), None);
        let mut buf = vec![0u8; 2 * CHUNK + 100];
        assert!(mem.bytes(s.as_ptr() as usize + 7, &mut buf));
        assert!(buf.iter().all(|&b| b == b'x'));
    }
}
