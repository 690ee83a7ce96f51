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
//!
//! Its second part, forwarders ([`is_forwarder`]): a method a wildcard
//! selected, short enough for the JIT to inline everywhere
//! ([`jtrace_format::FORWARDER_MAX_CODE_LEN`]), straight and lock-free,
//! whose every call goes to a method with probes of its own or to one of
//! java.base's that never blocks ([`cannot_block`]).

use jtrace_format::{FORWARDER_MAX_CODE_LEN, TRIVIAL_MAX_CODE_LEN};

use super::class_file::{ConstPool, Reader};
use super::code::{decode, Ins, Kind};

const ACC_SYNCHRONIZED: u16 = 0x0020;
const ACC_NATIVE: u16 = 0x0100;
const ACC_ABSTRACT: u16 = 0x0400;
const INVOKEVIRTUAL: u8 = 0xb6;
const INVOKEINTERFACE: u8 = 0xb9;

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

/// The bytecode of a Code attribute's body, if it has at most `max_len`
/// bytes and no exception handler.
fn short_code(body: &[u8], max_len: usize) -> Option<&[u8]> {
    let mut r = Reader::new(body);
    let (Ok(_), Ok(_), Ok(len)) = (r.u2(), r.u2(), r.u4()) else {
        return None;
    };
    let len = len as usize;
    if len == 0 || len > max_len {
        return None;
    }
    let code = r.bytes(len).ok()?;
    // An exception handler: not a plain getter or forwarder.
    (r.u2() == Ok(0)).then_some(code)
}

/// Whether every branch of `ins` goes forward (each instruction runs at most once).
fn straight(ins: &[Ins]) -> bool {
    ins.iter().all(|x| {
        let forward = |t: u32| t > x.off;
        match &x.kind {
            Kind::Br16 { target, .. } | Kind::Br32 { target, .. } => forward(*target),
            Kind::Table { default, targets, .. } => forward(*default) && targets.iter().all(|&t| forward(t)),
            Kind::Lookup { default, pairs } => forward(*default) && pairs.iter().all(|&(_, t)| forward(t)),
            Kind::Plain | Kind::Ret => true,
        }
    })
}

/// Whether a Code attribute's body is trivial (the bytecode part of the rule).
fn code_is_trivial(body: &[u8]) -> bool {
    let Some(code) = short_code(body, TRIVIAL_MAX_CODE_LEN) else {
        return false;
    };
    let Ok(ins) = decode(code) else {
        return false;
    };
    ins.iter().all(|x| !forbidden(code[x.off as usize])) && straight(&ins)
}

/// Whether `class.name` (internal class name) is a java.base method that
/// never blocks (no lock, wait, park, sleep or I/O): the forwarder rule's
/// list in [`jtrace_format::TRIVIAL_RULE`]. A virtual call may reach an
/// override; one in a selected class has probes of its own.
fn cannot_block(class: &str, name: &str) -> bool {
    const CLASSES: [&str; 19] = [
        "java/lang/Boolean",
        "java/lang/Byte",
        "java/lang/Character",
        "java/lang/Short",
        "java/lang/Integer",
        "java/lang/Long",
        "java/lang/Float",
        "java/lang/Double",
        "java/lang/Number",
        "java/lang/Math",
        "java/lang/StrictMath",
        "java/lang/String",
        "java/lang/StringBuilder",
        "java/lang/AbstractStringBuilder",
        "java/util/Objects",
        "java/util/Arrays",
        "java/util/HashMap",
        "java/util/ArrayList",
        "java/util/AbstractMap$SimpleImmutableEntry",
    ];
    let exception = |c: &str| (c.ends_with("Exception") || c.ends_with("Error")) && !c[10..].contains('/');
    CLASSES.contains(&class)
        || class.starts_with("java/util/concurrent/atomic/")
        || (class == "java/lang/Object" && matches!(name, "<init>" | "getClass" | "hashCode" | "equals" | "clone"))
        || (name == "<init>"
            && (class.starts_with("java/lang/") || class.starts_with("java/util/"))
            && exception(class))
}

/// Whether the method (`raw`: its whole method_info) is a forwarder by
/// [`jtrace_format::TRIVIAL_RULE`]: short enough for the JIT to inline at
/// every call site (probes would push it past that), straight, no lock,
/// and every call it makes goes to a method `selected(class, name)` says
/// has probes of its own (class as an internal name), so that whatever
/// blocks under it blocks in a traced callee. Anything it cannot read is not.
pub(super) fn is_forwarder(
    raw: &[u8],
    cp: &ConstPool,
    access: u16,
    name: &str,
    selected: &mut dyn FnMut(&str, &str) -> bool,
) -> bool {
    if access & (ACC_SYNCHRONIZED | ACC_NATIVE | ACC_ABSTRACT) != 0 || name == "<init>" || name == "<clinit>" {
        return false;
    }
    code_attribute(raw, cp).is_some_and(|body| code_is_forwarder(body, cp, selected))
}

/// Whether a Code attribute's body is a forwarder's (the bytecode part of the rule).
fn code_is_forwarder(body: &[u8], cp: &ConstPool, selected: &mut dyn FnMut(&str, &str) -> bool) -> bool {
    let Some(code) = short_code(body, FORWARDER_MAX_CODE_LEN) else {
        return false;
    };
    let Ok(ins) = decode(code) else {
        return false;
    };
    straight(&ins)
        && ins.iter().all(|x| {
            let at = x.off as usize;
            match code[at] {
                INVOKEVIRTUAL..=INVOKEINTERFACE => {
                    let idx = u16::from_be_bytes([code[at + 1], code[at + 2]]);
                    match (cp.member_class(idx), cp.member_name(idx)) {
                        (Some(class), Some(callee)) => cannot_block(class, callee) || selected(class, callee),
                        _ => false,
                    }
                }
                // invokedynamic, locks, subroutines, wide.
                0xba | 0xc2 | 0xc3 | 0xa8 | 0xa9 | 0xc4 | 0xc9 => false,
                _ => true,
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

    /// A constant pool with three Methodrefs: 6 `org/h2/A.get()I`, 12
    /// `java/lang/Object.wait()V`, 18 `java/lang/Long.compare(JJ)I`.
    fn pool() -> ConstPool {
        let mut b = vec![0, 19];
        let utf8 = |b: &mut Vec<u8>, s: &str| {
            b.push(1);
            b.extend_from_slice(&(s.len() as u16).to_be_bytes());
            b.extend_from_slice(s.as_bytes());
        };
        for (k, (class, name, desc)) in [
            ("org/h2/A", "get", "()I"),
            ("java/lang/Object", "wait", "()V"),
            ("java/lang/Long", "compare", "(JJ)I"),
        ]
        .iter()
        .enumerate()
        {
            let base = 6 * k as u8;
            utf8(&mut b, class);
            b.extend_from_slice(&[7, 0, base + 1]);
            utf8(&mut b, name);
            utf8(&mut b, desc);
            b.extend_from_slice(&[12, 0, base + 3, 0, base + 4]);
            b.extend_from_slice(&[10, 0, base + 2, 0, base + 5]);
        }
        ConstPool::parse(&mut Reader::new(&b)).unwrap()
    }

    fn forwarder(code: &[u8]) -> bool {
        code_is_forwarder(&body(code, 0), &pool(), &mut |class, _| class.starts_with("org/h2/"))
    }

    #[test]
    fn a_short_method_whose_calls_are_all_traced_or_never_block_is_a_forwarder() {
        // aload_0; invokevirtual org/h2/A.get; ireturn
        assert!(forwarder(&[0x2a, 0xb6, 0, 6, 0xac]));
        // lload_1; lload_3; invokestatic Long.compare; ireturn
        assert!(forwarder(&[0x1f, 0x21, 0xb8, 0, 18, 0xac]));
        // aload_0; ifnull +7; aload_0; invokevirtual A.get; ireturn; iconst_0; ireturn
        assert!(forwarder(&[0x2a, 0xc6, 0, 8, 0x2a, 0xb6, 0, 6, 0xac, 0x03, 0xac]));
    }

    #[test]
    fn a_call_that_may_block_a_loop_a_lock_or_long_code_is_not_a_forwarder() {
        // aload_0; invokevirtual Object.wait; return
        assert!(!forwarder(&[0x2a, 0xb6, 0, 12, 0xb1]));
        // aload_0; invokevirtual A.get; pop; goto -5 (a loop)
        assert!(!forwarder(&[0x2a, 0xb6, 0, 6, 0x57, 0xa7, 0xff, 0xfb]));
        // aload_0; monitorenter; aload_0; invokevirtual A.get; ireturn
        assert!(!forwarder(&[0x2a, 0xc2, 0x2a, 0xb6, 0, 6, 0xac]));
        // invokedynamic; areturn
        assert!(!forwarder(&[0xba, 0, 6, 0, 0, 0xb0]));
        // a traced call inside a try block
        assert!(!code_is_forwarder(
            &body(&[0x2a, 0xb6, 0, 6, 0xac], 1),
            &pool(),
            &mut |_, _| true
        ));
        // 36 bytes: nops, then the call
        let mut long = vec![0u8; FORWARDER_MAX_CODE_LEN - 5];
        long.extend_from_slice(&[0x2a, 0xb6, 0, 6, 0xac]);
        assert!(forwarder(&long));
        long.insert(0, 0);
        assert!(!forwarder(&long));
    }

    #[test]
    fn java_base_methods_that_never_block_are_told_from_those_that_may() {
        assert!(cannot_block("java/lang/Long", "compare"));
        assert!(cannot_block(
            "java/util/concurrent/atomic/AtomicReference",
            "compareAndSet"
        ));
        assert!(cannot_block("java/lang/Object", "hashCode"));
        assert!(cannot_block("java/util/NoSuchElementException", "<init>"));
        assert!(!cannot_block("java/lang/Object", "wait"));
        assert!(!cannot_block("java/util/concurrent/locks/ReentrantLock", "lock"));
        assert!(
            !cannot_block("java/util/concurrent/TimeoutException", "<init>"),
            "not java.util itself"
        );
        assert!(!cannot_block("java/lang/IllegalStateException", "getMessage"));
        assert!(!cannot_block("java/io/FileInputStream", "read"));
    }
}
