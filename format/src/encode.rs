//! Writing records in the on-disk encoding.

use crate::record::payload_kind;
use crate::{BatchWriter, Payload, Record, BUILD_ID_MAX};

/// Appends records to a byte buffer in the on-disk encoding.
#[derive(Debug, Default, Clone)]
pub struct Encoder {
    /// The encoded bytes so far.
    pub buf: Vec<u8>,
}

impl Encoder {
    /// An empty encoder.
    pub fn new() -> Self {
        Encoder { buf: Vec::new() }
    }

    fn begin(&mut self, kind: u16, tid: u32, ts: u64) -> usize {
        let start = self.buf.len();
        self.buf.extend_from_slice(&kind.to_le_bytes());
        self.buf.extend_from_slice(&0u16.to_le_bytes());
        self.buf.extend_from_slice(&tid.to_le_bytes());
        self.buf.extend_from_slice(&ts.to_le_bytes());
        start
    }

    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Strings are a u16 byte length then UTF-8 bytes, cut at 4096 bytes.
    fn str(&mut self, s: &str) {
        let mut n = s.len().min(4096);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.buf.extend_from_slice(&(n as u16).to_le_bytes());
        self.buf.extend_from_slice(&s.as_bytes()[..n]);
    }

    fn end(&mut self, start: usize) {
        while !(self.buf.len() - start).is_multiple_of(8) {
            self.buf.push(0);
        }
        let len = (self.buf.len() - start) as u16;
        self.buf[start + 2..start + 4].copy_from_slice(&len.to_le_bytes());
    }

    /// Appends one record of `kind` whose payload bytes are `payload`
    /// (zero-padded to 8 bytes): for writers that build payloads
    /// themselves, as the BPF programs do.
    pub fn raw(&mut self, kind: u16, tid: u32, ts: u64, payload: &[u8]) {
        let s = self.begin(kind, tid, ts);
        self.buf.extend_from_slice(payload);
        self.end(s);
    }

    /// Encodes one record.
    pub fn record(&mut self, r: &Record) {
        let kind = payload_kind(&r.payload);
        let s = self.begin(kind, r.tid, r.ts);
        match &r.payload {
            Payload::SwitchOut(p) => self.buf.extend_from_slice(&p.to_bytes()),
            Payload::SwitchOutStacks(p, st) => {
                self.buf.extend_from_slice(&p.to_bytes());
                self.u32(st.kstack);
                self.u32(st.ustack);
            }
            Payload::SwitchIn(p) => self.buf.extend_from_slice(&p.to_bytes()),
            Payload::Wakeup(p) => self.buf.extend_from_slice(&p.to_bytes()),
            Payload::Fork(p) => self.buf.extend_from_slice(&p.to_bytes()),
            Payload::Exit(p) | Payload::Comm(p) | Payload::Exec(p) => self.buf.extend_from_slice(&p.to_bytes()),
            Payload::JvmStart(p) => {
                self.u32(p.pid);
                self.str(&p.vm_version);
            }
            Payload::ThreadStart(p) => {
                self.u32(p.daemon);
                self.str(&p.name);
                self.str(&p.group);
                self.str(&p.parent);
            }
            Payload::ThreadEnd => {}
            Payload::MethodDef(p) => {
                self.u64(p.method);
                self.str(&p.class);
                self.str(&p.name);
                self.str(&p.signature);
            }
            Payload::MethodEntry(p) | Payload::MethodExit(p) => {
                self.u64(p.method);
                self.u32(p.flags);
                self.u32(p.reserved);
            }
            Payload::MethodBatch(p) => {
                let mut w = BatchWriter::new(r.tid);
                // The writer opens its own record(s): drop the header begun above.
                self.buf.truncate(s);
                for e in &p.events {
                    w.push(&mut self.buf, e.ts, e.method as u64, e.kind);
                }
                w.finish(&mut self.buf);
                return;
            }
            Payload::JvmEnd(p) => self.u64(p.lost_events),
            Payload::AgentError(s) => self.str(s),
            Payload::JvmLost(p) => {
                self.u64(p.events);
                self.u32(p.reason);
                self.u32(p.reserved);
            }
            Payload::MethodTally(_, p) => {
                self.u64(p.method);
                self.u64(p.calls);
                self.u64(p.rate_per_s);
                self.u64(p.mean_ns);
            }
            Payload::Syscall(p) => self.buf.extend_from_slice(&p.to_bytes()),
            Payload::PageFault(p) => self.buf.extend_from_slice(&p.to_bytes()),
            Payload::BlockIo(p) => self.buf.extend_from_slice(&p.to_bytes()),
            Payload::LibCall(p) => self.buf.extend_from_slice(&p.to_bytes()),
            Payload::Throttle(p) => self.buf.extend_from_slice(&p.to_bytes()),
            Payload::Steal(p) => self.buf.extend_from_slice(&p.to_bytes()),
            Payload::ProbeDef(p) => {
                self.u32(p.probe);
                self.str(&p.library);
                self.str(&p.symbol);
            }
            Payload::FilePath(p) => {
                self.u64(p.dev);
                self.u64(p.ino);
                self.str(&p.path);
            }
            Payload::Jvm(_, p) => {
                self.u64(p.arg);
                self.str(&p.class);
            }
            Payload::Alloc(p) => {
                self.u64(p.size);
                self.str(&p.class);
                self.u64(p.method);
                self.u32(p.line as u32);
                self.u32(0);
            }
            Payload::Compiled(_, p) => {
                self.u64(p.method);
                self.u64(p.code_addr);
                self.u32(p.code_size);
                self.u32(p.reserved);
            }
            Payload::Stack(p) => {
                self.u32(p.id);
                self.u32(p.tgid);
                self.u32(p.flags);
                self.u32(p.frames.len() as u32);
                for f in &p.frames {
                    self.u64(f.pc);
                    if !p.is_kernel() {
                        self.u64(f.method);
                    }
                }
            }
            Payload::CpuSample(p) => {
                self.u32(p.tgid);
                self.u32(p.cpu);
                self.u32(p.kstack);
                self.u32(p.ustack);
            }
            Payload::Mapping(p) => {
                self.u32(p.tgid);
                let id = &p.build_id[..p.build_id.len().min(BUILD_ID_MAX)];
                self.u32(id.len() as u32);
                self.u64(p.start);
                self.u64(p.end);
                self.u64(p.offset);
                let mut b = [0u8; 24];
                b[..id.len()].copy_from_slice(id);
                self.buf.extend_from_slice(&b);
                self.str(&p.path);
            }
            Payload::Ksym(p) => {
                self.u64(p.start);
                self.u64(p.end);
                self.str(&p.name);
            }
            Payload::CodeBlob(p) => {
                self.u64(p.start);
                self.u32(p.size);
                self.u32(p.kind);
                self.str(&p.name);
            }
            Payload::CompiledInline(p) => {
                self.u64(p.code_addr);
                self.u32(p.tier);
                self.u32(p.pcs.len() as u32);
                for pc in &p.pcs {
                    self.u64(pc.pc);
                    self.u32(pc.methods.len() as u32);
                    self.u32(0);
                    for &m in &pc.methods {
                        self.u64(m);
                    }
                }
            }
            Payload::MethodAddrs(p) => {
                self.u32(p.methods.len() as u32);
                self.u32(0);
                for &(addr, m) in &p.methods {
                    self.u64(addr);
                    self.u64(m);
                }
            }
            Payload::Unknown(_) => {}
        }
        self.end(s);
    }
}
