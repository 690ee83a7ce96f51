//! The compilation level of a compiled method's code (1–3: C1, 4: C2),
//! which CompiledMethodLoad does not give: HotSpot keeps it in the
//! `nmethod` (`_comp_level`, described by `gHotSpotVMStructs` on JDK 11 to
//! 25), and the event gives only the code's address and its method.
//!
//! The `nmethod` is found two ways, each checked before it is trusted: the
//! method's current code (`Method::_code`), which is this code unless the
//! JVM replaced it before the event was posted (JDK 17+ post the event
//! later, from the service thread) or it is an OSR compilation; else a
//! scan of the words below the code for the header whose code begins at
//! this address and whose method is this method. A level that is not
//! found is 0 (unknown), which names the frame `_[j]`, never `_[1]`
//! wrongly.

use crate::sys::jmethodID;
use crate::vmstructs;

/// Where the fields are in this JVM's structures.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CompLevels {
    /// `Method::_code`.
    method_code: usize,
    /// `nmethod::_method` (JDK 23+) or `CompiledMethod::_method`.
    nm_method: usize,
    /// Where the code begins: `CodeBlob::_code_begin` (an address, up to
    /// JDK 22) or `CodeBlob::_code_offset` (an int from the blob, JDK 23+).
    code_begin: CodeBegin,
    /// `nmethod::_comp_level` (an int up to JDK 17, a one-byte enum after;
    /// its low byte either way on x86-64).
    comp_level: usize,
}

#[derive(Debug, Clone, Copy)]
enum CodeBegin {
    Address(usize),
    Offset(usize),
}

/// How far below its code an nmethod's header may be (its relocations lie
/// in between).
const SCAN_BYTES: usize = 64 << 10;

impl CompLevels {
    /// The offsets in the JVM whose JNIEnv is `jni`; `None` if it does not
    /// describe them.
    ///
    /// # Safety
    /// Live phase, on a Java thread whose JNIEnv is `jni`.
    pub(crate) unsafe fn new(jni: *mut crate::sys::JNIEnv) -> Option<CompLevels> {
        // SAFETY: the caller guarantees the live phase and that `jni` is this Java thread's JNIEnv
        // (# Safety).
        let f = unsafe {
            vmstructs::field_offsets(
                jni,
                &[
                    ("Method", "_code"),
                    ("nmethod", "_method"),
                    ("CompiledMethod", "_method"),
                    ("CodeBlob", "_code_begin"),
                    ("CodeBlob", "_code_offset"),
                    ("nmethod", "_comp_level"),
                ],
            )
        }?;
        let code_begin = match (f[3], f[4]) {
            (Some(a), _) => CodeBegin::Address(a),
            (None, Some(o)) => CodeBegin::Offset(o),
            _ => return None,
        };
        Some(CompLevels {
            method_code: f[0]?,
            nm_method: f[1].or(f[2])?,
            code_begin,
            comp_level: f[5]?,
        })
    }

    /// The level of the code at `code_addr` compiled from `method`, 0 if
    /// unknown.
    pub(crate) fn level(&self, method: jmethodID, code_addr: u64) -> u32 {
        // A jmethodID points at the Method*.
        let Some(m) = vmstructs::read_word(method as usize).filter(|&m| m != 0) else {
            return 0;
        };
        let code_addr = code_addr as usize;
        let current = vmstructs::read_word(m + self.method_code).unwrap_or(0);
        let nm = if current != 0 && self.is(current, m, code_addr) {
            Some(current)
        } else {
            self.scan(m, code_addr)
        };
        nm.and_then(|nm| vmstructs::read_bytes::<1>(nm + self.comp_level))
            .map(|b| b[0] as i8)
            .filter(|l| (1..=4).contains(l))
            .map_or(0, |l| l as u32)
    }

    /// Whether `nm` is the nmethod of `method` whose code begins at `code_addr`.
    fn is(&self, nm: usize, method: usize, code_addr: usize) -> bool {
        let begins = match self.code_begin {
            CodeBegin::Address(off) => vmstructs::read_word(nm + off) == Some(code_addr),
            CodeBegin::Offset(off) => vmstructs::read_bytes::<4>(nm + off)
                .is_some_and(|b| nm as i64 + i64::from(i32::from_ne_bytes(b)) == code_addr as i64),
        };
        begins && vmstructs::read_word(nm + self.nm_method) == Some(method)
    }

    /// The header below `code_addr` that checks out, nearest first.
    fn scan(&self, method: usize, code_addr: usize) -> Option<usize> {
        // The code cache may begin less than SCAN_BYTES below: smaller reads.
        let (base, words) = [SCAN_BYTES, 8 << 10, 1 << 10].iter().find_map(|&n| {
            let base = code_addr.checked_sub(n)? & !7;
            vmstructs::read_words(base, (code_addr - base) / 8).map(|w| (base, w))
        })?;
        // A header holds its method's Method* (and lies below its code);
        // those candidates are read again and checked whole.
        (0..words.len())
            .rev()
            .map(|i| base + 8 * i)
            .filter(|&nm| self.nm_method.is_multiple_of(8) && nm + self.nm_method + 8 <= code_addr)
            .filter(|&nm| words[(nm + self.nm_method - base) / 8] == method as u64)
            .find(|&nm| self.is(nm, method, code_addr))
    }
}
