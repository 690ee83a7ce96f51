//! What determines the text of an off-CPU interval's evidence
//! ([`jtrace_merge::describe_evidence`], "in read(fd 5: socket tcp …)"):
//! exports that write it per interval make each string once per key.

use jtrace_merge::{Evidence, SyscallInfo};

/// Words that determine an evidence string: equal keys, equal strings.
pub(crate) type EvidenceKey = [u64; 12];

/// The key of an off-CPU interval's evidence string: its kind, then what
/// the string says (for a syscall: the record without its times).
pub(crate) fn evidence_key(e: &Evidence, sc: Option<&SyscallInfo>) -> EvidenceKey {
    let mut k = [0u64; 12];
    match (*e, sc) {
        (Evidence::Syscall(_), Some(sc)) => {
            let r = &sc.rec;
            let word = |b: &[u8; 16], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
            k = [
                1,
                (r.nr as u64) << 32 | r.fd_kind as u64,
                r.ret as u64,
                (r.fd as u32 as u64) << 32 | (r.flags & jtrace_format::SYSCALL_AT_SWITCH) as u64,
                r.arg,
                (r.family as u64) << 48 | (r.protocol as u64) << 32 | (r.sport as u64) << 16 | r.dport as u64,
                word(&r.saddr, 0),
                word(&r.saddr, 8),
                word(&r.daddr, 0),
                word(&r.daddr, 8),
                r.dev,
                r.ino,
            ];
        }
        (Evidence::Syscall(i), None) => k[..2].copy_from_slice(&[2, i as u64]),
        (Evidence::Jvm { cause, detail }, _) => k[..3].copy_from_slice(&[3, cause as u64, detail as u64]),
        (Evidence::Window(c), _) => k[..2].copy_from_slice(&[4, c as u64]),
        (Evidence::PageFault, _) => k[0] = 5,
        (Evidence::None, _) => k[0] = 6,
        (Evidence::Preempted, _) => k[0] = 7,
        (Evidence::Throttled, _) => k[0] = 8,
        (Evidence::Steal, _) => k[0] = 9,
    }
    k
}
