//! A JVM stream's records about its code (compiled methods and their
//! inlining, code blobs, `Method*` addresses, native bindings), held
//! until the stream's method ids are all defined, then resolved into the
//! JVM's code tables that name stack frames.

use crate::model::event::MethodIdx;
use crate::stacks::{Blob, CompiledCode, JvmCode};
use jtrace_format as fmt;
use std::collections::HashMap;

/// A JVM stream's records about code, kept until its method ids are all
/// defined (a METHOD_DEF may follow the record that uses its id).
#[derive(Default)]
pub(super) struct CodeRecords {
    pub(super) compiled: Vec<(u64, bool, fmt::CompiledMethod)>,
    pub(super) inline: Vec<(u64, fmt::CompiledInline)>,
    pub(super) blobs: Vec<fmt::CodeBlob>,
    /// (`Method*`, method id, when described).
    pub(super) methods: Vec<(u64, u64, u64)>,
    /// (method id, the native function it is bound to), in the order bound.
    pub(super) natives: Vec<(u64, String)>,
}

/// A compiled method's tier and, per pc, its inlining chain (innermost first).
type TierAndInlining = (u32, Vec<(u64, Vec<Option<MethodIdx>>)>);

impl CodeRecords {
    pub(super) fn is_empty(&self) -> bool {
        self.compiled.is_empty() && self.blobs.is_empty() && self.methods.is_empty() && self.natives.is_empty()
    }

    /// Into the JVM's code tables, naming methods with `method`.
    pub(super) fn resolve(self, jvm: &mut JvmCode, method: impl Fn(u64) -> Option<MethodIdx>) {
        // COMPILED_INLINE goes with the COMPILED_METHOD_LOAD of the same
        // code address and time (one callback writes both): by address
        // alone, code put where unloaded code was would take the old
        // code's inlining too.
        let mut inline: HashMap<(u64, u64), TierAndInlining> = HashMap::new();
        for (ts, c) in self.inline {
            let e = inline.entry((c.code_addr, ts)).or_default();
            e.0 = c.tier;
            e.1.extend(c.pcs.into_iter().map(|p| {
                let chain = p.methods.iter().map(|&m| method(m)).collect();
                (p.pc, chain)
            }));
        }
        for (ts, load, c) in self.compiled {
            if load {
                let (tier, mut pcs) = inline.remove(&(c.code_addr, ts)).unwrap_or_default();
                pcs.sort_by_key(|p| p.0);
                let code = CompiledCode {
                    method: method(c.method),
                    tier,
                    inline: pcs,
                };
                jvm.compiled.load(c.code_addr, u64::from(c.code_size), ts, code);
            } else {
                jvm.compiled.unload(c.code_addr, ts);
            }
        }
        for b in self.blobs {
            jvm.blobs.push(Blob {
                start: b.start,
                end: b.start + u64::from(b.size),
                interpreter: b.kind == fmt::CODE_INTERPRETER,
                name: b.name,
            });
        }
        for (addr, id, ts) in self.methods {
            if let Some(m) = method(id) {
                jvm.methods.describe(addr, ts, m);
            }
        }
        // A method bound again (the agent's own wrappers) calls the last.
        for (id, function) in self.natives {
            if let Some(m) = method(id) {
                jvm.natives.insert(m, function);
            }
        }
    }
}
