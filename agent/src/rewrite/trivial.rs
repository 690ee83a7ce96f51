//! The trivial-method rule ([`jtrace_format::TRIVIAL_RULE`]): a selected
//! method whose bytecode cannot block or take time of its own worth a
//! probe pair is left uninstrumented at load time (as JProfiler and
//! YourKit skip getters and setters). A probe pair costs tens of ns and
//! keeps the JIT from inlining the method into its callers; a getter's
//! own time is a few ns, and counts as its caller's, exactly.
//!
//! The rule is conservative: each instruction runs at most once (no
//! backward branch, no `jsr`/`ret`), nothing is called (no `invoke*`),
//! allocated (`new*`), locked (`monitorenter`, `synchronized`) or thrown
//! (`athrow`), no exception handler, and at most
//! [`jtrace_format::TRIVIAL_MAX_CODE_LEN`] bytes of code.

use jtrace_format::TRIVIAL_MAX_CODE_LEN;

use super::class_file::{ConstPool, Reader};
use super::code::{decode, Kind};

const ACC_SYNCHRONIZED: u16 = 0x0020;
const ACC_NATIVE: u16 = 0x0100;
const ACC_ABSTRACT: u16 = 0x0400;

/// Whether an opcode disqualifies a method: calls (`invoke*`), allocation
/// (`new`, `newarray`, `anewarray`, `multianewarray`), `athrow`, locks,
/// subroutines (`jsr`, `ret`, `jsr_w`: `ret` is an indirect branch) and
/// `wide` (which has a `ret` form; short code has no use for it).
fn forbidden(op: u8) -> bool {
    matches!(op, 0xa8 | 0xa9 | 0xb6..=0xbd | 0xbf | 0xc2..=0xc5 | 0xc9)
}

/// Whether the method (`raw`: its whole method_info) is trivial by
/// [`jtrace_format::TRIVIAL_RULE`]. Anything it cannot read is not.
pub(super) fn is_trivial(raw: &[u8], cp: &ConstPool, access: u16, name: &str) -> bool {
    if access & (ACC_SYNCHRONIZED | ACC_NATIVE | ACC_ABSTRACT) != 0 || name == "<init>" || name == "<clinit>" {
        return false;
    }
    let Some(code_body) = code_attribute(raw, cp) else {
        return false;
    };
    code_is_trivial(code_body)
}

/// The body of the method's Code attribute.
fn code_attribute<'a>(raw: &'a [u8], cp: &ConstPool) -> Option<&'a [u8]> {
    let mut r = Reader::new(raw);
    r.bytes(6).ok()?;
    let nattr = r.u2().ok()?;
    for _ in 0..nattr {
        let name = r.u2().ok()?;
        let len = r.u4().ok()? as usize;
        let body = r.bytes(len).ok()?;
        if cp.utf8(name) == Some("Code") {
            return Some(body);
        }
    }
    None
}

/// Whether a Code attribute's body is trivial (the bytecode part of the rule).
fn code_is_trivial(body: &[u8]) -> bool {
    let mut r = Reader::new(body);
    let (Ok(_), Ok(_), Ok(len)) = (r.u2(), r.u2(), r.u4()) else {
        return false;
    };
    let len = len as usize;
    if len == 0 || len > TRIVIAL_MAX_CODE_LEN {
        return false;
    }
    let Ok(code) = r.bytes(len) else {
        return false;
    };
    if r.u2() != Ok(0) {
        // An exception handler: not a plain getter.
        return false;
    }
    let Ok(ins) = decode(code) else {
        return false;
    };
    ins.iter().all(|x| {
        let forward = |t: u32| t > x.off;
        !forbidden(code[x.off as usize])
            && match &x.kind {
                Kind::Br16 { target, .. } | Kind::Br32 { target, .. } => forward(*target),
                Kind::Table { default, targets, .. } => forward(*default) && targets.iter().all(|&t| forward(t)),
                Kind::Lookup { default, pairs } => forward(*default) && pairs.iter().all(|&(_, t)| forward(t)),
                Kind::Plain | Kind::Ret => true,
            }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Code attribute body around `code`, with `handlers` exception entries.
    fn body(code: &[u8], handlers: u16) -> Vec<u8> {
        let mut b = vec![0, 2, 0, 2];
        b.extend_from_slice(&(code.len() as u32).to_be_bytes());
        b.extend_from_slice(code);
        b.extend_from_slice(&handlers.to_be_bytes());
        for _ in 0..handlers {
            b.extend_from_slice(&[0, 0, 0, 1, 0, 1, 0, 0]);
        }
        b.extend_from_slice(&[0, 0]);
        b
    }

    #[test]
    fn the_rule_as_reported_states_the_limit_applied() {
        let limit = format!("at most {TRIVIAL_MAX_CODE_LEN} bytes");
        assert!(jtrace_format::TRIVIAL_RULE.contains(&limit));
    }

    #[test]
    fn getters_setters_and_forward_branches_are_trivial() {
        // aload_0; getfield #2; ireturn
        assert!(code_is_trivial(&body(&[0x2a, 0xb4, 0, 2, 0xac], 0)));
        // aload_0; iload_1; putfield #2; return
        assert!(code_is_trivial(&body(&[0x2a, 0x1b, 0xb5, 0, 2, 0xb1], 0)));
        // iload_0; ifeq +5; iconst_1; ireturn; iconst_0; ireturn
        assert!(code_is_trivial(&body(&[0x1a, 0x99, 0, 5, 0x04, 0xac, 0x03, 0xac], 0)));
        // getstatic #2; areturn
        assert!(code_is_trivial(&body(&[0xb2, 0, 2, 0xb0], 0)));
    }

    #[test]
    fn calls_allocation_locks_loops_handlers_and_long_code_are_not() {
        // aload_0; invokevirtual #3; ireturn
        assert!(!code_is_trivial(&body(&[0x2a, 0xb6, 0, 3, 0xac], 0)));
        // invokedynamic #3 0 0; areturn
        assert!(!code_is_trivial(&body(&[0xba, 0, 3, 0, 0, 0xb0], 0)));
        // new #3; areturn
        assert!(!code_is_trivial(&body(&[0xbb, 0, 3, 0xb0], 0)));
        // iconst_1; newarray int; areturn
        assert!(!code_is_trivial(&body(&[0x04, 0xbc, 10, 0xb0], 0)));
        // aload_0; monitorenter; return
        assert!(!code_is_trivial(&body(&[0x2a, 0xc2, 0xb1], 0)));
        // aload_0; athrow
        assert!(!code_is_trivial(&body(&[0x2a, 0xbf], 0)));
        // iinc 0 1; goto -3 (a loop)
        assert!(!code_is_trivial(&body(&[0x84, 0, 1, 0xa7, 0xff, 0xfd], 0)));
        // a getter inside a try block
        assert!(!code_is_trivial(&body(&[0x2a, 0xb4, 0, 2, 0xac], 1)));
        // 65 bytes of nop then return: too long
        let mut long = vec![0u8; TRIVIAL_MAX_CODE_LEN];
        long.push(0xb1);
        assert!(!code_is_trivial(&body(&long, 0)));
        long.truncate(TRIVIAL_MAX_CODE_LEN - 1);
        long.push(0xb1);
        assert!(code_is_trivial(&body(&long, 0)));
        // malformed: a branch outside the code
        assert!(!code_is_trivial(&body(&[0xa7, 0, 9], 0)));
    }
}
