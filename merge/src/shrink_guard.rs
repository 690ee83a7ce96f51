//! Reading a mapped file that another process may shrink.
//!
//! A read through a mapping past the end of a file that was truncated
//! after it was mapped is a SIGBUS, which would kill the reader. The
//! readers map only files that should never shrink (a kernel stream, a
//! finished JVM stream), but a user, a script or a second jtrace can still
//! truncate one. So each such mapping is registered here, and a SIGBUS
//! handler, for a fault inside a registered mapping, maps zero pages over
//! the rest of it and notes where: the read that faulted then sees zeros
//! (which a stream reader takes as the end of its records), the reader
//! asks [`ShrinkGuard::shrunk_at`] and reports the cut. A SIGBUS anywhere
//! else gets the handler that was there before (by default, death).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

/// Mappings guarded at once, at most (the readers map one stream at a time).
const SLOTS: usize = 8;

/// Per slot: start address (0: free), length, and the offset of the first
/// fault in it (usize::MAX: none).
static STARTS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static LENS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static FAULTS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(usize::MAX) }; SLOTS];

/// The SIGBUS action before ours, restored for faults not ours.
static mut PREVIOUS: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::uninit();
static INSTALL: Once = Once::new();

/// A registered mapping: see the module documentation. Unregistered when
/// dropped (before the mapping itself goes).
#[derive(Debug)]
pub(crate) struct ShrinkGuard {
    slot: Option<usize>,
}

impl ShrinkGuard {
    /// Guards the mapping `[start, start + len)`. With every slot taken the
    /// mapping is not guarded (`None` inside: a SIGBUS stays fatal).
    pub(crate) fn new(start: *const u8, len: usize) -> ShrinkGuard {
        INSTALL.call_once(install);
        for i in 0..SLOTS {
            if STARTS[i].load(Ordering::SeqCst) == 0 {
                FAULTS[i].store(usize::MAX, Ordering::SeqCst);
                LENS[i].store(len, Ordering::SeqCst);
                if STARTS[i]
                    .compare_exchange(0, start as usize, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    return ShrinkGuard { slot: Some(i) };
                }
            }
        }
        ShrinkGuard { slot: None }
    }

    /// Where the file turned out shorter than when it was mapped (the
    /// page-aligned offset of the first read that faulted), if it did.
    pub(crate) fn shrunk_at(&self) -> Option<usize> {
        let f = FAULTS[self.slot?].load(Ordering::SeqCst);
        (f != usize::MAX).then_some(f)
    }
}

impl Drop for ShrinkGuard {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            STARTS[i].store(0, Ordering::SeqCst);
        }
    }
}

fn install() {
    // SAFETY: a zeroed sigaction is valid; the handler only uses atomics and
    // mmap, both async-signal-safe; PREVIOUS is written once, here, before
    // the handler can run.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigbus as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
        libc::sigemptyset(&mut sa.sa_mask);
        let prev = std::ptr::addr_of_mut!(PREVIOUS).cast::<libc::sigaction>();
        libc::sigaction(libc::SIGBUS, &sa, prev);
    }
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    for i in 0..SLOTS {
        let start = STARTS[i].load(Ordering::SeqCst);
        let len = LENS[i].load(Ordering::SeqCst);
        if start == 0 || addr < start || addr >= start + len {
            continue;
        }
        let page = 4096;
        let from = addr & !(page - 1);
        let end = (start + len).div_ceil(page) * page;
        // SAFETY: replaces the rest of a mapping the reader owns, which
        // stays registered (so mapped) until its guard is dropped, with
        // readable zero pages; the faulting read then succeeds.
        let p = unsafe {
            libc::mmap(
                from as *mut libc::c_void,
                end - from,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            FAULTS[i].fetch_min(from - start, Ordering::SeqCst);
            return;
        }
    }
    // Not ours: as if we were not there.
    // SAFETY: PREVIOUS was filled by install() before this handler existed.
    unsafe {
        let prev = &*std::ptr::addr_of!(PREVIOUS).cast::<libc::sigaction>();
        if prev.sa_flags & libc::SA_SIGINFO != 0 && prev.sa_sigaction > 1 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(prev.sa_sigaction);
            f(sig, info, ctx);
        } else {
            // SIG_DFL or SIG_IGN, or a plain handler: put it back and let the
            // read fault again.
            libc::sigaction(libc::SIGBUS, prev, std::ptr::null_mut());
        }
    }
}
