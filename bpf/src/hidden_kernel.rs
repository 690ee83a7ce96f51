//! Kernel addresses kept out of the stream, for a viewer the kernel does
//! not show them to (`kernel.kptr_restrict`, `kernel.perf_event_paranoid`;
//! docs/SECURITY.md, "What a trace reveals"): a trace handed to them must
//! not defeat KASLR.
//!
//! Each kernel function a stack uses gets a stand-in address, a slot of
//! [`SLOT`] bytes from [`BASE`] on, in the order first seen: its KSYM
//! record names it there, and a frame's pc becomes its slot plus its
//! offset into the function, which the kernel's binary tells anyone. So
//! the trace holds names and offsets (named by root while recording) and
//! readers name the frames exactly as from real addresses. The slot's
//! size is fixed: a function's real size would tell the gap to the next
//! symbol, between modules a secret. A pc no function holds becomes 0.
//! Kernel stack ids that are buckets of the kernel's stack map
//! ([`KSTACK_MAP_ID`], a hash of the real addresses with a fixed seed)
//! are renumbered, in every record that names one. A user page fault at
//! a kernel address gets the error code the kernel itself reports to the
//! user (a protection fault), as `sanitize_error_code` does.

use std::collections::HashMap;

use anyhow::{bail, Result};
use jtrace_format::{kind, Encoder, Ksym, Payload, Record, FILE_HEADER_LEN, RECORD_HEADER_LEN, STACK_KERNEL};
use jtrace_symbols::kallsyms::Kallsyms;

use crate::jtrace_h::KSTACK_MAP_ID;

/// Bytes of a function's slot: offsets into a function are below it.
pub const SLOT: u64 = 1 << 24;
/// The first slot: far below the kernel's half of the address space
/// (`0xffff8000_00000000` and up), so no stand-in reads as a kernel address.
pub const BASE: u64 = 1 << 44;
/// Where the kernel's half of the address space begins (x86-64).
const KERNEL_HALF: u64 = 0xffff_8000_0000_0000;
/// `X86_PF_PROT` of a page fault's error code.
const PF_PROT: u64 = 1;

/// The stand-ins given so far.
#[derive(Debug, Default)]
pub(crate) struct HiddenKernel {
    /// Slot of each kernel function used, by its real start.
    slots: HashMap<u64, u64>,
    /// New ids of the kernel stack map's buckets.
    ids: HashMap<u32, u32>,
}

/// The u32 at `at` of a record.
fn u32_at(rec: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(rec.get(at..at + 4)?.try_into().ok()?))
}

/// The u64 at `at` of a record.
fn u64_at(rec: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(rec.get(at..at + 8)?.try_into().ok()?))
}

/// Offsets in their records of the kernel stack ids: SWITCH_OUT with
/// stacks (after its 16 bytes of base fields), CPU_SAMPLE (after tgid and
/// cpu), BLOCK_STACK (after out_ts, tgid, flags).
const SWITCH_OUT_KSTACK: usize = RECORD_HEADER_LEN + 16;
const CPU_SAMPLE_KSTACK: usize = RECORD_HEADER_LEN + 8;
const BLOCK_STACK_KSTACK: usize = RECORD_HEADER_LEN + 16;
/// A STACK's id, flags and frame count; its frames begin at 32.
const STACK_ID: usize = RECORD_HEADER_LEN;
const STACK_FLAGS: usize = RECORD_HEADER_LEN + 8;
const STACK_N: usize = RECORD_HEADER_LEN + 12;
const STACK_FRAMES: usize = RECORD_HEADER_LEN + 16;
/// A PAGE_FAULT's address, ip and error code.
const FAULT_ADDRESS: usize = RECORD_HEADER_LEN;
const FAULT_IP: usize = RECORD_HEADER_LEN + 8;
const FAULT_ERROR: usize = RECORD_HEADER_LEN + 16;

impl HiddenKernel {
    /// `rec` (one whole record) without kernel addresses, if it held any
    /// or an id made of them; the KSYM records of functions seen for the
    /// first time, named from `kallsyms` (None: none could be read), are
    /// appended to `ksyms`.
    pub(crate) fn rewrite(&mut self, rec: &[u8], kallsyms: Option<&Kallsyms>, ksyms: &mut Encoder) -> Option<Vec<u8>> {
        let at = match u16::from_le_bytes([*rec.first()?, *rec.get(1)?]) {
            kind::STACK => return self.stack(rec, kallsyms, ksyms),
            kind::SWITCH_OUT if rec.len() >= SWITCH_OUT_KSTACK + 4 => SWITCH_OUT_KSTACK,
            kind::CPU_SAMPLE => CPU_SAMPLE_KSTACK,
            kind::BLOCK_STACK => BLOCK_STACK_KSTACK,
            kind::PAGE_FAULT => return page_fault(rec),
            _ => return None,
        };
        let id = u32_at(rec, at)?;
        let new = self.id(id);
        (new != id).then(|| {
            let mut out = rec.to_vec();
            out[at..at + 4].copy_from_slice(&new.to_le_bytes());
            out
        })
    }

    /// Kernel functions given a slot (KSYM records written).
    pub(crate) fn functions(&self) -> u64 {
        self.slots.len() as u64
    }

    /// The id a stack id becomes: a bucket of the stack map a number of
    /// its own, in the order first seen (the same bucket, the same stack).
    fn id(&mut self, id: u32) -> u32 {
        if id & KSTACK_MAP_ID == 0 {
            return id;
        }
        let next = KSTACK_MAP_ID | (self.ids.len() as u32 + 1);
        *self.ids.entry(id).or_insert(next)
    }

    fn stack(&mut self, rec: &[u8], kallsyms: Option<&Kallsyms>, ksyms: &mut Encoder) -> Option<Vec<u8>> {
        if u32_at(rec, STACK_FLAGS)? & STACK_KERNEL == 0 {
            return None;
        }
        let n = u32_at(rec, STACK_N)? as usize;
        let mut out = rec.to_vec();
        let id = self.id(u32_at(rec, STACK_ID)?);
        out[STACK_ID..STACK_ID + 4].copy_from_slice(&id.to_le_bytes());
        for i in 0..n {
            let at = STACK_FRAMES + 8 * i;
            let Some(pc) = u64_at(rec, at) else { break };
            let hidden = kallsyms
                .and_then(|k| k.lookup(pc))
                .filter(|&(start, _, name)| pc - start < SLOT && !name.is_empty())
                .map_or(0, |(start, _, name)| self.slot(start, name, ksyms) + (pc - start));
            out[at..at + 8].copy_from_slice(&hidden.to_le_bytes());
        }
        Some(out)
    }

    /// The slot of the function at `start` named `name`, its KSYM written
    /// to `ksyms` the first time.
    fn slot(&mut self, start: u64, name: &str, ksyms: &mut Encoder) -> u64 {
        if let Some(&s) = self.slots.get(&start) {
            return s;
        }
        let s = BASE + self.slots.len() as u64 * SLOT;
        self.slots.insert(start, s);
        ksyms.record(&Record {
            tid: 0,
            ts: 0,
            payload: Payload::Ksym(Ksym {
                start: s,
                end: s + SLOT,
                name: name.to_string(),
            }),
        });
        s
    }
}

/// A PAGE_FAULT of a user access to a kernel address: reported as the
/// kernel reports it to the user, a protection fault at no kernel ip.
fn page_fault(rec: &[u8]) -> Option<Vec<u8>> {
    let (address, ip, error) = (
        u64_at(rec, FAULT_ADDRESS)?,
        u64_at(rec, FAULT_IP)?,
        u64_at(rec, FAULT_ERROR)?,
    );
    if address < KERNEL_HALF && ip < KERNEL_HALF {
        return None;
    }
    let mut out = rec.to_vec();
    if address >= KERNEL_HALF {
        out[FAULT_ERROR..FAULT_ERROR + 8].copy_from_slice(&(error | PF_PROT).to_le_bytes());
    }
    if ip >= KERNEL_HALF {
        out[FAULT_IP..FAULT_IP + 8].copy_from_slice(&0u64.to_le_bytes());
    }
    Some(out)
}

/// A kernel stream (one file: its header, then its records) as the
/// recorder writes it for a viewer who may not see kernel addresses: the
/// same records, its kernel stacks' frames at stand-in addresses, named
/// by new KSYM records made from the stream's own (which go), and no id
/// made of kernel addresses. What `jtrace` does while recording; here for
/// a stream recorded without it.
pub fn hide_kernel_addresses(stream: &[u8]) -> Result<Vec<u8>> {
    if stream.len() < FILE_HEADER_LEN {
        bail!("not a kernel stream: {} bytes", stream.len());
    }
    // Whole records, by the length in their headers, up to the first bad one.
    let records = || {
        let mut rest = &stream[FILE_HEADER_LEN..];
        std::iter::from_fn(move || {
            let len = u16::from_le_bytes([*rest.get(2)?, *rest.get(3)?]) as usize;
            if len < RECORD_HEADER_LEN || len > rest.len() || !len.is_multiple_of(8) {
                return None;
            }
            let (r, tail) = rest.split_at(len);
            rest = tail;
            Some(r.to_vec())
        })
    };
    // The functions the stream named: the symbols its pcs are looked up
    // in, each ended where the stream ended it (by a nameless symbol).
    let named: Vec<Ksym> = records()
        .filter_map(|r| match jtrace_format::Decoder::new(&r, 0).next() {
            Some(Ok(Record {
                payload: Payload::Ksym(k),
                ..
            })) => Some(k),
            _ => None,
        })
        .collect();
    let starts: std::collections::HashSet<u64> = named.iter().map(|k| k.start).collect();
    let ends = named
        .iter()
        .filter(|k| !starts.contains(&k.end))
        .map(|k| (k.end, String::new()));
    let kallsyms: Kallsyms = named.iter().map(|k| (k.start, k.name.clone())).chain(ends).collect();
    let mut hidden = HiddenKernel::default();
    let mut out = stream[..FILE_HEADER_LEN].to_vec();
    for r in records() {
        if u16::from_le_bytes([r[0], r[1]]) == kind::KSYM {
            continue;
        }
        let mut ksyms = Encoder::new();
        let r = hidden.rewrite(&r, Some(&kallsyms), &mut ksyms).unwrap_or(r);
        out.extend_from_slice(&r);
        out.extend_from_slice(&ksyms.buf);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jtrace_format::{CpuSample, Decoder, PageFault, Stack, StackFrame, STACK_USER};

    const KALLSYMS: &str = "ffffffff81000000 T _stext\nffffffff81000100 t schedule\n\
                            ffffffff81000400 T do_nanosleep\nffffffffc0000000 t kvm_fn\t[kvm]\n";

    fn stack(id: u32, flags: u32, pcs: &[u64]) -> Vec<u8> {
        let mut e = Encoder::new();
        e.record(&Record {
            tid: 7,
            ts: 10,
            payload: Payload::Stack(Stack {
                id,
                tgid: 0,
                flags,
                frames: pcs.iter().map(|&pc| StackFrame { pc, method: 0 }).collect(),
            }),
        });
        e.buf
    }

    fn decode(buf: &[u8]) -> Vec<Payload> {
        Decoder::new(buf, 0).map(|r| r.unwrap().payload).collect()
    }

    /// The frames name the same functions through the stand-ins, at the
    /// same offsets; no kernel address is left, and a bucket id is renumbered.
    #[test]
    fn kernel_frames_keep_their_names_and_offsets_and_lose_their_addresses() {
        let k = Kallsyms::parse(KALLSYMS);
        let mut h = HiddenKernel::default();
        let mut ksyms = Encoder::new();
        let pcs = [0xffffffff81000123, 0xffffffff81000410, 0xffffffffc0000008, 0x10];
        let bucket = KSTACK_MAP_ID | 4242;
        let out = h
            .rewrite(&stack(bucket, STACK_KERNEL, &pcs), Some(&k), &mut ksyms)
            .unwrap();
        let Payload::Stack(s) = &decode(&out)[0] else { panic!() };
        assert_eq!(s.id, KSTACK_MAP_ID | 1);
        let syms: Vec<Ksym> = decode(&ksyms.buf)
            .into_iter()
            .map(|p| match p {
                Payload::Ksym(k) => k,
                p => panic!("{p:?}"),
            })
            .collect();
        let named: Vec<Option<(String, u64)>> = s
            .frames
            .iter()
            .map(|f| {
                syms.iter()
                    .find(|k| k.start <= f.pc && f.pc < k.end)
                    .map(|k| (k.name.clone(), f.pc - k.start))
            })
            .collect();
        assert_eq!(
            named,
            [
                Some(("schedule".into(), 0x23)),
                Some(("do_nanosleep".into(), 0x10)),
                Some(("kvm_fn [kvm]".into(), 8)),
                None
            ]
        );
        assert_eq!(s.frames[3].pc, 0, "below every symbol: no address at all");
        assert!(s.frames.iter().all(|f| f.pc < KERNEL_HALF));
        assert!(syms.iter().all(|k| k.end - k.start == SLOT && k.end < KERNEL_HALF));
        // Seen again: the same slots, no new KSYM; the bucket keeps its number.
        let mut again = Encoder::new();
        let out2 = h
            .rewrite(&stack(bucket, STACK_KERNEL, &pcs), Some(&k), &mut again)
            .unwrap();
        assert_eq!(out2, out);
        assert!(again.buf.is_empty());
        // Records that refer to it carry the new id; a counter's id stays.
        let mut e = Encoder::new();
        e.record(&Record {
            tid: 7,
            ts: 11,
            payload: Payload::CpuSample(CpuSample {
                tgid: 7,
                cpu: 1,
                kstack: bucket,
                ustack: 9,
            }),
        });
        let Payload::CpuSample(c) = &decode(&h.rewrite(&e.buf, Some(&k), &mut again).unwrap())[0] else {
            panic!()
        };
        assert_eq!((c.kstack, c.ustack), (KSTACK_MAP_ID | 1, 9));
        assert_eq!(
            h.rewrite(&stack(5, STACK_KERNEL, &[]), Some(&k), &mut again)
                .map(|r| r == stack(5, STACK_KERNEL, &[])),
            Some(true)
        );
        assert_eq!(
            h.rewrite(&stack(6, STACK_USER, &pcs), Some(&k), &mut again),
            None,
            "user stacks stay"
        );
    }

    #[test]
    fn a_user_fault_at_a_kernel_address_reads_as_a_protection_fault() {
        let fault = |address| {
            let mut e = Encoder::new();
            e.record(&Record {
                tid: 7,
                ts: 1,
                payload: Payload::PageFault(PageFault {
                    address,
                    ip: 0x401000,
                    error_code: 4,
                }),
            });
            e.buf
        };
        let mut h = HiddenKernel::default();
        assert_eq!(h.rewrite(&fault(0x7f00_0000_1000), None, &mut Encoder::new()), None);
        let out = h
            .rewrite(&fault(0xffffffff81000000), None, &mut Encoder::new())
            .unwrap();
        assert_eq!(
            decode(&out)[0],
            Payload::PageFault(PageFault {
                address: 0xffffffff81000000,
                ip: 0x401000,
                error_code: 4 | PF_PROT
            })
        );
    }
}
