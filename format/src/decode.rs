//! Reading records: the stream body into [`Record`]s, or into
//! [`RawRecord`]s whose payloads stay undecoded.

use crate::record::decode_payload;
use crate::{batch_events, kind, BatchEvents, JvmEnd, Payload, Record, RECORD_HEADER_LEN};

/// Why a stream could not be decoded further.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The stream ends inside a record: a writer was cut off. Everything
    /// before `offset` is valid.
    Truncated {
        /// Byte offset of the incomplete record.
        offset: usize,
    },
    /// A record header is malformed (length 0, not a multiple of 8, or a
    /// payload shorter than its kind needs).
    Corrupt {
        /// Byte offset of the bad record.
        offset: usize,
        /// What is wrong.
        what: &'static str,
    },
    /// The file shrank while it was read (another process truncated it):
    /// everything before `offset` is valid.
    Shrunk {
        /// Byte offset of the first record not read whole.
        offset: usize,
    },
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Truncated { offset } => {
                write!(f, "stream ends inside a record at byte {offset}")
            }
            DecodeError::Corrupt { offset, what } => {
                write!(f, "corrupt record at byte {offset}: {what}")
            }
            DecodeError::Shrunk { offset } => {
                write!(
                    f,
                    "the file shrank while it was read (truncated by another process?): read up to byte {offset}"
                )
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// Iterates over the records of a stream body (the bytes after the file header).
pub struct Decoder<'a> {
    data: &'a [u8],
    pos: usize,
    base: usize,
    /// The rest of the METHOD_BATCH the iterator is expanding (its tid).
    batch: Option<(u32, BatchEvents<'a>)>,
}

impl<'a> Decoder<'a> {
    /// Decodes `data`; `base` is the offset of `data` in the file, for messages.
    pub fn new(data: &'a [u8], base: usize) -> Self {
        Decoder {
            data,
            pos: 0,
            base,
            batch: None,
        }
    }
}

/// A record whose payload is not decoded yet: its header fields and the
/// payload bytes, borrowed from the stream. Readers that only need a few
/// fixed-offset fields of the hot kinds read them from `payload` directly
/// (no [`Payload`] built, nothing allocated) and [`RawRecord::decode`] the rest.
#[derive(Debug, Clone, Copy)]
pub struct RawRecord<'a> {
    /// Record kind ([`kind`]).
    pub kind: u16,
    /// Kernel thread id.
    pub tid: u32,
    /// CLOCK_MONOTONIC nanoseconds.
    pub ts: u64,
    /// The payload bytes (record length minus the header; may include padding).
    pub payload: &'a [u8],
    /// Offset of the record in the file, for messages.
    pub offset: usize,
}

impl RawRecord<'_> {
    /// Decodes the payload, exactly as [`Decoder`]'s iterator does.
    pub fn decode(&self) -> Result<Record, DecodeError> {
        match decode_payload(self.kind, self.ts, self.payload) {
            Some(payload) => Ok(Record {
                tid: self.tid,
                ts: self.ts,
                payload,
            }),
            None => Err(DecodeError::Corrupt {
                offset: self.offset,
                what: "payload shorter than its kind",
            }),
        }
    }
}

impl<'a> Decoder<'a> {
    /// The next record with its payload undecoded. After an error (or a
    /// payload that then fails to [`RawRecord::decode`]) the caller stops.
    #[inline]
    pub fn next_raw(&mut self) -> Option<Result<RawRecord<'a>, DecodeError>> {
        let data: &'a [u8] = self.data;
        let rest = &data[self.pos..];
        if rest.is_empty() {
            return None;
        }
        let offset = self.base + self.pos;
        let Some(head) = rest.first_chunk::<RECORD_HEADER_LEN>() else {
            self.pos = data.len();
            return Some(Err(DecodeError::Truncated { offset }));
        };
        let kind = u16::from_le_bytes([head[0], head[1]]);
        let len = u16::from_le_bytes([head[2], head[3]]) as usize;
        let tid = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let ts = u64::from_le_bytes([
            head[8], head[9], head[10], head[11], head[12], head[13], head[14], head[15],
        ]);
        if kind == 0 && len == 0 {
            // Zero fill: a preallocated or mmap'd file that was not written
            // to the end. Treat as the end of the stream.
            self.pos = data.len();
            return None;
        }
        if len < RECORD_HEADER_LEN || !len.is_multiple_of(8) {
            self.pos = data.len();
            return Some(Err(DecodeError::Corrupt {
                offset,
                what: "bad record length",
            }));
        }
        if rest.len() < len {
            self.pos = data.len();
            return Some(Err(DecodeError::Truncated { offset }));
        }
        self.pos += len;
        Some(Ok(RawRecord {
            kind,
            tid,
            ts,
            payload: &rest[RECORD_HEADER_LEN..len],
            offset,
        }))
    }
}

/// Yields every record decoded, METHOD_BATCH records as the
/// METHOD_ENTRY/METHOD_EXIT records they stand for.
impl<'a> Iterator for Decoder<'a> {
    type Item = Result<Record, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((tid, events)) = &mut self.batch {
                if let Some(e) = events.next() {
                    return Some(Ok(Record {
                        tid: *tid,
                        ts: e.ts,
                        payload: e.to_payload(),
                    }));
                }
                self.batch = None;
            }
            let raw = match self.next_raw()? {
                Ok(raw) if raw.kind == kind::METHOD_BATCH => raw,
                other => return Some(self.decoded(other)),
            };
            match batch_events(raw.ts, raw.payload) {
                Some(events) => self.batch = Some((raw.tid, events)),
                None => return Some(self.decoded(Ok(raw))),
            }
        }
    }
}

impl<'a> Decoder<'a> {
    fn decoded(&mut self, raw: Result<RawRecord<'a>, DecodeError>) -> Result<Record, DecodeError> {
        let r = raw.and_then(|raw| raw.decode());
        if r.is_err() {
            self.pos = self.data.len();
        }
        r
    }
}

/// Bytes at the end of a JVM stream that [`jvm_end_in_tail`] looks at.
pub const JVM_END_TAIL: usize = 64;

/// The JVM_END record that ends a finished JVM stream, found in the last
/// bytes of the file (`tail`, up to [`JVM_END_TAIL`] of them): the agent
/// writes it last, so a writer can check how its stream ended without
/// reading it all. `None` if the stream does not end with one.
pub fn jvm_end_in_tail(tail: &[u8]) -> Option<JvmEnd> {
    (crate::RECORD_HEADER_LEN + 8..=tail.len()).step_by(8).find_map(|len| {
        let rec = &tail[tail.len() - len..];
        let (k, l) = (
            u16::from_le_bytes([rec[0], rec[1]]),
            u16::from_le_bytes([rec[2], rec[3]]),
        );
        if k != kind::JVM_END || usize::from(l) != len {
            return None;
        }
        match Decoder::new(rec, 0).next() {
            Some(Ok(Record {
                payload: Payload::JvmEnd(e),
                ..
            })) => Some(e),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        fd_kind, AllocSample, BlockIo, BlockStack, CodeBlob, CompiledInline, CompiledMethod, CpuSample, Encoder,
        FilePath, Fork, JvmBlock, JvmLost, JvmPidNs, JvmStart, Ksym, LibCall, Mapping, MethodAddrs, MethodDef,
        MethodEvent, MethodTally, NativeBind, PageFault, PcInline, ProbeDef, Stack, StackFrame, Steal, SwitchIn,
        SwitchOut, SwitchStacks, Syscall, TaskInfo, TaskNs, ThreadStart, Throttle, Wakeup, EXIT_BY_EXCEPTION,
        STACK_KERNEL, SYSCALL_BLOCKED,
    };

    #[test]
    fn jvm_end_is_found_in_the_tail() {
        let mut enc = Encoder::new();
        enc.record(&Record {
            tid: 1,
            ts: 2,
            payload: Payload::AgentError("x".repeat(40)),
        });
        assert_eq!(
            jvm_end_in_tail(&enc.buf[enc.buf.len().saturating_sub(JVM_END_TAIL)..]),
            None
        );
        enc.record(&Record {
            tid: 1,
            ts: 3,
            payload: Payload::JvmEnd(JvmEnd { lost_events: 7 }),
        });
        let tail = &enc.buf[enc.buf.len().saturating_sub(JVM_END_TAIL)..];
        assert_eq!(jvm_end_in_tail(tail), Some(JvmEnd { lost_events: 7 }));
        // A JVM_END with a trailing field added later is found too.
        let mut longer = tail[tail.len() - 24..].to_vec();
        longer[2] = 32;
        longer.extend_from_slice(&[0; 8]);
        assert_eq!(jvm_end_in_tail(&longer), Some(JvmEnd { lost_events: 7 }));
        assert_eq!(jvm_end_in_tail(&tail[..tail.len() - 8]), None);
        assert_eq!(jvm_end_in_tail(&[]), None);
    }

    #[test]
    fn round_trip_every_kind() {
        let mut comm = [0u8; 16];
        comm[..4].copy_from_slice(b"java");
        let records = vec![
            Payload::SwitchOut(SwitchOut {
                tgid: 1,
                prev_state: 1,
                cpu: 0,
                next_tid: 9,
            }),
            Payload::SwitchIn(SwitchIn {
                tgid: 1,
                cpu: 1,
                prev_tid: 0,
                reserved: 0,
            }),
            Payload::Wakeup(Wakeup {
                tgid: 1,
                waker_tid: 3,
                waker_tgid: 1,
                target_cpu: 1,
                new_task: 0,
                flags: 0,
            }),
            Payload::Fork(Fork {
                tgid: 1,
                parent_tid: 1,
                parent_tgid: 1,
                reserved: 0,
                comm,
            }),
            Payload::TaskNs(TaskNs {
                tgid: 1,
                ns_tid: 2,
                ns_tgid: 1,
                level: 1,
                pidns_ino: 4026532301,
            }),
            Payload::Exit(TaskInfo {
                tgid: 1,
                flags: 0,
                comm,
            }),
            Payload::Comm(TaskInfo {
                tgid: 1,
                flags: 0,
                comm,
            }),
            Payload::Exec(TaskInfo {
                tgid: 1,
                flags: 0,
                comm,
            }),
            Payload::JvmStart(JvmStart {
                pid: 7,
                vm_version: "17.0.15".into(),
            }),
            Payload::JvmPidNs(JvmPidNs {
                pidns_ino: 4026532301,
                ns_pid: 7,
                reserved: 0,
            }),
            Payload::ThreadStart(ThreadStart {
                daemon: 1,
                name: "main".into(),
                group: "main".into(),
                parent: "".into(),
            }),
            Payload::ThreadEnd,
            Payload::MethodDef(MethodDef {
                method: 0xdead_beef,
                class: "com.acme.Foo".into(),
                name: "bär".into(),
                signature: "(I)V".into(),
            }),
            Payload::MethodEntry(MethodEvent {
                method: 5,
                flags: 0,
                reserved: 0,
            }),
            Payload::MethodExit(MethodEvent {
                method: 5,
                flags: EXIT_BY_EXCEPTION,
                reserved: 0,
            }),
            Payload::JvmEnd(JvmEnd { lost_events: 3 }),
            Payload::AgentError("bad line 3".into()),
            Payload::JvmLost(JvmLost {
                events: 9,
                reason: crate::LOST_STREAM_FULL,
                reserved: 0,
            }),
            Payload::MethodTally(
                kind::METHOD_DEMOTED,
                MethodTally {
                    method: 5,
                    calls: 100_000,
                    rate_per_s: 2_000_000,
                    mean_ns: 40,
                },
            ),
            Payload::MethodTally(
                kind::METHOD_SHORT_DROPPED,
                MethodTally {
                    method: 5,
                    calls: 7,
                    rate_per_s: 0,
                    mean_ns: 900,
                },
            ),
            Payload::MethodTally(
                kind::METHOD_TRIVIAL,
                MethodTally {
                    method: 6,
                    calls: 0,
                    rate_per_s: 0,
                    mean_ns: 0,
                },
            ),
            Payload::Syscall(Syscall {
                exit_ts: 99,
                nr: 0,
                fd_kind: fd_kind::SOCKET,
                ret: -11,
                fd: 5,
                flags: SYSCALL_BLOCKED,
                arg: 7,
                family: 2,
                protocol: 6,
                sport: 1234,
                dport: 80,
                saddr: [1; 16],
                daddr: [2; 16],
                dev: 3,
                ino: 4,
            }),
            Payload::PageFault(PageFault {
                address: 1,
                ip: 2,
                error_code: 3,
            }),
            Payload::BlockIo(BlockIo {
                complete_ts: 5,
                dev: 6,
                sector: 7,
                bytes: 4096,
                write: 1,
            }),
            Payload::LibCall(LibCall {
                exit_ts: 9,
                probe: 1,
                reserved: 0,
                ret: 42,
            }),
            Payload::Throttle(Throttle {
                to: 77,
                cpu: 1,
                flags: crate::THROTTLE_CLAMPED,
            }),
            Payload::Steal(Steal {
                from: 3,
                ns: 12,
                cpu: 1,
                reserved: 0,
            }),
            Payload::BlockStack(BlockStack {
                out_ts: 5,
                tgid: 7,
                flags: crate::BLOCK_STACK_SAMPLED,
                kstack: 3,
                ustack: 4,
            }),
            Payload::ProbeDef(ProbeDef {
                probe: 1,
                library: "libz.so.1".into(),
                symbol: "inflate".into(),
            }),
            Payload::FilePath(FilePath {
                dev: 8 << 20 | 1,
                ino: 1234,
                path: "/var/lib/data/é.bin".into(),
            }),
            Payload::Jvm(
                kind::MONITOR_WAIT,
                JvmBlock {
                    arg: 100,
                    class: "java.lang.Object".into(),
                },
            ),
            Payload::Jvm(
                kind::GC_END,
                JvmBlock {
                    arg: 0,
                    class: String::new(),
                },
            ),
            Payload::Alloc(AllocSample {
                size: 24,
                class: "java.lang.String".into(),
                method: 7,
                line: 42,
            }),
            Payload::Compiled(
                true,
                CompiledMethod {
                    method: 1,
                    code_addr: 2,
                    code_size: 3,
                    reserved: 0,
                },
            ),
            Payload::Compiled(
                false,
                CompiledMethod {
                    method: 1,
                    code_addr: 2,
                    code_size: 3,
                    reserved: 0,
                },
            ),
            Payload::SwitchOutStacks(
                SwitchOut {
                    tgid: 1,
                    prev_state: 1,
                    cpu: 0,
                    next_tid: 9,
                },
                SwitchStacks { kstack: 3, ustack: 4 },
            ),
            Payload::Stack(Stack {
                id: 3,
                tgid: 0,
                flags: STACK_KERNEL,
                frames: vec![
                    StackFrame {
                        pc: 0xffff_ffff_8100_0000,
                        method: 0
                    };
                    3
                ],
            }),
            Payload::Stack(Stack {
                id: 4,
                tgid: 7,
                flags: crate::STACK_USER | crate::STACK_TRUNCATED,
                frames: vec![
                    StackFrame {
                        pc: 0x7f00_0000_1000,
                        method: 0x8000,
                    },
                    StackFrame { pc: 2, method: 0 },
                ],
            }),
            Payload::CpuSample(CpuSample {
                tgid: 1,
                cpu: 1,
                kstack: 3,
                ustack: 4,
            }),
            Payload::Mapping(Mapping {
                tgid: 7,
                start: 0x1000,
                end: 0x2000,
                offset: 0x3000,
                build_id: vec![0xab; 20],
                path: "/usr/lib/libc.so.6".into(),
            }),
            Payload::Mapping(Mapping {
                tgid: 7,
                start: 0x1000,
                end: 0x2000,
                offset: 0,
                build_id: vec![],
                path: String::new(),
            }),
            Payload::Ksym(Ksym {
                start: 1,
                end: 2,
                name: "tcp_recvmsg".into(),
            }),
            Payload::CodeBlob(CodeBlob {
                start: 1,
                size: 2,
                kind: crate::CODE_INTERPRETER,
                name: "Interpreter".into(),
            }),
            Payload::CompiledInline(CompiledInline {
                code_addr: 5,
                tier: 4,
                pcs: vec![
                    PcInline {
                        pc: 6,
                        methods: vec![1, 2],
                    },
                    PcInline { pc: 7, methods: vec![] },
                ],
            }),
            Payload::MethodAddrs(MethodAddrs {
                methods: vec![(1, 2), (3, 4)],
            }),
            Payload::NativeBind(NativeBind {
                addr: 0x7f00_0000_1000,
                method: 9,
                name: "Java_sun_nio_ch_SocketDispatcher_read0".into(),
            }),
        ];
        let mut enc = Encoder::new();
        for (i, p) in records.iter().enumerate() {
            enc.record(&Record {
                tid: i as u32,
                ts: 1000 + i as u64,
                payload: p.clone(),
            });
        }
        assert_eq!(enc.buf.len() % 8, 0);
        let decoded: Vec<Record> = Decoder::new(&enc.buf, 16).map(|r| r.unwrap()).collect();
        assert_eq!(decoded.len(), records.len());
        for (i, (d, p)) in decoded.iter().zip(&records).enumerate() {
            assert_eq!(d.tid, i as u32);
            assert_eq!(d.ts, 1000 + i as u64);
            assert_eq!(&d.payload, p);
        }
    }

    #[test]
    fn truncated_stream_keeps_prefix() {
        let mut enc = Encoder::new();
        let p = Payload::MethodEntry(MethodEvent {
            method: 1,
            flags: 0,
            reserved: 0,
        });
        enc.record(&Record {
            tid: 1,
            ts: 1,
            payload: p.clone(),
        });
        enc.record(&Record {
            tid: 1,
            ts: 2,
            payload: p,
        });
        let cut = &enc.buf[..enc.buf.len() - 3];
        let out: Vec<_> = Decoder::new(cut, 0).collect();
        assert_eq!(out.len(), 2);
        assert!(out[0].is_ok());
        assert_eq!(out[1], Err(DecodeError::Truncated { offset: 32 }));
    }

    #[test]
    fn unknown_kind_is_skipped() {
        let mut enc = Encoder::new();
        enc.record(&Record {
            tid: 1,
            ts: 1,
            payload: Payload::Unknown(999),
        });
        enc.record(&Record {
            tid: 1,
            ts: 2,
            payload: Payload::ThreadEnd,
        });
        let out: Vec<_> = Decoder::new(&enc.buf, 0).map(|r| r.unwrap().payload).collect();
        assert_eq!(out, vec![Payload::Unknown(999), Payload::ThreadEnd]);
    }

    #[test]
    fn alloc_sample_without_a_site_still_decodes() {
        // An ALLOC_SAMPLE as written before the site was added: u64 size, str class.
        let mut payload = 24u64.to_le_bytes().to_vec();
        payload.extend_from_slice(&3u16.to_le_bytes());
        payload.extend_from_slice(b"[B;");
        assert_eq!(
            decode_payload(kind::ALLOC_SAMPLE, 0, &payload[..payload.len() - 1]),
            None,
            "a class cut short is corrupt"
        );
        payload[8] = 2;
        assert_eq!(
            decode_payload(kind::ALLOC_SAMPLE, 0, &payload),
            Some(Payload::Alloc(AllocSample {
                size: 24,
                class: "[B".into(),
                method: 0,
                line: -1
            }))
        );
    }

    #[test]
    fn zero_fill_ends_stream() {
        let mut enc = Encoder::new();
        enc.record(&Record {
            tid: 1,
            ts: 1,
            payload: Payload::ThreadEnd,
        });
        enc.buf.extend_from_slice(&[0u8; 64]);
        assert_eq!(Decoder::new(&enc.buf, 0).count(), 1);
    }
}
