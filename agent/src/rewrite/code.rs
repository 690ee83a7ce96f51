//! Rewriting of one Code attribute: probes inserted, everything relocated.
//!
//! [`rewrite_code`] goes by phase: read the attribute ([`CodeAttr`]) and
//! decode its instructions ([`decode`]), choose the probe calls
//! ([`Probes`]), lay the code out ([`Layout`], widening branches), place
//! the catch-all handlers ([`catch_regions`]), then emit the code and
//! relocate what refers to offsets ([`Rewrite`]).

use super::class_file::{err, put_u2, put_u4, ConstPool, Reader, Result};
use super::stack_map::{
    relocate_stack_map, slots_of, OffsetMap, VType, ITEM_INTEGER, ITEM_TOP, ITEM_UNINITIALIZED_THIS,
};

/// What the rewriter needs to know about the method being rewritten.
pub(crate) struct MethodCtx {
    /// Id passed to the probes.
    pub(crate) id: u32,
    /// The method is a constructor (`<init>`).
    pub(crate) is_init: bool,
    /// The method is static (unused by the frames, kept for diagnostics).
    #[allow(dead_code)]
    pub(crate) is_static: bool,
    /// Class-file major version.
    pub(crate) major: u16,
    /// Marked rather than traced ([`super::MARKER_MIN`]).
    pub(crate) marker: Marker,
    /// The locals of the implicit first stack map frame (receiver and
    /// arguments): a traced method's frames are all restated with the
    /// entry probe's local.
    pub(crate) initial_locals: Vec<VType>,
}

/// How a marked method calls the probes instead of enter/exit.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marker {
    /// Traced: the method probes.
    None,
    /// The receiver handed to this `Probe` method (constant-pool index) at
    /// entry; no-ops where the exit probes go.
    Receiver(u16),
    /// `refs.blocking` at entry and `refs.blocked` at every exit, with this
    /// reason instead of a method id.
    Reason(u16),
}

/// Constant-pool indices the inserted code uses.
pub(crate) struct ProbeRefs {
    pub(crate) enter: u16,
    pub(crate) exit: u16,
    pub(crate) exit_ex: u16,
    /// The receiver markers' probes, by `u32::MAX - id` (0 where no method
    /// of the class uses one).
    pub(crate) receiver_probes: [u16; 4],
    /// `Probe.blocking(int)` and `Probe.blocked(int)` (0 when no method of
    /// the class is a reason marker).
    pub(crate) blocking: (u16, u16),
    pub(crate) throwable: u16,
    pub(crate) stack_map_table: u16,
}

const GOTO: u8 = 0xa7;
const JSR: u8 = 0xa8;
const GOTO_W: u8 = 0xc8;
const JSR_W: u8 = 0xc9;
const TABLESWITCH: u8 = 0xaa;
const LOOKUPSWITCH: u8 = 0xab;
const NEW: u8 = 0xbb;
const INVOKESPECIAL: u8 = 0xb7;
const INVOKESTATIC: u8 = 0xb8;
const ATHROW: u8 = 0xbf;
const SIPUSH: u8 = 0x11;
const LDC_W: u8 = 0x13;
const ALOAD_0: u8 = 0x2a;
const NOP: u8 = 0x00;
const ILOAD: u8 = 0x15;
const ISTORE: u8 = 0x36;
const WIDE: u8 = 0xc4;

/// Bytes of `push id; invokestatic probe`.
const CALL_LEN: u32 = 6;

pub(super) enum Kind {
    /// Copied verbatim.
    Plain,
    /// 16-bit branch (`if*`, `goto`, `jsr`) to an old offset.
    Br16 {
        op: u8,
        target: u32,
    },
    /// 32-bit branch (`goto_w`, `jsr_w`).
    Br32 {
        op: u8,
        target: u32,
    },
    Table {
        default: u32,
        low: i32,
        high: i32,
        targets: Vec<u32>,
    },
    Lookup {
        default: u32,
        pairs: Vec<(i32, u32)>,
    },
    /// `xRETURN`: preceded by the exit probe.
    Ret,
}

/// One decoded instruction.
pub(super) struct Ins {
    /// Its offset in the original code.
    pub(super) off: u32,
    len: u32,
    /// What relocating it takes.
    pub(super) kind: Kind,
}

/// Length of a fixed-size instruction, `None` for variable-size or invalid ones.
fn op_len(op: u8) -> Option<u32> {
    Some(match op {
        0x00..=0x0f => 1,
        0x10 => 2,
        0x11 => 3,
        0x12 => 2,
        0x13 | 0x14 => 3,
        0x15..=0x19 => 2,
        0x1a..=0x35 => 1,
        0x36..=0x3a => 2,
        0x3b..=0x83 => 1,
        0x84 => 3,
        0x85..=0x98 => 1,
        0x99..=0xa8 => 3,
        0xa9 => 2,
        0xac..=0xb1 => 1,
        0xb2..=0xb8 => 3,
        0xb9 | 0xba => 5,
        0xbb => 3,
        0xbc => 2,
        0xbd => 3,
        0xbe | 0xbf => 1,
        0xc0 | 0xc1 => 3,
        0xc2 | 0xc3 => 1,
        0xc5 => 4,
        0xc6 | 0xc7 => 3,
        0xc8 | 0xc9 => 5,
        _ => return None,
    })
}

fn i16_at(code: &[u8], at: usize) -> i64 {
    i16::from_be_bytes([code[at], code[at + 1]]) as i64
}

fn i32_at(code: &[u8], at: usize) -> Result<i32> {
    match code.get(at..at + 4) {
        Some(b) => Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]])),
        None => err("truncated switch"),
    }
}

fn target(base: usize, disp: i64, len: usize) -> Result<u32> {
    let t = base as i64 + disp;
    if t < 0 || t >= len as i64 {
        return err(format!("branch at {base} to {t} outside the code"));
    }
    Ok(t as u32)
}

/// Decodes `code` into instructions, checking every branch target.
pub(super) fn decode(code: &[u8]) -> Result<Vec<Ins>> {
    let n = code.len();
    let mut out = Vec::with_capacity(n / 2);
    let mut i = 0usize;
    while i < n {
        let op = code[i];
        let (len, kind) = match op {
            0x99..=0xa8 | 0xc6 | 0xc7 if i + 3 <= n => (
                3,
                Kind::Br16 {
                    op,
                    target: target(i, i16_at(code, i + 1), n)?,
                },
            ),
            GOTO_W | JSR_W => (
                5,
                Kind::Br32 {
                    op,
                    target: target(i, i32_at(code, i + 1)? as i64, n)?,
                },
            ),
            TABLESWITCH => {
                let p = (i + 4) & !3;
                let default = target(i, i32_at(code, p)? as i64, n)?;
                let (low, high) = (i32_at(code, p + 4)?, i32_at(code, p + 8)?);
                if high < low || (high as i64 - low as i64) >= n as i64 {
                    return err(format!("bad tableswitch bounds at {i}"));
                }
                let count = (high as i64 - low as i64 + 1) as usize;
                let mut targets = Vec::with_capacity(count);
                for k in 0..count {
                    targets.push(target(i, i32_at(code, p + 12 + 4 * k)? as i64, n)?);
                }
                (
                    p + 12 + 4 * count - i,
                    Kind::Table {
                        default,
                        low,
                        high,
                        targets,
                    },
                )
            }
            LOOKUPSWITCH => {
                let p = (i + 4) & !3;
                let default = target(i, i32_at(code, p)? as i64, n)?;
                let count = i32_at(code, p + 4)?;
                if count < 0 || count as usize > n {
                    return err(format!("bad lookupswitch size at {i}"));
                }
                let mut pairs = Vec::with_capacity(count as usize);
                for k in 0..count as usize {
                    let key = i32_at(code, p + 8 + 8 * k)?;
                    pairs.push((key, target(i, i32_at(code, p + 12 + 8 * k)? as i64, n)?));
                }
                (p + 8 + 8 * count as usize - i, Kind::Lookup { default, pairs })
            }
            0xac..=0xb1 => (1, Kind::Ret),
            0xc4 => (if code.get(i + 1) == Some(&0x84) { 6 } else { 4 }, Kind::Plain),
            _ => match op_len(op) {
                Some(l) => (l as usize, Kind::Plain),
                None => return err(format!("invalid opcode {op:#x} at {i}")),
            },
        };
        if i + len > n {
            return err(format!("instruction at {i} runs past the code"));
        }
        out.push(Ins {
            off: i as u32,
            len: len as u32,
            kind,
        });
        i += len;
    }
    Ok(out)
}

fn pad(at: u32) -> u32 {
    (4 - (at + 1) % 4) % 4
}

fn size(ins: &Ins, at: u32, wide: bool, exit_len: u32) -> u32 {
    match &ins.kind {
        Kind::Plain => ins.len,
        Kind::Br16 { .. } => {
            if wide {
                5
            } else {
                3
            }
        }
        Kind::Br32 { .. } => 5,
        Kind::Table { targets, .. } => 1 + pad(at) + 12 + 4 * targets.len() as u32,
        Kind::Lookup { pairs, .. } => 1 + pad(at) + 8 + 8 * pairs.len() as u32,
        Kind::Ret => exit_len + 1,
    }
}

/// Index of the instruction that is the constructor's `super(...)`/`this(...)`
/// call: the first `invokespecial <init>` not paired with an earlier `new`.
fn super_call(code: &[u8], ins: &[Ins], cp: &ConstPool) -> Option<usize> {
    let mut pending_new = 0usize;
    for (k, x) in ins.iter().enumerate() {
        let op = code[x.off as usize];
        if op == NEW {
            pending_new += 1;
        } else if op == INVOKESPECIAL {
            let idx = u16::from_be_bytes([code[x.off as usize + 1], code[x.off as usize + 2]]);
            if cp.member_name(idx) == Some("<init>") {
                if pending_new == 0 {
                    return Some(k);
                }
                pending_new -= 1;
            }
        }
    }
    None
}

/// A Code attribute as read (JVMS §4.7.3); offsets are the old code's.
struct CodeAttr<'a> {
    max_stack: u16,
    max_locals: u16,
    code: &'a [u8],
    /// Exception table entries: start, end, handler, catch type.
    extable: Vec<(u32, u32, u32, u16)>,
    /// The attribute's own attributes: name index and body.
    attrs: Vec<(u16, &'a [u8])>,
}

impl<'a> CodeAttr<'a> {
    /// Reads the body of a Code attribute (everything after attribute_length).
    fn read(body: &'a [u8]) -> Result<CodeAttr<'a>> {
        let mut r = Reader::new(body);
        let max_stack = r.u2()?;
        let max_locals = r.u2()?;
        let code_len = r.u4()? as usize;
        if code_len == 0 || code_len > 0xFFFF {
            return err("bad code length");
        }
        let code = r.bytes(code_len)?;
        let nex = r.u2()?;
        let mut extable = Vec::with_capacity(nex as usize);
        for _ in 0..nex {
            extable.push((r.u2()? as u32, r.u2()? as u32, r.u2()? as u32, r.u2()?));
        }
        let nattr = r.u2()?;
        let mut attrs = Vec::with_capacity(nattr as usize);
        for _ in 0..nattr {
            let name = r.u2()?;
            let len = r.u4()? as usize;
            attrs.push((name, r.bytes(len)?));
        }
        Ok(CodeAttr {
            max_stack,
            max_locals,
            code,
            extable,
            attrs,
        })
    }
}

/// The probe calls inserted into one method: their operands and lengths.
struct Probes<'a> {
    refs: &'a ProbeRefs,
    marker: Marker,
    /// `sipush id` for small ids, else `ldc_w` of an Integer constant.
    id_insn: [u8; 3],
    /// A traced method keeps what the entry probe returned in a new local
    /// and hands it to the exit probes.
    guard: Option<u16>,
    /// Bytes of the code before the original code.
    enter_len: u32,
    /// Bytes inserted before each `xRETURN` (and in each handler before `athrow`).
    exit_len: u32,
}

impl<'a> Probes<'a> {
    fn new(ctx: &MethodCtx, refs: &'a ProbeRefs, max_locals: u16, cp: &mut ConstPool) -> Result<Probes<'a>> {
        let id = match ctx.marker {
            Marker::Reason(why) => why as u32,
            _ => ctx.id,
        };
        let id_insn: [u8; 3] = if id <= 0x7FFF {
            [SIPUSH, (id >> 8) as u8, id as u8]
        } else {
            let i = cp.int_entry(id)?;
            [LDC_W, (i >> 8) as u8, i as u8]
        };
        let guard = match ctx.marker {
            Marker::None if max_locals == u16::MAX => return err("no local left for the entry probe's result"),
            Marker::None => Some(max_locals),
            _ => None,
        };
        let local_len = match guard {
            Some(l) if l > 0xFF => 4,
            Some(_) => 2,
            None => 0,
        };
        // Markers' calls have a probe call's length, so the layout is the same.
        let (enter_len, exit_len) = match guard {
            Some(_) => (CALL_LEN + local_len, 3 + local_len),
            None => (CALL_LEN, CALL_LEN),
        };
        Ok(Probes {
            refs,
            marker: ctx.marker,
            id_insn,
            guard,
            enter_len,
            exit_len,
        })
    }

    /// Bytes of a catch-all handler: the exit probe, then `athrow`.
    fn handler_len(&self) -> u32 {
        self.exit_len + 1
    }

    /// Appends `iload`/`istore` of the guard local (wide past 255).
    fn local_insn(&self, op: u8, out: &mut Vec<u8>) {
        let l = self.guard.unwrap_or(0);
        if l <= 0xFF {
            out.extend_from_slice(&[op, l as u8]);
        } else {
            out.extend_from_slice(&[WIDE, op]);
            put_u2(out, l);
        }
    }

    /// Appends what stands for a call of probe `method` (enter, exit or
    /// exitEx) in this method: the call, a marker's call or no-ops.
    fn call(&self, out: &mut Vec<u8>, method: u16) {
        let method = match self.marker {
            Marker::None if method == self.refs.enter => {
                out.extend_from_slice(&self.id_insn);
                out.push(INVOKESTATIC);
                put_u2(out, method);
                self.local_insn(ISTORE, out);
                return;
            }
            Marker::None => {
                self.local_insn(ILOAD, out);
                out.push(INVOKESTATIC);
                put_u2(out, method);
                return;
            }
            Marker::Receiver(probe) => {
                if method == self.refs.enter {
                    out.extend_from_slice(&[ALOAD_0, INVOKESTATIC]);
                    put_u2(out, probe);
                    out.extend_from_slice(&[NOP, NOP]);
                } else {
                    out.extend_from_slice(&[NOP; CALL_LEN as usize]);
                }
                return;
            }
            Marker::Reason(_) if method == self.refs.enter => self.refs.blocking.0,
            Marker::Reason(_) => self.refs.blocking.1,
        };
        out.extend_from_slice(&self.id_insn);
        out.push(INVOKESTATIC);
        put_u2(out, method);
    }

    /// Handler locals `locals` with the guard local appended as an int
    /// (padded with `top` up to its slot), for a traced method.
    fn with_guard(&self, mut locals: Vec<VType>) -> Vec<VType> {
        if let Some(l) = self.guard {
            let mut slots = locals.iter().map(slots_of).sum::<u32>();
            while slots < l as u32 {
                locals.push(VType::Simple(ITEM_TOP));
                slots += 1;
            }
            locals.push(VType::Simple(ITEM_INTEGER));
        }
        locals
    }
}

/// Where the rewritten code puts each original instruction.
struct Layout {
    /// The `goto`/`jsr` widened to `goto_w`/`jsr_w`.
    wide: Vec<bool>,
    /// New offset of each instruction.
    new_off: Vec<u32>,
    map: OffsetMap,
    /// End of the relocated original code, where the handlers begin.
    end: u32,
}

impl Layout {
    /// Lays the instructions out after the entry probe, widening goto/jsr
    /// until every branch fits.
    fn new(ins: &[Ins], code_len: usize, probes: &Probes) -> Result<Layout> {
        let mut wide = vec![false; ins.len()];
        let mut new_off = vec![0u32; ins.len()];
        let mut map = OffsetMap {
            map: vec![u32::MAX; code_len + 1],
        };
        let end = loop {
            let mut at = probes.enter_len;
            for (k, x) in ins.iter().enumerate() {
                new_off[k] = at;
                map.map[x.off as usize] = at;
                at += size(x, at, wide[k], probes.exit_len);
            }
            map.map[code_len] = at;
            let mut changed = false;
            for (k, x) in ins.iter().enumerate() {
                if let Kind::Br16 { op, target } = x.kind {
                    if wide[k] {
                        continue;
                    }
                    let d = map.get(target)? as i64 - new_off[k] as i64;
                    if d < i16::MIN as i64 || d > i16::MAX as i64 {
                        if op == GOTO || op == JSR {
                            wide[k] = true;
                            changed = true;
                        } else {
                            return err("a conditional branch would overflow after rewriting");
                        }
                    }
                }
            }
            if !changed {
                break at;
            }
        };
        Ok(Layout {
            wide,
            new_off,
            map,
            end,
        })
    }
}

/// A catch-all region of the new code, whose handler records the exit
/// and rethrows.
struct Region {
    start: u32,
    end: u32,
    /// The handler's frame locals (it reads the guard local).
    locals: Vec<VType>,
}

/// A handler's stack map frame: new offset, locals, stack.
type HandlerFrame = (u32, Vec<VType>, Vec<VType>);

/// One Code attribute being rewritten: what the emit and relocate phases share.
struct Rewrite<'a> {
    old: CodeAttr<'a>,
    ins: Vec<Ins>,
    probes: Probes<'a>,
    layout: Layout,
    regions: Vec<Region>,
}

/// Rewrites the body of a Code attribute (everything after attribute_length).
pub(crate) fn rewrite_code(body: &[u8], cp: &mut ConstPool, refs: &ProbeRefs, ctx: &MethodCtx) -> Result<Vec<u8>> {
    let old = CodeAttr::read(body)?;
    let ins = decode(old.code)?;
    let split = if ctx.is_init {
        match super_call(old.code, &ins, cp) {
            Some(k) if k + 1 < ins.len() => Some(k),
            _ => return err("constructor without a recognisable super()/this() call"),
        }
    } else {
        None
    };
    let probes = Probes::new(ctx, refs, old.max_locals, cp)?;
    let layout = Layout::new(&ins, old.code.len(), &probes)?;
    let regions = catch_regions(split, &layout, &probes);
    let total = layout.end as usize + regions.len() * probes.handler_len() as usize;
    if total > 0xFFFF {
        return err("code would exceed 64 KiB");
    }
    let rw = Rewrite {
        old,
        ins,
        probes,
        layout,
        regions,
    };
    let (code, handlers) = rw.emit(total)?;
    let extable = rw.exception_table(&handlers)?;
    let attrs = rw.attributes(cp, ctx, &handlers)?;
    Ok(rw.assemble(body.len(), &code, &extable, attrs))
}

/// The catch-all regions: the whole code after the entry probe, or, in a
/// constructor, the code around its `super(...)`/`this(...)` call (`split`).
fn catch_regions(split: Option<usize>, layout: &Layout, probes: &Probes) -> Vec<Region> {
    let region = |start, end, locals| Region {
        start,
        end,
        locals: probes.with_guard(locals),
    };
    let (enter_len, new_off) = (probes.enter_len, &layout.new_off);
    match split {
        // The super()/this() call itself cannot be covered: the verifier
        // checks its handlers both with the incoming locals
        // (uninitializedThis) and the outgoing ones (the class type) under
        // flagThisUninit, which no stack map frame can express. An exception
        // thrown by the super constructor therefore leaves without an exit
        // probe; the agent closes such frames when it sees the caller's exit.
        Some(k) => {
            let mut regions = Vec::new();
            if new_off[k] > enter_len {
                regions.push(region(
                    enter_len,
                    new_off[k],
                    vec![VType::Simple(ITEM_UNINITIALIZED_THIS)],
                ));
            }
            regions.push(region(new_off[k + 1], layout.end, Vec::new()));
            regions
        }
        None => vec![region(enter_len, layout.end, Vec::new())],
    }
}

impl Rewrite<'_> {
    /// The new code (`total` bytes): the entry probe, the original
    /// instructions relocated, then the catch-all handlers, with their frames.
    fn emit(&self, total: usize) -> Result<(Vec<u8>, Vec<HandlerFrame>)> {
        let mut out = Vec::with_capacity(total);
        self.probes.call(&mut out, self.probes.refs.enter);
        for k in 0..self.ins.len() {
            debug_assert_eq!(out.len() as u32, self.layout.new_off[k]);
            self.emit_ins(k, &mut out)?;
        }
        debug_assert_eq!(out.len() as u32, self.layout.end);
        let mut handlers = Vec::with_capacity(self.regions.len());
        for region in &self.regions {
            let stack = vec![VType::Object(self.probes.refs.throwable)];
            handlers.push((out.len() as u32, region.locals.clone(), stack));
            self.probes.call(&mut out, self.probes.refs.exit_ex);
            out.push(ATHROW);
        }
        Ok((out, handlers))
    }

    /// Appends instruction `k` at its new offset, its branches relocated.
    fn emit_ins(&self, k: usize, out: &mut Vec<u8>) -> Result<()> {
        let (x, new_off) = (&self.ins[k], self.layout.new_off[k]);
        let rel = |t: u32| -> Result<i32> { Ok((self.layout.map.get(t)? as i64 - new_off as i64) as i32) };
        let src = &self.old.code[x.off as usize..(x.off + x.len) as usize];
        match &x.kind {
            Kind::Plain => out.extend_from_slice(src),
            Kind::Br16 { op, target } => {
                let d = rel(*target)?;
                if self.layout.wide[k] {
                    out.push(if *op == GOTO { GOTO_W } else { JSR_W });
                    put_u4(out, d as u32);
                } else {
                    out.push(*op);
                    put_u2(out, d as i16 as u16);
                }
            }
            Kind::Br32 { op, target } => {
                out.push(*op);
                put_u4(out, rel(*target)? as u32);
            }
            Kind::Table {
                default,
                low,
                high,
                targets,
            } => {
                out.push(TABLESWITCH);
                out.extend(std::iter::repeat_n(0, pad(new_off) as usize));
                put_u4(out, rel(*default)? as u32);
                put_u4(out, *low as u32);
                put_u4(out, *high as u32);
                for t in targets {
                    put_u4(out, rel(*t)? as u32);
                }
            }
            Kind::Lookup { default, pairs } => {
                out.push(LOOKUPSWITCH);
                out.extend(std::iter::repeat_n(0, pad(new_off) as usize));
                put_u4(out, rel(*default)? as u32);
                put_u4(out, pairs.len() as u32);
                for (key, t) in pairs {
                    put_u4(out, *key as u32);
                    put_u4(out, rel(*t)? as u32);
                }
            }
            Kind::Ret => {
                self.probes.call(out, self.probes.refs.exit);
                out.push(src[0]);
            }
        }
        Ok(())
    }

    /// The exception table: the original entries relocated first (inner
    /// handlers keep priority), then the catch-alls.
    fn exception_table(&self, handlers: &[HandlerFrame]) -> Result<Vec<u8>> {
        let (old, map) = (&self.old.extable, &self.layout.map);
        let mut out = Vec::with_capacity(8 * (old.len() + self.regions.len()) + 2);
        put_u2(&mut out, (old.len() + self.regions.len()) as u16);
        for &(s, e, h, t) in old {
            put_u2(&mut out, map.get(s)? as u16);
            put_u2(&mut out, map.get(e)? as u16);
            put_u2(&mut out, map.get(h)? as u16);
            put_u2(&mut out, t);
        }
        for (r, (h, _, _)) in self.regions.iter().zip(handlers) {
            put_u2(&mut out, r.start as u16);
            put_u2(&mut out, r.end as u16);
            put_u2(&mut out, *h as u16);
            put_u2(&mut out, 0);
        }
        Ok(out)
    }

    /// The Code attribute's attributes, relocated: the StackMapTable (with
    /// the handlers' frames, made if the method had none), LineNumberTable
    /// and LocalVariable(Type)Table.
    fn attributes(&self, cp: &ConstPool, ctx: &MethodCtx, handlers: &[HandlerFrame]) -> Result<Vec<(u16, Vec<u8>)>> {
        let map = &self.layout.map;
        let with_frames = ctx.major >= 50;
        let frame_guard = self.probes.guard.map(|l| (l, ctx.initial_locals.as_slice()));
        let mut out = Vec::new();
        let mut had_smt = false;
        for &(name, a) in &self.old.attrs {
            match cp.utf8(name) {
                Some("StackMapTable") if with_frames && !had_smt => {
                    had_smt = true;
                    out.push((name, relocate_stack_map(Some(a), map, handlers, frame_guard)?));
                }
                Some("LineNumberTable") => out.push((name, relocate_line_numbers(a, map)?)),
                Some("LocalVariableTable") | Some("LocalVariableTypeTable") => {
                    out.push((name, relocate_local_variables(a, map)?))
                }
                // Anything else that may hold code offsets (type annotations on
                // code, CharacterRangeTable, vendor attributes) is dropped: none
                // is needed to load or verify the class.
                _ => {}
            }
        }
        if with_frames && !had_smt {
            let smt = relocate_stack_map(None, map, handlers, frame_guard)?;
            out.push((self.probes.refs.stack_map_table, smt));
        }
        Ok(out)
    }

    /// The new Code attribute's body (`old_len`: the old one's length).
    fn assemble(&self, old_len: usize, code: &[u8], extable: &[u8], attrs: Vec<(u16, Vec<u8>)>) -> Vec<u8> {
        let old = &self.old;
        let mut res = Vec::with_capacity(old_len + code.len() - old.code.len() + 64);
        // A probe's operand sits on a return value, or on a handler's exception.
        put_u2(&mut res, old.max_stack.saturating_add(1).max(2));
        put_u2(&mut res, self.probes.guard.map_or(old.max_locals, |l| l + 1));
        put_u4(&mut res, code.len() as u32);
        res.extend_from_slice(code);
        res.extend_from_slice(extable);
        put_u2(&mut res, attrs.len() as u16);
        for (name, b) in attrs {
            put_u2(&mut res, name);
            put_u4(&mut res, b.len() as u32);
            res.extend_from_slice(&b);
        }
        res
    }
}

/// A LineNumberTable with its start pcs relocated (pc 0 stays at 0: the
/// entry probe belongs to the first line).
fn relocate_line_numbers(a: &[u8], map: &OffsetMap) -> Result<Vec<u8>> {
    let mut r = Reader::new(a);
    let n = r.u2()?;
    let mut b = Vec::with_capacity(a.len());
    put_u2(&mut b, n);
    for _ in 0..n {
        let pc = r.u2()? as u32;
        let line = r.u2()?;
        put_u2(&mut b, if pc == 0 { 0 } else { map.get(pc)? as u16 });
        put_u2(&mut b, line);
    }
    Ok(b)
}

/// A LocalVariable(Type)Table with its ranges relocated (a range from pc 0
/// still starts at 0).
fn relocate_local_variables(a: &[u8], map: &OffsetMap) -> Result<Vec<u8>> {
    let mut r = Reader::new(a);
    let n = r.u2()?;
    let mut b = Vec::with_capacity(a.len());
    put_u2(&mut b, n);
    for _ in 0..n {
        let start = r.u2()? as u32;
        let len = r.u2()? as u32;
        let ns = if start == 0 { 0 } else { map.get(start)? };
        let ne = map.get(start + len)?;
        put_u2(&mut b, ns as u16);
        put_u2(&mut b, (ne - ns) as u16);
        b.extend_from_slice(r.bytes(6)?);
    }
    Ok(b)
}
