//! Load-time class-file rewriting for method tracing.
//!
//! [`instrument_class`] takes a class file as the JVM hands it to the
//! ClassFileLoadHook and returns a copy in which every selected method calls
//! static probes of the agent's helper class:
//!
//! * `enter(I)V` at offset 0 (a prologue inserted before the original code),
//! * `exit(I)V` just before every `xRETURN`,
//! * `exitEx(I)V` from a catch-all handler appended after the original code,
//!   which then rethrows the exception (`athrow`).
//!
//! The int argument is the method id chosen by the caller. Only code bodies
//! and the constant pool change (entries are appended), so the result is also
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

mod code;

use std::collections::HashMap;

/// Internal name of the helper class holding the probes.
pub const PROBE_CLASS: &str = "jtrace/Probe";
/// Probe called on entry.
pub const ENTER: &str = "enter";
/// Probe called before a normal return.
pub const EXIT: &str = "exit";
/// Probe called when an exception leaves the method.
pub const EXIT_EX: &str = "exitEx";
/// Descriptor shared by the three probes.
pub const PROBE_DESC: &str = "(I)V";

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
}

/// A class-file parsing error (the class is then left untouched).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

type Result<T> = std::result::Result<T, Error>;

fn err<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error(msg.into()))
}

/// Big-endian reader over a byte slice.
#[derive(Clone)]
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }
    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        let Some(end) = end else {
            return err("truncated class file");
        };
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    pub(crate) fn u1(&mut self) -> Result<u8> {
        Ok(self.bytes(1)?[0])
    }
    pub(crate) fn u2(&mut self) -> Result<u16> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    pub(crate) fn u4(&mut self) -> Result<u32> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn at_end(&self) -> bool {
        self.pos == self.data.len()
    }
}

pub(crate) fn put_u2(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_u4(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// The constant-pool entries the rewriter needs to read.
#[derive(Debug, Clone)]
enum Cp {
    /// Unused slot (index 0, second half of long/double) or a kind not needed.
    Other,
    Utf8(String),
    /// Methodref / InterfaceMethodref: name_and_type index.
    MemberRef(u16),
    /// NameAndType: name index.
    NameAndType(u16),
}

/// Parsed constant pool plus appended entries.
pub(crate) struct ConstPool {
    entries: Vec<Cp>,
    /// Encoded entries appended by the rewriter.
    added: Vec<u8>,
    /// Index the next appended entry gets.
    next: u32,
    utf8_index: HashMap<String, u16>,
    int_index: HashMap<u32, u16>,
}

impl ConstPool {
    fn parse(r: &mut Reader) -> Result<ConstPool> {
        let count = r.u2()? as usize;
        let mut entries = vec![Cp::Other; count.max(1)];
        let mut utf8_index = HashMap::new();
        let mut i = 1;
        while i < count {
            let tag = r.u1()?;
            let mut slots = 1;
            entries[i] = match tag {
                1 => {
                    let n = r.u2()? as usize;
                    let s = String::from_utf8_lossy(r.bytes(n)?).into_owned();
                    utf8_index.entry(s.clone()).or_insert(i as u16);
                    Cp::Utf8(s)
                }
                3 | 4 => {
                    r.bytes(4)?;
                    Cp::Other
                }
                5 | 6 => {
                    r.bytes(8)?;
                    slots = 2;
                    Cp::Other
                }
                7 | 8 | 16 | 19 | 20 => {
                    r.bytes(2)?;
                    Cp::Other
                }
                9 => {
                    r.bytes(4)?;
                    Cp::Other
                }
                10 | 11 => {
                    r.u2()?;
                    Cp::MemberRef(r.u2()?)
                }
                12 => {
                    let name = r.u2()?;
                    r.u2()?;
                    Cp::NameAndType(name)
                }
                15 => {
                    r.bytes(3)?;
                    Cp::Other
                }
                17 | 18 => {
                    r.bytes(4)?;
                    Cp::Other
                }
                t => return err(format!("unknown constant pool tag {t} at entry {i}")),
            };
            i += slots;
        }
        Ok(ConstPool {
            entries,
            added: Vec::new(),
            next: count as u32,
            utf8_index,
            int_index: HashMap::new(),
        })
    }

    pub(crate) fn utf8(&self, idx: u16) -> Option<&str> {
        match self.entries.get(idx as usize) {
            Some(Cp::Utf8(s)) => Some(s),
            _ => None,
        }
    }

    /// Name of the method a Methodref/InterfaceMethodref refers to.
    pub(crate) fn member_name(&self, idx: u16) -> Option<&str> {
        let Some(Cp::MemberRef(nat)) = self.entries.get(idx as usize) else {
            return None;
        };
        let Some(Cp::NameAndType(name)) = self.entries.get(*nat as usize) else {
            return None;
        };
        self.utf8(*name)
    }

    fn push(&mut self, bytes: &[u8]) -> Result<u16> {
        if self.next >= 0xFFFF {
            return err("constant pool full");
        }
        let idx = self.next as u16;
        self.next += 1;
        self.added.extend_from_slice(bytes);
        Ok(idx)
    }

    /// Index of a Utf8 entry with text `s` (existing or appended).
    pub(crate) fn utf8_entry(&mut self, s: &str) -> Result<u16> {
        if let Some(&i) = self.utf8_index.get(s) {
            return Ok(i);
        }
        let mut b = vec![1];
        put_u2(&mut b, s.len() as u16);
        b.extend_from_slice(s.as_bytes());
        let i = self.push(&b)?;
        self.utf8_index.insert(s.to_string(), i);
        Ok(i)
    }

    /// Appends a Class entry.
    fn class_entry(&mut self, name: &str) -> Result<u16> {
        let n = self.utf8_entry(name)?;
        let mut b = vec![7];
        put_u2(&mut b, n);
        self.push(&b)
    }

    /// Appends a Methodref entry.
    fn methodref(&mut self, class: u16, name: &str, desc: &str) -> Result<u16> {
        let (n, d) = (self.utf8_entry(name)?, self.utf8_entry(desc)?);
        let mut nat = vec![12];
        put_u2(&mut nat, n);
        put_u2(&mut nat, d);
        let nat = self.push(&nat)?;
        let mut b = vec![10];
        put_u2(&mut b, class);
        put_u2(&mut b, nat);
        self.push(&b)
    }

    /// Index of an Integer entry holding `v` (appended once).
    pub(crate) fn int_entry(&mut self, v: u32) -> Result<u16> {
        if let Some(&i) = self.int_index.get(&v) {
            return Ok(i);
        }
        let mut b = vec![3];
        put_u4(&mut b, v);
        let i = self.push(&b)?;
        self.int_index.insert(v, i);
        Ok(i)
    }
}

/// Constant-pool indices the inserted code uses.
pub(crate) struct ProbeRefs {
    pub(crate) enter: u16,
    pub(crate) exit: u16,
    pub(crate) exit_ex: u16,
    pub(crate) throwable: u16,
    pub(crate) stack_map_table: u16,
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
pub fn instrument_class(data: &[u8], select: &mut dyn FnMut(&str, &str, &str) -> Option<u32>) -> Result<Rewritten> {
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
    let class = class_name_of(data, this_class, &cp).unwrap_or_default();
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
        let id = if access & (ACC_NATIVE | ACC_ABSTRACT) != 0 {
            None
        } else {
            select(&class, &name, &desc)
        };
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
        enter: cp.methodref(probe_class, ENTER, PROBE_DESC)?,
        exit: cp.methodref(probe_class, EXIT, PROBE_DESC)?,
        exit_ex: cp.methodref(probe_class, EXIT_EX, PROBE_DESC)?,
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
        let ctx = code::MethodCtx {
            id,
            is_init: p.name == "<init>",
            is_static: p.access & ACC_STATIC != 0,
            major,
        };
        match rewrite_method(raw, &mut cp, &refs, &ctx) {
            Ok(m) => {
                methods_out.extend_from_slice(&m);
                result.methods.push(Instrumented {
                    name: p.name.clone(),
                    desc: p.desc.clone(),
                    id,
                });
            }
            Err(e) => {
                methods_out.extend_from_slice(raw);
                result.skipped.push(Skipped {
                    name: p.name.clone(),
                    desc: p.desc.clone(),
                    reason: e.0,
                });
            }
        }
    }
    if result.methods.is_empty() {
        return Ok(result);
    }
    let mut out = Vec::with_capacity(data.len() + cp.added.len() + methods_out.len());
    out.extend_from_slice(&data[..8]);
    put_u2(&mut out, cp.next as u16);
    out.extend_from_slice(&data[10..cp_end]);
    out.extend_from_slice(&cp.added);
    out.extend_from_slice(&data[cp_end..methods_count_pos]);
    out.extend_from_slice(&methods_out);
    out.extend_from_slice(&data[methods_end..]);
    result.bytes = Some(out);
    Ok(result)
}

/// Name of the Class constant at `idx` (re-reading the pool, which stores
/// only what the rewriter needs).
fn class_name_of(data: &[u8], idx: u16, cp: &ConstPool) -> Option<String> {
    let mut r = Reader::new(data);
    r.pos = 8;
    let count = r.u2().ok()? as usize;
    let mut i = 1;
    while i < count {
        let tag = r.u1().ok()?;
        let (len, slots) = match tag {
            1 => (r.clone().u2().ok()? as usize + 2, 1),
            3 | 4 | 9..=12 | 17 | 18 => (4, 1),
            5 | 6 => (8, 2),
            7 | 8 | 16 | 19 | 20 => (2, 1),
            15 => (3, 1),
            _ => return None,
        };
        if i == idx as usize {
            if tag != 7 {
                return None;
            }
            let name = r.u2().ok()?;
            return cp.utf8(name).map(str::to_string);
        }
        r.bytes(len).ok()?;
        i += slots;
    }
    None
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
