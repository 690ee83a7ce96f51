//! Load-time class-file rewriting for method tracing.
//!
//! [`instrument_class`] takes a class file as the JVM hands it to the
//! ClassFileLoadHook and returns a copy in which every selected method calls
//! static probes of the agent's helper class:
//!
//! * `enter(I)I` at offset 0 (a prologue inserted before the original code),
//!   with the method id chosen by the caller; what it returns (the id if it
//!   recorded the entry, -1 if the method is demoted) goes into a new local
//!   (index: the old `max_locals`),
//! * `exit(I)V` with that local just before every `xRETURN`,
//! * `exitEx(I)V` with that local from a catch-all handler appended after
//!   the original code, which then rethrows the exception (`athrow`).
//!
//! So an invocation records both its ends or neither, whenever its method
//! is demoted (recursion included), and demoting takes no retransformation.
//! Every StackMapTable frame gets the new local (as a full frame: the
//! implicit first frame comes from the descriptor). Only code bodies and
//! the constant pool change (entries are appended), so the result is also
//! valid for RetransformClasses. Everything else is copied byte for byte.
//!
//! Inserting code shifts the original instructions, so the rewriter relocates
//! every branch (widening `goto`/`jsr` to `goto_w`/`jsr_w` when needed),
//! recomputes `tableswitch`/`lookupswitch` padding, and relocates the
//! exception table, StackMapTable (offset deltas and `uninitialized(offset)`
//! types), LineNumberTable and LocalVariable(Type)Table. Other attributes of
//! the Code attribute that hold code offsets (type annotations on code) are
//! dropped. A method that cannot be rewritten safely (a conditional branch
//! that would overflow 16 bits, code growing past 64 KiB, malformed code) is
//! left untouched and reported in [`Rewritten::skipped`].
//!
//! Constructors: until the `super(...)`/`this(...)` call the receiver is
//! `uninitializedThis`, so the catch-all handler is split in two: one
//! covering the code up to and including that call, whose StackMapTable frame
//! holds `uninitializedThis` (and so carries flagThisUninit), and one covering
//! the rest with no locals. Both only record and rethrow, which the verifier
//! allows in either state.
//!
//! With [`Options::skip_trivial`], a selected method that is trivial by
//! [`jtrace_format::TRIVIAL_RULE`] (a getter; or, with
//! [`Options::skip_forwarders`] and selected by a wildcard, a forwarder
//! whose callees all have probes or never block) gets no probes and is
//! listed in [`Rewritten::trivial`] (markers are never skipped).
//!
//! This file walks the class file and its methods; `code.rs` rewrites one
//! Code attribute, `stack_map.rs` relocates its StackMapTable,
//! `trivial.rs` is the trivial-method rule, and `class_file.rs` has the
//! reader and the constant pool.

mod class_file;
mod code;
mod stack_map;
mod trivial;

use class_file::{err, put_u2, put_u4, ConstPool, Reader, Result};
use code::ProbeRefs;

/// Internal name of the helper class holding the probes.
pub const PROBE_CLASS: &str = "jtrace/Probe";
/// Probe called on entry.
pub const ENTER: &str = "enter";
/// Probe called before a normal return.
pub const EXIT: &str = "exit";
/// Probe called when an exception leaves the method.
pub const EXIT_EX: &str = "exitEx";
/// Descriptor of the exit probes and of the reason markers' probes.
pub const PROBE_DESC: &str = "(I)V";
/// Descriptor of the entry probe: it returns what the exits get.
pub const ENTER_DESC: &str = "(I)I";
/// Ids at or above this one mark a method rather than trace it (the
/// virtual thread probes, [`crate::vthreads`]): no METHOD_DEF, no
/// method events.
pub const MARKER_MIN: u32 = u32::MAX - 0xFF;
/// Receiver markers (instance methods of `java.lang.VirtualThread`, whose
/// receiver is the virtual thread): the receiver is handed to the
/// `Probe` method of [`RECEIVER_PROBES`] at entry, and nothing else is
/// called. `unpark()` & co.: `Probe.unparked`.
pub const UNPARK_MARKER: u32 = u32::MAX;
/// `mount()`: `Probe.mounting`.
pub const MOUNT_MARKER: u32 = u32::MAX - 1;
/// `unmount()`: `Probe.unmounting`.
pub const UNMOUNT_MARKER: u32 = u32::MAX - 2;
/// `run(Runnable)`: `Probe.started`.
pub const START_MARKER: u32 = u32::MAX - 3;
/// The `Probe` methods of the receiver markers, by `u32::MAX - id`.
pub const RECEIVER_PROBES: [&str; 4] = ["unparked", "mounting", "unmounting", "started"];
/// Descriptor of the receiver markers' probes.
pub const RECEIVER_PROBE_DESC: &str = "(Ljava/lang/Object;)V";
/// Reason markers: `REASON_MARKER + why` (why a V_* code of
/// [`crate::probe::layout`], below [`REASON_CODES`]) makes a method call
/// `Probe.blocking(why)` at entry and `Probe.blocked(why)` at every exit
/// (the blocking calls that give an unmount its reason).
pub const REASON_MARKER: u32 = u32::MAX - 0x80;
/// The probes of the reason markers.
pub const BLOCKING: &str = "blocking";
/// See [`BLOCKING`].
pub const BLOCKED: &str = "blocked";

/// How many reason markers there are: one per V_* code a virtual thread
/// event can hold.
pub const REASON_CODES: u32 = 1 << crate::probe::layout::VTHREAD_WHAT_BITS;

/// Whether `id` is a reason marker ([`REASON_MARKER`]).
pub fn is_reason_marker(id: u32) -> bool {
    (REASON_MARKER..REASON_MARKER + REASON_CODES).contains(&id)
}

/// The name of the method that Methodref (or InterfaceMethodref) `index`
/// of a constant pool names; the pool as JVMTI's GetConstantPool gives it
/// (`count` and the entries' bytes). `None` for another entry or a pool
/// that does not parse.
pub(crate) fn invoked_name(count: u16, entries: &[u8], index: u16) -> Option<String> {
    let mut bytes = Vec::with_capacity(entries.len() + 2);
    put_u2(&mut bytes, count);
    bytes.extend_from_slice(entries);
    let pool = ConstPool::parse(&mut Reader::new(&bytes)).ok()?;
    pool.member_name(index).map(str::to_string)
}

/// The opcode of the instruction at bytecode index `at` of `code` (a
/// method's bytecodes) and that of the instruction before it (`None` at
/// 0); `None` if `at` does not begin an instruction or the code does not
/// decode.
pub(crate) fn opcode_and_previous(code: &[u8], at: usize) -> Option<(u8, Option<u8>)> {
    let ins = code::decode(code).ok()?;
    let i = ins.iter().position(|x| x.off as usize == at)?;
    let previous = i.checked_sub(1).map(|p| code[ins[p].off as usize]);
    Some((code[at], previous))
}

/// A method that was instrumented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instrumented {
    /// Method name.
    pub name: String,
    /// Method descriptor.
    pub desc: String,
    /// The id passed to the probes.
    pub id: u32,
}

/// A selected method left untouched, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Method name.
    pub name: String,
    /// Method descriptor.
    pub desc: String,
    /// Why it could not be rewritten.
    pub reason: String,
}

/// Result of [`instrument_class`].
#[derive(Debug, Default)]
pub struct Rewritten {
    /// Internal name of the class (`com/acme/Foo`).
    pub class: String,
    /// The new class file, `None` when nothing was changed.
    pub bytes: Option<Vec<u8>>,
    /// Methods instrumented.
    pub methods: Vec<Instrumented>,
    /// Selected methods that could not be instrumented.
    pub skipped: Vec<Skipped>,
    /// Selected methods left uninstrumented as trivial
    /// ([`Options::skip_trivial`]), with the ids they were given.
    pub trivial: Vec<Instrumented>,
}

/// How the method filter selects a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selected {
    /// Not selected, or in a class the agent never rewrites.
    No,
    /// By a rule with a wildcard in the method name (`org.h2.*`).
    Broadly,
    /// By a rule that names the method (`Main.run`).
    ByName,
}

/// How [`instrument_class`] rewrites.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Leave selected methods that are trivial by
    /// [`jtrace_format::TRIVIAL_RULE`] without probes.
    pub skip_trivial: bool,
    /// With `skip_trivial`, also leave the rule's forwarders (selected by a
    /// wildcard) without probes.
    pub skip_forwarders: bool,
}

/// Skips `count` attributes.
fn skip_attributes(r: &mut Reader) -> Result<()> {
    let n = r.u2()?;
    for _ in 0..n {
        r.u2()?;
        let len = r.u4()? as usize;
        r.bytes(len)?;
    }
    Ok(())
}

const ACC_STATIC: u16 = 0x0008;
const ACC_NATIVE: u16 = 0x0100;
const ACC_ABSTRACT: u16 = 0x0400;

/// Instruments the methods of `data` for which `select(class, name, desc)`
/// (class as an internal name) returns an id.
///
/// Returns an error only for a class file that cannot be parsed; methods that
/// cannot be rewritten are listed in [`Rewritten::skipped`].
///
/// `selection(class, name)` (class as an internal name) says how the
/// method filter selects a method, for the trivial rule's forwarders
/// ([`Options::skip_trivial`]): only one a wildcard selected can be one,
/// and only if every method it calls gets probes of its own.
pub fn instrument_class(
    data: &[u8],
    select: &mut dyn FnMut(&str, &str, &str) -> Option<u32>,
    selection: &mut dyn FnMut(&str, &str) -> Selected,
    opts: Options,
) -> Result<Rewritten> {
    let mut r = Reader::new(data);
    if r.u4()? != 0xCAFE_BABE {
        return err("not a class file");
    }
    let _minor = r.u2()?;
    let major = r.u2()?;
    let mut cp = ConstPool::parse(&mut r)?;
    let cp_end = r.pos;
    let _access = r.u2()?;
    let this_class = r.u2()?;
    let class = cp.class_name(this_class).unwrap_or_default().to_string();
    if class.is_empty() {
        return err("cannot read this_class");
    }
    let mut result = Rewritten {
        class: class.clone(),
        ..Default::default()
    };
    r.u2()?; // super_class
    let ninterfaces = r.u2()? as usize;
    r.bytes(2 * ninterfaces)?;
    let nfields = r.u2()?;
    for _ in 0..nfields {
        r.bytes(6)?;
        skip_attributes(&mut r)?;
    }
    let methods_count_pos = r.pos;
    let nmethods = r.u2()?;

    struct Plan {
        start: usize,
        end: usize,
        name: String,
        desc: String,
        access: u16,
        id: Option<u32>,
    }
    let mut plans = Vec::with_capacity(nmethods as usize);
    for _ in 0..nmethods {
        let start = r.pos;
        let access = r.u2()?;
        let name = cp.utf8(r.u2()?).unwrap_or_default().to_string();
        let desc = cp.utf8(r.u2()?).unwrap_or_default().to_string();
        skip_attributes(&mut r)?;
        let mut id = if access & (ACC_NATIVE | ACC_ABSTRACT) != 0 {
            None
        } else {
            select(&class, &name, &desc)
        };
        if let Some(i) = id.filter(|&i| opts.skip_trivial && i < MARKER_MIN) {
            let raw = &data[start..r.pos];
            let broadly = opts.skip_forwarders && selection(&class, &name) == Selected::Broadly;
            let mut instrumented = |class: &str, name: &str| selection(class, name) != Selected::No;
            if trivial::is_trivial(raw, &cp, access, &name)
                || (broadly && trivial::is_forwarder(raw, &cp, access, &name, &mut instrumented))
            {
                result.trivial.push(Instrumented {
                    name: name.clone(),
                    desc: desc.clone(),
                    id: i,
                });
                id = None;
            }
        }
        plans.push(Plan {
            start,
            end: r.pos,
            name,
            desc,
            access,
            id,
        });
    }
    let methods_end = r.pos;
    if plans.iter().all(|p| p.id.is_none()) {
        return Ok(result);
    }

    let probe_class = cp.class_entry(PROBE_CLASS)?;
    let throwable = cp.class_entry("java/lang/Throwable")?;
    let refs = ProbeRefs {
        enter: cp.methodref(probe_class, ENTER, ENTER_DESC)?,
        exit: cp.methodref(probe_class, EXIT, PROBE_DESC)?,
        exit_ex: cp.methodref(probe_class, EXIT_EX, PROBE_DESC)?,
        receiver_probes: {
            let mut refs = [0u16; RECEIVER_PROBES.len()];
            for (i, name) in RECEIVER_PROBES.iter().enumerate() {
                if plans.iter().any(|p| p.id == Some(u32::MAX - i as u32)) {
                    refs[i] = cp.methodref(probe_class, name, RECEIVER_PROBE_DESC)?;
                }
            }
            refs
        },
        blocking: if plans.iter().any(|p| p.id.is_some_and(is_reason_marker)) {
            (
                cp.methodref(probe_class, BLOCKING, PROBE_DESC)?,
                cp.methodref(probe_class, BLOCKED, PROBE_DESC)?,
            )
        } else {
            (0, 0)
        },
        throwable,
        stack_map_table: cp.utf8_entry("StackMapTable")?,
    };

    let mut methods_out = Vec::with_capacity(methods_end - methods_count_pos + 1024);
    put_u2(&mut methods_out, nmethods);
    for p in &plans {
        let raw = &data[p.start..p.end];
        let Some(id) = p.id else {
            methods_out.extend_from_slice(raw);
            continue;
        };
        let is_init = p.name == "<init>";
        let is_static = p.access & ACC_STATIC != 0;
        // The method rewritten, or why it is left as it is.
        let rewritten: std::result::Result<Vec<u8>, String> = 'method: {
            let initial = match initial_locals(&p.desc, is_static, is_init, this_class, &class, &mut cp) {
                Ok(l) => l,
                Err(e) => break 'method Err(e.0),
            };
            let ctx = code::MethodCtx {
                id,
                is_init,
                initial_locals: initial,
                is_static,
                major,
                marker: if is_reason_marker(id) {
                    code::Marker::Reason((id - REASON_MARKER) as u16)
                } else if id >= MARKER_MIN {
                    code::Marker::Receiver(refs.receiver_probes.get((u32::MAX - id) as usize).copied().unwrap_or(0))
                } else {
                    code::Marker::None
                },
            };
            let receiver = matches!(ctx.marker, code::Marker::Receiver(_));
            if matches!(ctx.marker, code::Marker::Receiver(0)) || (receiver && (ctx.is_static || ctx.is_init)) {
                break 'method Err("a receiver marker needs an instance method".into());
            }
            rewrite_method(raw, &mut cp, &refs, &ctx).map_err(|e| e.0)
        };
        match rewritten {
            Ok(m) => {
                methods_out.extend_from_slice(&m);
                result.methods.push(Instrumented {
                    name: p.name.clone(),
                    desc: p.desc.clone(),
                    id,
                });
            }
            Err(reason) => {
                methods_out.extend_from_slice(raw);
                result.skipped.push(Skipped {
                    name: p.name.clone(),
                    desc: p.desc.clone(),
                    reason,
                });
            }
        }
    }
    if result.methods.is_empty() {
        return Ok(result);
    }
    let mut out = Vec::with_capacity(data.len() + cp.appended().len() + methods_out.len());
    out.extend_from_slice(&data[..8]);
    put_u2(&mut out, cp.count());
    out.extend_from_slice(&data[10..cp_end]);
    out.extend_from_slice(cp.appended());
    out.extend_from_slice(&data[cp_end..methods_count_pos]);
    out.extend_from_slice(&methods_out);
    out.extend_from_slice(&data[methods_end..]);
    result.bytes = Some(out);
    Ok(result)
}

/// The locals of a method's implicit first stack map frame: the receiver
/// (`uninitializedThis` in a constructor other than Object's), then the
/// arguments of `desc` (a long or double is one entry for two slots).
fn initial_locals(
    desc: &str,
    is_static: bool,
    is_init: bool,
    this_class: u16,
    class: &str,
    cp: &mut ConstPool,
) -> Result<Vec<stack_map::VType>> {
    use stack_map::{VType, ITEM_DOUBLE, ITEM_FLOAT, ITEM_INTEGER, ITEM_LONG, ITEM_UNINITIALIZED_THIS};
    let mut out = Vec::new();
    if !is_static {
        out.push(if is_init && class != "java/lang/Object" {
            VType::Simple(ITEM_UNINITIALIZED_THIS)
        } else {
            VType::Object(this_class)
        });
    }
    let b = desc.as_bytes();
    let mut i = 1;
    while i < b.len() && b[i] != b')' {
        let start = i;
        while i < b.len() && b[i] == b'[' {
            i += 1;
        }
        if i >= b.len() {
            return err("bad method descriptor");
        }
        let end = match b[i] {
            b'L' => match desc[i..].find(';') {
                Some(k) => i + k + 1,
                None => return err("bad method descriptor"),
            },
            _ => i + 1,
        };
        out.push(if start < i || b[i] == b'L' {
            // An array's class name is its descriptor; an object's is L...;'s inside.
            let name = if start < i {
                &desc[start..end]
            } else {
                &desc[start + 1..end - 1]
            };
            VType::Object(cp.class_entry(name)?)
        } else {
            match b[i] {
                b'Z' | b'B' | b'C' | b'S' | b'I' => VType::Simple(ITEM_INTEGER),
                b'F' => VType::Simple(ITEM_FLOAT),
                b'D' => VType::Simple(ITEM_DOUBLE),
                b'J' => VType::Simple(ITEM_LONG),
                _ => return err("bad method descriptor"),
            }
        });
        i = end;
        if i >= b.len() {
            return err("bad method descriptor");
        }
    }
    Ok(out)
}

/// Rewrites one method_info whose Code attribute gets the probes.
fn rewrite_method(raw: &[u8], cp: &mut ConstPool, refs: &ProbeRefs, ctx: &code::MethodCtx) -> Result<Vec<u8>> {
    let mut r = Reader::new(raw);
    let mut out = Vec::with_capacity(raw.len() + 256);
    out.extend_from_slice(r.bytes(6)?);
    let nattr = r.u2()?;
    put_u2(&mut out, nattr);
    let mut had_code = false;
    for _ in 0..nattr {
        let name_idx = r.u2()?;
        let len = r.u4()? as usize;
        let body = r.bytes(len)?;
        if cp.utf8(name_idx) == Some("Code") && !had_code {
            had_code = true;
            let new_body = code::rewrite_code(body, cp, refs, ctx)?;
            put_u2(&mut out, name_idx);
            put_u4(&mut out, new_body.len() as u32);
            out.extend_from_slice(&new_body);
        } else {
            put_u2(&mut out, name_idx);
            put_u4(&mut out, len as u32);
            out.extend_from_slice(body);
        }
    }
    if !had_code {
        return err("no Code attribute");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::stack_map::{VType, ITEM_DOUBLE, ITEM_INTEGER, ITEM_LONG, ITEM_UNINITIALIZED_THIS};
    use super::*;

    #[test]
    fn the_first_frame_holds_the_receiver_then_the_arguments() {
        let mut cp = ConstPool::parse(&mut Reader::new(&[0, 1])).unwrap();
        let desc = "(I[JLjava/lang/String;DZ[[Ljava/lang/Object;Ljava/lang/String;)V";
        let l = initial_locals(desc, false, false, 7, "a/B", &mut cp).unwrap();
        let (arr, s, arr2) = match (l[2], l[3], l[6]) {
            (VType::Object(a), VType::Object(s), VType::Object(b)) => (a, s, b),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            l,
            vec![
                VType::Object(7),
                VType::Simple(ITEM_INTEGER),
                VType::Object(arr),
                VType::Object(s),
                VType::Simple(ITEM_DOUBLE),
                VType::Simple(ITEM_INTEGER),
                VType::Object(arr2),
                VType::Object(s),
            ]
        );
        assert!(arr != s && arr2 != s && arr != arr2, "one class entry per name");
        // A constructor's receiver is uninitializedThis (not Object's), a static method has none.
        assert_eq!(
            initial_locals("()V", false, true, 7, "a/B", &mut cp).unwrap(),
            vec![VType::Simple(ITEM_UNINITIALIZED_THIS)]
        );
        assert_eq!(
            initial_locals("()V", false, true, 7, "java/lang/Object", &mut cp).unwrap(),
            vec![VType::Object(7)]
        );
        assert_eq!(
            initial_locals("(J)V", true, false, 7, "a/B", &mut cp).unwrap(),
            vec![VType::Simple(ITEM_LONG)]
        );
        for bad in ["(Ljava/lang/String", "([", "(Q)V"] {
            assert!(initial_locals(bad, true, false, 7, "a/B", &mut cp).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_invoke_names_its_method_through_the_pool() {
        // 1: Utf8 "loadClass", 2: Utf8 "(Ljava/lang/String;)Ljava/lang/Class;",
        // 3: NameAndType(1, 2), 4: Long (two slots), 6: Class(7), 7: Utf8 "a/B",
        // 8: Methodref(6, 3).
        let mut pool = Vec::new();
        for s in ["loadClass", "(Ljava/lang/String;)Ljava/lang/Class;"] {
            pool.push(1);
            put_u2(&mut pool, s.len() as u16);
            pool.extend_from_slice(s.as_bytes());
        }
        pool.extend_from_slice(&[12, 0, 1, 0, 2, 5, 0, 0, 0, 0, 0, 0, 0, 9, 7, 0, 7, 1, 0, 3]);
        pool.extend_from_slice(b"a/B");
        pool.extend_from_slice(&[10, 0, 6, 0, 3]);
        assert_eq!(invoked_name(9, &pool, 8).as_deref(), Some("loadClass"));
        // Not a Methodref, out of range, a pool cut short.
        assert_eq!(invoked_name(9, &pool, 3), None);
        assert_eq!(invoked_name(9, &pool, 40), None);
        assert_eq!(invoked_name(9, &pool[..pool.len() - 2], 8), None);
    }

    #[test]
    fn the_instruction_before_a_bytecode_index_is_found() {
        // aload_0, dup, astore_1, monitorenter, getstatic #2, tableswitch
        // (padded to 8; default, low 0, high 0, one target: all to 24),
        // return.
        let mut code = vec![0x2a, 0x59, 0x4c, 0xc2, 0xb2, 0, 2, 0xaa];
        for v in [17i32, 0, 0, 17] {
            code.extend_from_slice(&v.to_be_bytes());
        }
        code.push(0xb1);
        assert_eq!(opcode_and_previous(&code, 0), Some((0x2a, None)));
        assert_eq!(opcode_and_previous(&code, 4), Some((0xb2, Some(0xc2))));
        assert_eq!(opcode_and_previous(&code, 3), Some((0xc2, Some(0x4c))));
        assert_eq!(opcode_and_previous(&code, 24), Some((0xb1, Some(0xaa))));
        // Inside an instruction, past the end.
        assert_eq!(opcode_and_previous(&code, 5), None);
        assert_eq!(opcode_and_previous(&code, 25), None);
    }
}
