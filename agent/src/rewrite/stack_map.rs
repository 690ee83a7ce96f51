//! StackMapTable relocation: the frames' offsets (and `uninitialized(offset)`
//! types) moved to where the rewritten code puts them, every frame given the
//! entry probe's local when there is one, and the handlers' frames appended.

use super::class_file::{err, put_u2, Reader, Result};

/// Old offsets (instruction starts, plus the code length) to new ones.
pub(super) struct OffsetMap {
    /// New offset at each old one; `u32::MAX` where no instruction starts.
    pub(super) map: Vec<u32>,
}

impl OffsetMap {
    /// The new offset of old offset `old`.
    pub(super) fn get(&self, old: u32) -> Result<u32> {
        match self.map.get(old as usize) {
            Some(&v) if v != u32::MAX => Ok(v),
            _ => err(format!("offset {old} is not an instruction boundary")),
        }
    }
}

// verification_type_info tags (JVMS §4.7.4) of the verification types
// of §4.10.1.2.
pub(super) const ITEM_TOP: u8 = 0;
pub(super) const ITEM_INTEGER: u8 = 1;
pub(super) const ITEM_FLOAT: u8 = 2;
pub(super) const ITEM_DOUBLE: u8 = 3;
pub(super) const ITEM_LONG: u8 = 4;
pub(super) const ITEM_UNINITIALIZED_THIS: u8 = 6;
const ITEM_OBJECT: u8 = 7;
const ITEM_UNINITIALIZED: u8 = 8;

/// A verification_type_info; `Simple` is a tag without operand (`ITEM_TOP`
/// to `ITEM_UNINITIALIZED_THIS`), `Uninitialized` carries an old offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum VType {
    Simple(u8),
    Object(u16),
    Uninitialized(u32),
}

/// Local variable slots a verification type takes (long and double: two).
pub(super) fn slots_of(v: &VType) -> u32 {
    match v {
        VType::Simple(ITEM_DOUBLE | ITEM_LONG) => 2,
        _ => 1,
    }
}

fn read_vtype(r: &mut Reader) -> Result<VType> {
    Ok(match r.u1()? {
        ITEM_OBJECT => VType::Object(r.u2()?),
        ITEM_UNINITIALIZED => VType::Uninitialized(r.u2()? as u32),
        t @ ITEM_TOP..=ITEM_UNINITIALIZED_THIS => VType::Simple(t),
        t => return err(format!("bad verification type {t}")),
    })
}

fn write_vtype(out: &mut Vec<u8>, v: VType, map: &OffsetMap) -> Result<()> {
    match v {
        VType::Simple(t) => out.push(t),
        VType::Object(c) => {
            out.push(ITEM_OBJECT);
            put_u2(out, c);
        }
        VType::Uninitialized(o) => {
            out.push(ITEM_UNINITIALIZED);
            put_u2(out, map.get(o)? as u16);
        }
    }
    Ok(())
}

enum Frame {
    Same,
    SameLocals1(VType),
    Chop(u8),
    Append(Vec<VType>),
    Full(Vec<VType>, Vec<VType>),
}

/// Relocates a StackMapTable body and appends `extra` full frames
/// (new offset, locals, stack) after the relocated ones. With `guard`
/// (the entry probe's local and the implicit first frame's locals), every
/// frame becomes a full frame whose locals end with that local as an int.
pub(super) fn relocate_stack_map(
    body: Option<&[u8]>,
    map: &OffsetMap,
    extra: &[(u32, Vec<VType>, Vec<VType>)],
    guard: Option<(u16, &[VType])>,
) -> Result<Vec<u8>> {
    let mut frames: Vec<(u32, Frame)> = Vec::new();
    if let Some(body) = body {
        let mut r = Reader::new(body);
        let n = r.u2()?;
        let mut prev: i64 = -1;
        for _ in 0..n {
            let tag = r.u1()?;
            let (delta, f) = match tag {
                0..=63 => (tag as u32, Frame::Same),
                64..=127 => ((tag - 64) as u32, Frame::SameLocals1(read_vtype(&mut r)?)),
                247 => {
                    let d = r.u2()? as u32;
                    (d, Frame::SameLocals1(read_vtype(&mut r)?))
                }
                248..=250 => (r.u2()? as u32, Frame::Chop(251 - tag)),
                251 => (r.u2()? as u32, Frame::Same),
                252..=254 => {
                    let d = r.u2()? as u32;
                    let mut v = Vec::new();
                    for _ in 0..tag - 251 {
                        v.push(read_vtype(&mut r)?);
                    }
                    (d, Frame::Append(v))
                }
                255 => {
                    let d = r.u2()? as u32;
                    let nl = r.u2()?;
                    let mut locals = Vec::with_capacity(nl as usize);
                    for _ in 0..nl {
                        locals.push(read_vtype(&mut r)?);
                    }
                    let ns = r.u2()?;
                    let mut stack = Vec::with_capacity(ns as usize);
                    for _ in 0..ns {
                        stack.push(read_vtype(&mut r)?);
                    }
                    (d, Frame::Full(locals, stack))
                }
                t => return err(format!("reserved stack map frame type {t}")),
            };
            let off = prev + delta as i64 + 1;
            prev = off;
            frames.push((map.get(off as u32)?, f));
        }
        if !r.at_end() {
            return err("trailing bytes in StackMapTable");
        }
    }
    if let Some((local, initial)) = guard {
        frames = with_guard(frames, local, initial)?;
    }
    let mut out = Vec::with_capacity(body.map_or(0, <[u8]>::len) * 2 + 16 * extra.len() + 2);
    put_u2(&mut out, (frames.len() + extra.len()) as u16);
    let mut prev: i64 = -1;
    let mut delta_to = |new_off: u32| -> Result<u32> {
        let d = new_off as i64 - prev - 1;
        if !(0..=0xFFFF).contains(&d) {
            return err("stack map frames out of order after relocation");
        }
        prev = new_off as i64;
        Ok(d as u32)
    };
    for (off, f) in frames {
        let d = delta_to(off)?;
        match f {
            Frame::Same if d <= 63 => out.push(d as u8),
            Frame::Same => {
                out.push(251);
                put_u2(&mut out, d as u16);
            }
            Frame::SameLocals1(v) => {
                if d <= 63 {
                    out.push(64 + d as u8);
                } else {
                    out.push(247);
                    put_u2(&mut out, d as u16);
                }
                write_vtype(&mut out, v, map)?;
            }
            Frame::Chop(k) => {
                out.push(251 - k);
                put_u2(&mut out, d as u16);
            }
            Frame::Append(v) => {
                out.push(251 + v.len() as u8);
                put_u2(&mut out, d as u16);
                for t in v {
                    write_vtype(&mut out, t, map)?;
                }
            }
            Frame::Full(l, s) => {
                out.push(255);
                put_u2(&mut out, d as u16);
                put_u2(&mut out, l.len() as u16);
                for t in l {
                    write_vtype(&mut out, t, map)?;
                }
                put_u2(&mut out, s.len() as u16);
                for t in s {
                    write_vtype(&mut out, t, map)?;
                }
            }
        }
    }
    for (off, l, s) in extra {
        let d = delta_to(*off)?;
        out.push(255);
        put_u2(&mut out, d as u16);
        put_u2(&mut out, l.len() as u16);
        for t in l {
            write_vtype(&mut out, *t, map)?;
        }
        put_u2(&mut out, s.len() as u16);
        for t in s {
            write_vtype(&mut out, *t, map)?;
        }
    }
    Ok(out)
}

/// The frames restated as full frames whose locals are padded with `top`
/// up to slot `local`, which is an int (the entry probe's result).
fn with_guard(frames: Vec<(u32, Frame)>, local: u16, initial: &[VType]) -> Result<Vec<(u32, Frame)>> {
    let mut locals: Vec<VType> = initial.to_vec();
    let mut out = Vec::with_capacity(frames.len());
    for (off, f) in frames {
        let stack = match f {
            Frame::Same => Vec::new(),
            Frame::SameLocals1(v) => vec![v],
            Frame::Chop(k) => {
                let Some(n) = locals.len().checked_sub(k as usize) else {
                    return err("chop_frame removes more locals than there are");
                };
                locals.truncate(n);
                Vec::new()
            }
            Frame::Append(v) => {
                locals.extend(v);
                Vec::new()
            }
            Frame::Full(l, s) => {
                locals = l;
                s
            }
        };
        let mut l = locals.clone();
        let mut slots: u32 = l.iter().map(slots_of).sum();
        if slots > local as u32 {
            return err("a stack map frame has more locals than max_locals");
        }
        while slots < local as u32 {
            l.push(VType::Simple(ITEM_TOP));
            slots += 1;
        }
        l.push(VType::Simple(ITEM_INTEGER));
        out.push((off, Frame::Full(l, stack)));
    }
    Ok(out)
}
