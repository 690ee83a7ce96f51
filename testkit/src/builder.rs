//! A compact builder of hand-made traces: the kernel stream and one stream
//! per JVM, written with the real encoder into a trace directory the real
//! reader reads. Times are nanoseconds; a thread belongs to the process
//! it was registered with (by [`TraceBuilder::jvm`],
//! [`TraceBuilder::java_thread`], [`TraceBuilder::native_thread`] or
//! [`TraceBuilder::thread_start`]), else to [`PID`].

use jtrace_format::{self as fmt, fd_kind, Encoder, FileHeader, Payload, Record};
use jtrace_merge::Meta;
use std::collections::BTreeMap;
use std::path::Path;

/// The process of a thread registered with none.
pub const PID: u32 = 100;

/// The streams of a trace of one or more processes (see the module docs).
#[derive(Default)]
pub struct TraceBuilder {
    kernel: Encoder,
    /// Per JVM pid, its stream.
    jvms: BTreeMap<u32, Encoder>,
    /// Each tid's process.
    pids: BTreeMap<u32, u32>,
    /// The CPU samples per second meta.json says were taken (0: none).
    pub cpu_sample_hz: u32,
}

impl TraceBuilder {
    /// A record of the kernel stream.
    pub fn k(&mut self, tid: u32, ts: u64, payload: Payload) {
        self.kernel.record(&Record { tid, ts, payload });
    }

    /// A record of the stream of `tid`'s JVM.
    pub fn j(&mut self, tid: u32, ts: u64, payload: Payload) {
        let pid = self.pid(tid);
        self.jvms.entry(pid).or_default().record(&Record { tid, ts, payload });
    }

    /// A record of JVM `pid` about no thread (tid 0).
    fn process_record(&mut self, pid: u32, ts: u64, payload: Payload) {
        let rec = Record { tid: 0, ts, payload };
        self.jvms.entry(pid).or_default().record(&rec);
    }

    /// The process of `tid`.
    pub fn pid(&self, tid: u32) -> u32 {
        self.pids.get(&tid).copied().unwrap_or(PID)
    }

    /// A JVM `pid` started at 0 with its methods (id, "Class.name", all `()V`).
    pub fn jvm(&mut self, pid: u32, methods: &[(u64, &str)]) {
        self.pids.insert(pid, pid);
        self.jvm_start(pid, 0);
        for &(id, name) in methods {
            let (class, method) = name.rsplit_once('.').expect("Class.name");
            self.method(pid, id, class, method, "()V");
        }
    }

    /// JVM_START of JVM `pid` at `ts`.
    pub fn jvm_start(&mut self, pid: u32, ts: u64) {
        self.pids.insert(pid, pid);
        let start = fmt::JvmStart {
            pid,
            vm_version: "test".into(),
        };
        self.process_record(pid, ts, Payload::JvmStart(start));
    }

    /// Method `id` of JVM `pid`.
    pub fn method(&mut self, pid: u32, id: u64, class: &str, name: &str, signature: &str) {
        let def = fmt::MethodDef {
            method: id,
            class: class.into(),
            name: name.into(),
            signature: signature.into(),
        };
        self.process_record(pid, 0, Payload::MethodDef(def));
    }

    /// THREAD_START of Java thread `tid` of JVM `pid` (not yet on CPU).
    pub fn thread_start(&mut self, pid: u32, tid: u32, ts: u64, name: &str, group: &str) {
        self.pids.insert(tid, pid);
        let start = fmt::ThreadStart {
            daemon: 0,
            name: name.into(),
            group: group.into(),
            parent: String::new(),
        };
        self.j(tid, ts, Payload::ThreadStart(start));
    }

    /// A Java thread of JVM `pid`, on CPU from `ts`.
    pub fn java_thread(&mut self, pid: u32, tid: u32, ts: u64, name: &str) {
        self.thread_start(pid, tid, ts, name, "main");
        self.switch_in(tid, ts, 0);
    }

    /// A thread no JVM knows (named by its comm), on CPU from `ts`.
    pub fn native_thread(&mut self, pid: u32, tid: u32, ts: u64, comm: &str) {
        self.pids.insert(tid, pid);
        self.comm(tid, ts, comm);
        self.switch_in(tid, ts, 0);
    }

    /// COMM of `tid` (at most 15 bytes of `name` are kept, as the kernel keeps them).
    pub fn comm(&mut self, tid: u32, ts: u64, name: &str) {
        let mut comm = [0u8; 16];
        let n = name.len().min(15);
        comm[..n].copy_from_slice(&name.as_bytes()[..n]);
        let info = fmt::TaskInfo {
            tgid: self.pid(tid),
            flags: 0,
            comm,
        };
        self.k(tid, ts, Payload::Comm(info));
    }

    /// `tid` goes on CPU 0 after `prev_tid`.
    pub fn switch_in(&mut self, tid: u32, ts: u64, prev_tid: u32) {
        self.switch_in_on(tid, ts, 0, prev_tid);
    }

    /// `tid` goes on `cpu` after `prev_tid` (which may be untraced).
    pub fn switch_in_on(&mut self, tid: u32, ts: u64, cpu: u32, prev_tid: u32) {
        let s = fmt::SwitchIn {
            tgid: self.pid(tid),
            cpu,
            prev_tid,
            reserved: 0,
        };
        self.k(tid, ts, Payload::SwitchIn(s));
    }

    /// `tid` leaves CPU 0 to `next_tid`; `preempted`: involuntary
    /// (prev_state TASK_RUNNING), else blocked (S).
    pub fn switch_out(&mut self, tid: u32, ts: u64, preempted: bool, next_tid: u32) {
        let prev_state = if preempted { fmt::TASK_RUNNING } else { 1 };
        self.switch_out_on(tid, ts, 0, next_tid, prev_state);
    }

    /// `tid` leaves `cpu` to `next_tid` in `prev_state`.
    pub fn switch_out_on(&mut self, tid: u32, ts: u64, cpu: u32, next_tid: u32, prev_state: u32) {
        let s = fmt::SwitchOut {
            tgid: self.pid(tid),
            prev_state,
            cpu,
            next_tid,
        };
        self.k(tid, ts, Payload::SwitchOut(s));
    }

    /// `tid` leaves `cpu` blocked, with kernel stack `kstack` (a
    /// [`TraceBuilder::kernel_stack`] id).
    pub fn switch_out_with_stack(&mut self, tid: u32, ts: u64, cpu: u32, kstack: u32) {
        let base = fmt::SwitchOut {
            tgid: self.pid(tid),
            prev_state: 1,
            cpu,
            next_tid: 0,
        };
        let st = fmt::SwitchStacks { kstack, ustack: 0 };
        self.k(tid, ts, Payload::SwitchOutStacks(base, st));
    }

    /// `waker` wakes `tid`.
    pub fn wakeup(&mut self, tid: u32, ts: u64, waker: u32) {
        let w = fmt::Wakeup {
            tgid: self.pid(tid),
            waker_tid: waker,
            waker_tgid: self.pids.get(&waker).copied().unwrap_or(0),
            target_cpu: 0,
            new_task: 0,
            flags: 0,
        };
        self.k(tid, ts, Payload::Wakeup(w));
    }

    /// `tid`, throttled at its switch-out at `out` (a preemption), is
    /// queued again at `to` (a THROTTLE record, written at its switch-in).
    pub fn throttle(&mut self, tid: u32, out: u64, to: u64) {
        let t = fmt::Throttle { to, cpu: 0, flags: 0 };
        self.k(tid, out, Payload::Throttle(t));
    }

    /// The hypervisor took `ns` of `tid`'s on-CPU stretch from `from` to `end`.
    pub fn steal(&mut self, tid: u32, from: u64, end: u64, ns: u64) {
        let s = fmt::Steal {
            from,
            ns,
            cpu: 0,
            reserved: 0,
        };
        self.k(tid, end, Payload::Steal(s));
    }

    /// Blocks `tid` from `out` until `waker` wakes it at `wake`; on CPU at `back`.
    pub fn block(&mut self, tid: u32, out: u64, wake: u64, waker: u32, back: u64) {
        self.switch_out(tid, out, false, 0);
        self.wakeup(tid, wake, waker);
        self.switch_in(tid, back, 99);
    }

    /// A syscall of `tid` from `ts` to `exit` that blocked, on fd 5 of kind
    /// `fdk` (a socket: 127.0.0.1:40000 → 127.0.0.1:7000, TCP).
    pub fn blocked_syscall(&mut self, tid: u32, ts: u64, exit: u64, nr: u32, fdk: u32) {
        let socket = fdk == fd_kind::SOCKET;
        let lo = [127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let sc = fmt::Syscall {
            exit_ts: exit,
            nr,
            fd_kind: fdk,
            ret: 1,
            fd: if fdk == fd_kind::NONE { -1 } else { 5 },
            flags: fmt::SYSCALL_BLOCKED,
            family: if socket { 2 } else { 0 },
            protocol: if socket { 6 } else { 0 },
            sport: 40000,
            dport: 7000,
            saddr: lo,
            daddr: lo,
            ..Default::default()
        };
        self.syscall(tid, ts, sc);
    }

    /// A SYSCALL record of `tid` whose entry time is `ts`.
    pub fn syscall(&mut self, tid: u32, ts: u64, sc: fmt::Syscall) {
        self.k(tid, ts, Payload::Syscall(sc));
    }

    /// A CPU sample of `tid` whose kernel stack is `kstack` (no user stack).
    pub fn cpu_sample(&mut self, tid: u32, ts: u64, kstack: u32) {
        let c = fmt::CpuSample {
            tgid: self.pid(tid),
            cpu: 0,
            kstack,
            ustack: 0,
        };
        self.k(tid, ts, Payload::CpuSample(c));
    }

    /// Defines kernel stack `id`: its return addresses, innermost first.
    pub fn kernel_stack(&mut self, id: u32, pcs: &[u64]) {
        let frames = pcs.iter().map(|&pc| fmt::StackFrame { pc, method: 0 }).collect();
        let stack = fmt::Stack {
            id,
            tgid: 0,
            flags: fmt::STACK_KERNEL,
            frames,
        };
        self.k(0, 0, Payload::Stack(stack));
    }

    /// A kernel function [start, end) named `name` (as the recorder stores kallsyms).
    pub fn ksym(&mut self, start: u64, end: u64, name: &str) {
        let k = fmt::Ksym {
            start,
            end,
            name: name.into(),
        };
        self.k(0, 0, Payload::Ksym(k));
    }

    /// `tid` enters method `m`.
    pub fn enter(&mut self, tid: u32, ts: u64, m: u64) {
        let e = fmt::MethodEvent {
            method: m,
            flags: 0,
            reserved: 0,
        };
        self.j(tid, ts, Payload::MethodEntry(e));
    }

    /// `tid` leaves method `m`.
    pub fn exit(&mut self, tid: u32, ts: u64, m: u64) {
        let e = fmt::MethodEvent {
            method: m,
            flags: 0,
            reserved: 0,
        };
        self.j(tid, ts, Payload::MethodExit(e));
    }

    /// A JVM event carrying a [`fmt::JvmBlock`] (monitor, wait, park,
    /// sleep, GC, safepoint): `kind` is one of [`fmt::kind`].
    pub fn jvm_event(&mut self, tid: u32, ts: u64, kind: u16, class: &str) {
        let b = fmt::JvmBlock {
            arg: 0,
            class: class.into(),
        };
        self.j(tid, ts, Payload::Jvm(kind, b));
    }

    /// Writes the trace directory `dir`, recorded from `start` to `end`;
    /// each JVM stream ends as the agent ends it (JVM_END at `end`), so it
    /// covers the recording to its end.
    pub fn write(&self, dir: &Path, start: u64, end: u64) {
        self.write_streams(dir, start, end, true);
    }

    /// [`TraceBuilder::write`] without the JVM streams' end records.
    pub fn write_unended(&self, dir: &Path, start: u64, end: u64) {
        self.write_streams(dir, start, end, false);
    }

    fn write_streams(&self, dir: &Path, start: u64, end: u64, ended: bool) {
        std::fs::create_dir_all(dir).unwrap();
        let meta = Meta {
            format: "jtrace".into(),
            version: fmt::FORMAT_VERSION,
            complete: true,
            jtrace_version: "test".into(),
            start_realtime_ns: 1_700_000_000_000_000_000,
            start_monotonic_ns: start,
            end_monotonic_ns: end,
            pid: self.jvms.keys().next().copied().unwrap_or(PID),
            command: vec!["java".into(), "Fixture".into()],
            cpu_sample_hz: self.cpu_sample_hz,
            ..Default::default()
        };
        meta.store(dir).unwrap();
        let mut k = FileHeader::new(fmt::KERNEL_MAGIC).to_bytes().to_vec();
        k.extend_from_slice(&self.kernel.buf);
        std::fs::write(dir.join(fmt::KERNEL_FILE), k).unwrap();
        for (pid, enc) in &self.jvms {
            let mut j = FileHeader::new(fmt::JVM_MAGIC).to_bytes().to_vec();
            j.extend_from_slice(&enc.buf);
            if ended {
                let mut end_rec = Encoder::new();
                end_rec.record(&Record {
                    tid: 0,
                    ts: end,
                    payload: Payload::JvmEnd(fmt::JvmEnd { lost_events: 0 }),
                });
                j.extend_from_slice(&end_rec.buf);
            }
            std::fs::write(dir.join(format!("{}{pid}.bin", fmt::JVM_FILE_PREFIX)), j).unwrap();
        }
    }
}
