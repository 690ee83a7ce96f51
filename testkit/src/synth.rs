//! Writes a synthetic trace of N events for merge/report benchmarks and for
//! the streaming-vs-in-memory equality tests. T worker threads run steps of
//! eight kinds in turn: preempted CPU work; a futex block (at-switch SYSCALL
//! record) woken by another worker; a contended monitor; a socket read whose
//! full SYSCALL record is written at its exit (out of stream order); a zlib
//! library call written at its return with a page fault before its block;
//! a sleep; a park; recursive CPU work. The JVM writes GC windows and a
//! safepoint probe fires now and then; threads are forked and exit. The JVM
//! stream is written in per-thread 64 KiB chunks, as the agent does, so the
//! chunks of different threads are far out of time order. The streams are
//! produced with the real encoder, so the reader does exactly what it does on
//! a recorded trace.
//!
//! With `simple`, every step is the older benchmark's shape only: enter,
//! switch-out (half preempted, half blocked and woken), switch-in, exit.
//! With `batched`, method entries and exits are written as the agent writes
//! them: METHOD_BATCH records of up to 4096 events per thread, a thread's
//! batch written before any other record of that thread; without it, one
//! METHOD_ENTRY/METHOD_EXIT record per event (as JVMTI method events are).
//!
//! `cargo run --release -p jtrace-merge --example synth -- OUT_DIR EVENTS
//! [THREADS] [simple] [batched]` writes one from the command line.

use jtrace_format::*;
use jtrace_merge::Meta;
use jtrace_symbols::hotspot::{SAFEPOINT_BEGIN_SYMBOL, SAFEPOINT_END_SYMBOL};
use std::io::Write;
use std::path::Path;

/// Buffered writer of one stream plus per-thread JVM buffers.
struct Out {
    file: std::io::BufWriter<std::fs::File>,
    enc: Encoder,
    records: u64,
}

impl Out {
    fn new(path: &Path, magic: [u8; 8]) -> anyhow::Result<Out> {
        let mut file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
        let mut h = FileHeader::new(magic);
        h.flags = STREAM_COMPLETE;
        file.write_all(&h.to_bytes())?;
        Ok(Out {
            file,
            enc: Encoder::new(),
            records: 0,
        })
    }
    fn rec(&mut self, tid: u32, ts: u64, payload: Payload) {
        self.enc.record(&Record { tid, ts, payload });
        self.records += 1;
    }
    fn flush_if(&mut self, at: usize) -> anyhow::Result<()> {
        if self.enc.buf.len() >= at {
            self.file.write_all(&self.enc.buf)?;
            self.enc.buf.clear();
        }
        Ok(())
    }
}

/// The JVM stream: per-thread buffers appended whole at 64 KiB.
struct Jvm {
    file: Out,
    bufs: Vec<Encoder>,
    /// With method batches: each thread's method events not written yet (its tid, the events).
    pending: Option<Vec<(u32, Vec<BatchedMethodEvent>)>>,
}

/// Events per METHOD_BATCH: the agent's probe buffer holds 4096.
const BATCH_EVENTS: usize = 4096;

impl Jvm {
    fn rec(&mut self, i: usize, tid: u32, ts: u64, payload: Payload) {
        self.write_batch(i);
        self.bufs[i].record(&Record { tid, ts, payload });
        self.file.records += 1;
        self.flush_if_full(i);
    }
    fn method(&mut self, i: usize, tid: u32, ts: u64, method: u64, kind: BatchedKind) {
        let Some(pending) = &mut self.pending else {
            let payload = BatchedMethodEvent {
                ts,
                method: method as u32,
                kind,
            }
            .to_payload();
            return self.rec(i, tid, ts, payload);
        };
        let p = &mut pending[i];
        p.0 = tid;
        p.1.push(BatchedMethodEvent {
            ts,
            method: method as u32,
            kind,
        });
        self.file.records += 1;
        if p.1.len() == BATCH_EVENTS {
            self.write_batch(i);
        }
    }
    /// Writes thread `i`'s pending method events as one batch.
    fn write_batch(&mut self, i: usize) {
        let Some(pending) = &mut self.pending else { return };
        let (tid, events) = &mut pending[i];
        let Some(first) = events.first() else { return };
        let rec = Record {
            tid: *tid,
            ts: first.ts,
            payload: Payload::MethodBatch(MethodBatch {
                events: std::mem::take(events),
            }),
        };
        self.bufs[i].record(&rec);
        self.flush_if_full(i);
    }
    fn flush_if_full(&mut self, i: usize) {
        if self.bufs[i].buf.len() >= 64 << 10 {
            self.flush(i);
        }
    }
    fn flush(&mut self, i: usize) {
        self.write_batch(i);
        self.file.enc.buf.extend_from_slice(&self.bufs[i].buf);
        self.bufs[i].buf.clear();
    }
}

/// What a synthetic trace looks like.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shape {
    /// Only the older benchmark's step shape (see the module docs).
    pub simple: bool,
    /// Method events as METHOD_BATCH records, as the bytecode-rewriting agent writes them.
    pub method_batches: bool,
}

fn syscall(nr: u32, fd_kind: u32, flags: u32, exit_ts: u64) -> Payload {
    Payload::Syscall(Syscall {
        exit_ts,
        nr,
        fd_kind,
        ret: if exit_ts > 0 { 4 } else { 0 },
        fd: 7,
        flags,
        arg: 0x7f00_1234,
        family: 2,
        protocol: 6,
        sport: 40000,
        dport: 5000,
        saddr: [127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        daddr: [127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        dev: 0,
        ino: 0,
    })
}

fn jvm_block(class: &str) -> JvmBlock {
    JvmBlock {
        arg: 0,
        class: class.into(),
    }
}

/// Writes the trace; returns the number of events written.
pub fn generate(dir: &Path, total: u64, threads: u32) -> anyhow::Result<u64> {
    generate_with(dir, total, threads, false)
}

/// [`generate`], or with `simple` the older benchmark's step shape only.
pub fn generate_with(dir: &Path, total: u64, threads: u32, simple: bool) -> anyhow::Result<u64> {
    generate_shaped(
        dir,
        total,
        threads,
        Shape {
            simple,
            method_batches: false,
        },
    )
}

/// Writes a trace of the given [`Shape`]; returns the number of events written.
pub fn generate_shaped(dir: &Path, total: u64, threads: u32, shape: Shape) -> anyhow::Result<u64> {
    let simple = shape.simple;
    const AT_SWITCH: u32 = SYSCALL_BLOCKED | SYSCALL_AT_SWITCH;
    const FUTEX: u32 = 202;
    const READ: u32 = 0;
    const NANOSLEEP: u32 = 35;
    std::fs::create_dir_all(dir)?;
    let pid = 4242;
    let vm_thread = pid + 1000;
    let mut k = Out::new(&dir.join(KERNEL_FILE), KERNEL_MAGIC)?;
    let jf = Out::new(&dir.join(format!("{JVM_FILE_PREFIX}{pid}.bin")), JVM_MAGIC)?;
    // Per-thread JVM buffers (index threads = the VM's own records),
    // appended whole to the file at 64 KiB, as the agent does.
    let mut j = Jvm {
        file: jf,
        bufs: (0..=threads).map(|_| Encoder::new()).collect(),
        pending: shape
            .method_batches
            .then(|| (0..=threads).map(|_| (0, Vec::new())).collect()),
    };
    let vm = threads as usize;
    j.rec(
        vm,
        pid,
        0,
        Payload::JvmStart(JvmStart {
            pid,
            vm_version: "synthetic".into(),
        }),
    );
    for m in 0..64u64 {
        j.rec(
            vm,
            pid,
            0,
            Payload::MethodDef(MethodDef {
                method: m,
                class: format!("com.example.C{}", m % 8),
                name: format!("m{m}"),
                signature: "()V".into(),
            }),
        );
    }
    // Flush the definitions first: they must precede their use.
    j.flush(vm);
    k.rec(
        0,
        0,
        Payload::ProbeDef(ProbeDef {
            probe: 1,
            library: "libz.so.1".into(),
            symbol: "inflate".into(),
        }),
    );
    k.rec(
        0,
        0,
        Payload::ProbeDef(ProbeDef {
            probe: 2,
            library: "libjvm.so".into(),
            symbol: SAFEPOINT_BEGIN_SYMBOL.into(),
        }),
    );
    k.rec(
        0,
        0,
        Payload::ProbeDef(ProbeDef {
            probe: 3,
            library: "libjvm.so".into(),
            symbol: SAFEPOINT_END_SYMBOL.into(),
        }),
    );
    let comm = |s: &str| {
        let mut c = [0u8; 16];
        c[..s.len().min(15)].copy_from_slice(&s.as_bytes()[..s.len().min(15)]);
        c
    };
    k.rec(
        vm_thread,
        5,
        Payload::Comm(TaskInfo {
            tgid: pid,
            flags: 0,
            comm: comm("VM Thread"),
        }),
    );
    for t in 0..threads {
        let tid = pid + 1 + t;
        k.rec(
            tid,
            500 + t as u64,
            Payload::Fork(Fork {
                tgid: pid,
                parent_tid: pid,
                parent_tgid: pid,
                reserved: 0,
                comm: comm("java"),
            }),
        );
        k.rec(
            tid,
            600 + t as u64,
            Payload::SwitchIn(SwitchIn {
                tgid: pid,
                cpu: t % 2,
                prev_tid: 0,
                reserved: 0,
            }),
        );
        j.rec(
            t as usize,
            tid,
            700 + t as u64,
            Payload::ThreadStart(ThreadStart {
                daemon: 0,
                name: format!("worker-{t}"),
                group: "main".into(),
                parent: "main".into(),
            }),
        );
    }
    let mut ts = 1_000u64;
    let mut step = 0u64;
    let written = |k: &Out, j: u64| k.records + j;
    while written(&k, j.file.records) < total {
        for t in 0..threads {
            let tid = pid + 1 + t;
            let ti = t as usize;
            let m = (step * 7 + t as u64) % 64;
            let waker = pid + 1 + (t + 1) % threads;
            let out = |voluntary: bool| {
                Payload::SwitchOut(SwitchOut {
                    tgid: pid,
                    prev_state: voluntary as u32,
                    cpu: t % 2,
                    next_tid: 0,
                })
            };
            let inn = Payload::SwitchIn(SwitchIn {
                tgid: pid,
                cpu: t % 2,
                prev_tid: 0,
                reserved: 0,
            });
            let wake = Payload::Wakeup(Wakeup {
                tgid: pid,
                waker_tid: waker,
                waker_tgid: pid,
                target_cpu: 0,
                new_task: 0,
                flags: 0,
            });
            j.method(ti, tid, ts, m, BatchedKind::Entry);
            let kind = match (simple, (step + t as u64) % 8) {
                (true, k) if k % 2 == 0 => 0,
                (true, _) => 8,
                (false, k) => k,
            };
            match kind {
                0 => {
                    k.rec(tid, ts + 100, out(false));
                    k.rec(tid, ts + 700, inn);
                }
                1 => {
                    k.rec(tid, ts + 100, syscall(FUTEX, fd_kind::NONE, AT_SWITCH, 0));
                    k.rec(tid, ts + 100, out(true));
                    k.rec(tid, ts + 600, wake);
                    k.rec(tid, ts + 700, inn);
                }
                2 => {
                    let cls = format!("com.example.Lock{}", step % 4);
                    j.rec(
                        ti,
                        tid,
                        ts + 50,
                        Payload::Jvm(kind::MONITOR_CONTENDED_ENTER, jvm_block(&cls)),
                    );
                    k.rec(tid, ts + 100, syscall(FUTEX, fd_kind::NONE, AT_SWITCH, 0));
                    k.rec(tid, ts + 100, out(true));
                    k.rec(tid, ts + 600, wake);
                    k.rec(tid, ts + 700, inn);
                    j.rec(
                        ti,
                        tid,
                        ts + 800,
                        Payload::Jvm(kind::MONITOR_CONTENDED_ENTERED, jvm_block(&cls)),
                    );
                }
                3 => {
                    // io mode: the full record is written at exit, with the
                    // entry as its time; the at-switch record comes first.
                    k.rec(tid, ts + 100, syscall(READ, fd_kind::SOCKET, AT_SWITCH, 0));
                    k.rec(tid, ts + 100, out(true));
                    k.rec(tid, ts + 600, wake);
                    k.rec(tid, ts + 700, inn);
                    k.rec(tid, ts + 50, syscall(READ, fd_kind::SOCKET, SYSCALL_BLOCKED, ts + 750));
                }
                4 => {
                    k.rec(
                        tid,
                        ts + 90,
                        Payload::PageFault(PageFault {
                            address: 0x7000_0000 + step,
                            ip: 0x4000,
                            error_code: 4,
                        }),
                    );
                    k.rec(tid, ts + 100, out(true));
                    k.rec(tid, ts + 600, wake);
                    k.rec(tid, ts + 700, inn);
                    k.rec(
                        tid,
                        ts + 50,
                        Payload::LibCall(LibCall {
                            exit_ts: ts + 800,
                            probe: 1,
                            reserved: 0,
                            ret: 0,
                        }),
                    );
                }
                5 => {
                    j.rec(ti, tid, ts + 50, Payload::Jvm(kind::SLEEP_BEGIN, jvm_block("")));
                    k.rec(tid, ts + 100, syscall(NANOSLEEP, fd_kind::NONE, AT_SWITCH, 0));
                    k.rec(tid, ts + 100, out(true));
                    k.rec(tid, ts + 650, wake);
                    k.rec(tid, ts + 700, inn);
                    j.rec(ti, tid, ts + 800, Payload::Jvm(kind::SLEEP_END, jvm_block("")));
                }
                6 => {
                    let cls = "java.util.concurrent.locks.ReentrantLock$NonfairSync";
                    j.rec(ti, tid, ts + 50, Payload::Jvm(kind::PARK_BEGIN, jvm_block(cls)));
                    k.rec(tid, ts + 100, syscall(FUTEX, fd_kind::NONE, AT_SWITCH, 0));
                    k.rec(tid, ts + 100, out(true));
                    k.rec(tid, ts + 600, wake);
                    k.rec(tid, ts + 700, inn);
                    j.rec(ti, tid, ts + 800, Payload::Jvm(kind::PARK_END, jvm_block(cls)));
                }
                8 => {
                    k.rec(tid, ts + 100, out(true));
                    k.rec(tid, ts + 600, wake);
                    k.rec(tid, ts + 700, inn);
                }
                _ => {
                    j.method(ti, tid, ts + 100, m, BatchedKind::Entry);
                    k.rec(tid, ts + 300, out(false));
                    k.rec(tid, ts + 400, inn);
                    j.method(ti, tid, ts + 500, m, BatchedKind::Exit);
                }
            }
            j.method(ti, tid, ts + 900, m, BatchedKind::Exit);
            ts += 10;
        }
        // A GC every 64 steps (written by the VM thread), a safepoint probe
        // every 96, overlapping the workers' steps.
        if !simple && step % 64 == 10 {
            j.rec(
                vm,
                vm_thread,
                ts - 300,
                Payload::Jvm(kind::GC_START, jvm_block("G1 Young")),
            );
            j.rec(
                vm,
                vm_thread,
                ts + 200,
                Payload::Jvm(kind::GC_END, jvm_block("G1 Young")),
            );
        }
        if !simple && step % 96 == 50 {
            let lib = |probe, a: u64, b: u64| {
                Payload::LibCall(LibCall {
                    exit_ts: b,
                    probe,
                    reserved: 0,
                    ret: a,
                })
            };
            k.rec(vm_thread, ts - 400, lib(2, 0, ts - 390));
            k.rec(vm_thread, ts - 100, lib(3, 0, ts - 50));
        }
        ts += 1_000;
        step += 1;
        k.flush_if(1 << 20)?;
        j.file.flush_if(1 << 20)?;
    }
    for t in 0..threads {
        let tid = pid + 1 + t;
        j.rec(t as usize, tid, ts + t as u64, Payload::ThreadEnd);
        k.rec(
            tid,
            ts + 100 + t as u64,
            Payload::Exit(TaskInfo {
                tgid: pid,
                flags: 0,
                comm: comm("java"),
            }),
        );
    }
    j.rec(vm, pid, ts + 500, Payload::JvmEnd(JvmEnd { lost_events: 0 }));
    for i in 0..=threads as usize {
        j.flush(i);
    }
    k.flush_if(0)?;
    j.file.flush_if(0)?;
    k.file.flush()?;
    j.file.file.flush()?;
    let written = k.records + j.file.records;
    let meta = Meta {
        format: "jtrace".into(),
        version: FORMAT_VERSION,
        complete: true,
        jtrace_version: "synthetic".into(),
        start_monotonic_ns: 0,
        end_monotonic_ns: ts + 1000,
        pid,
        command: vec!["synthetic".into()],
        kernel_records: k.records,
        ..Default::default()
    };
    meta.store(dir)?;
    Ok(written)
}
