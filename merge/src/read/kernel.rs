//! The kernel stream's records (`kernel.bin`: scheduler switches, wakeups,
//! threads, syscalls, page faults, library calls) as per-thread events.

use super::records::RawRecords;
use super::{words, TraceReader};
use crate::cause::Cause;
use crate::model::event::{Event, MethodIdx, MethodInfo, SyscallInfo, ThreadInfo};
use crate::model::trace::LeftOut;
use crate::printable::printable_owned;
use crate::stacks::StackPair;
use jtrace_format::{self as fmt, kind, DecodeError, Payload, RawRecord};
use std::path::Path;

impl TraceReader {
    /// Reads the records of the kernel stream at `path`; a record it cannot
    /// decode ends the reading (and the stream's coverage), and the trace's
    /// losses say so.
    pub(crate) fn read_kernel(&mut self, path: &Path, mut records: impl RawRecords) {
        while let Some(raw) = records.next_raw() {
            let raw = match raw {
                Ok(r) => r,
                Err(e) => {
                    self.kernel_cut_at(path, e);
                    break;
                }
            };
            let max_before = self.kernel_max_ts;
            self.kernel_max_ts = max_before.max(raw.ts);
            if self.kernel_fast_path(&raw) {
                continue;
            }
            match raw.decode() {
                Ok(rec) => {
                    self.trace.kernel_records += 1;
                    self.kernel_record(raw.tid, raw.ts, rec.payload);
                }
                Err(e) => {
                    self.kernel_cut_at(path, e);
                    // The stream is good up to the record before.
                    self.kernel_max_ts = max_before;
                    break;
                }
            }
        }
        self.flush_virtual_wakes();
    }

    /// A record that could not be read or decoded ends the kernel stream.
    fn kernel_cut_at(&mut self, path: &Path, e: DecodeError) {
        self.trace.losses.truncated.push(format!("{}: {e}", path.display()));
        self.kernel_cut = Some(format!("{e}"));
    }

    /// The hot fixed-size kinds straight from the bytes, exactly as their
    /// decoded payloads would be taken; false for any other record (or a
    /// payload too short), which is decoded.
    #[inline]
    fn kernel_fast_path(&mut self, raw: &RawRecord) -> bool {
        let (tid, ts) = (raw.tid, raw.ts);
        match raw.kind {
            kind::SWITCH_OUT => {
                let Some([tgid, prev_state, cpu, next_tid]) = words(raw.payload) else {
                    return false;
                };
                self.trace.kernel_records += 1;
                let p = fmt::SwitchOut {
                    tgid,
                    prev_state,
                    cpu,
                    next_tid,
                };
                self.switch_out(tid, ts, p);
                if let Some(st) = fmt::SwitchStacks::of_switch_out(raw.payload) {
                    self.push_stacks(tid, ts, tgid, st);
                }
            }
            kind::SWITCH_IN => {
                let Some([tgid, cpu, prev_tid, reserved]) = words(raw.payload) else {
                    return false;
                };
                self.trace.kernel_records += 1;
                self.switch_in(
                    tid,
                    ts,
                    fmt::SwitchIn {
                        tgid,
                        cpu,
                        prev_tid,
                        reserved,
                    },
                );
            }
            kind::WAKEUP => {
                let Some([tgid, waker_tid, waker_tgid, target_cpu, new_task, flags]) = words(raw.payload) else {
                    return false;
                };
                self.trace.kernel_records += 1;
                let p = fmt::Wakeup {
                    tgid,
                    waker_tid,
                    waker_tgid,
                    target_cpu,
                    new_task,
                    flags,
                };
                self.push(tid, ts, wakeup(&p));
            }
            _ => return false,
        }
        true
    }

    /// A decoded record of thread `tid` at `ts`, by family.
    fn kernel_record(&mut self, tid: u32, ts: u64, payload: Payload) {
        match payload {
            // The scheduler (the fast path's kinds, and a switch-out with stacks).
            Payload::SwitchOut(p) => self.switch_out(tid, ts, p),
            Payload::SwitchOutStacks(p, st) => {
                self.switch_out(tid, ts, p);
                self.push_stacks(tid, ts, p.tgid, st);
            }
            Payload::SwitchIn(p) => self.switch_in(tid, ts, p),
            Payload::Wakeup(p) => self.push(tid, ts, wakeup(&p)),
            // What held a runnable thread: its cgroup's quota, the hypervisor.
            Payload::Throttle(p) => self.held(tid, Cause::Throttled, ts, p.to.max(ts)),
            Payload::Steal(p) => {
                // The last `ns` of the stretch, never before its start.
                let from = ts.saturating_sub(p.ns).max(p.from.min(ts));
                self.held(tid, Cause::Steal, from, ts);
            }
            // Stacks and what names their frames.
            Payload::Stack(s) => self.trace.stacks.add_stack(ts, s),
            Payload::Mapping(m) => self.trace.stacks.mappings.entry(m.tgid).or_default().push((ts, m)),
            Payload::Ksym(k) => self.trace.stacks.ksyms.push(k),
            // The stacks of a block, taken after it: they belong to its
            // switch-out, as if written with it. A sampled short block
            // without its user part stands for no other: left stackless.
            Payload::BlockStack(b) => {
                self.trace.stacks.note_block_stack(b.flags, b.ustack, b.out_ts);
                let partial_sample = b.flags & fmt::BLOCK_STACK_SAMPLED != 0 && b.flags & fmt::BLOCK_STACK_NO_USER != 0;
                if !partial_sample {
                    let stacks = fmt::SwitchStacks {
                        kstack: b.kstack,
                        ustack: b.ustack,
                    };
                    self.push_stacks(tid, b.out_ts, b.tgid, stacks);
                }
            }
            Payload::CpuSample(c) => {
                self.trace.stacks.use_user(c.ustack, ts);
                let pair = self.trace.stacks.pair(StackPair {
                    tgid: c.tgid,
                    kstack: c.kstack,
                    ustack: c.ustack,
                });
                *self.trace.stacks.cpu_samples.entry((tid, pair)).or_default() += 1;
                self.trace.stacks.cpu_sample_times.push((ts, tid, pair));
            }
            // Threads and processes.
            Payload::Fork(p) => {
                let th = self.name_thread(tid, p.tgid, &p.comm);
                th.started_ts = Some(th.started_ts.map_or(ts, |s| s.min(ts)));
                self.push(tid, ts, Event::ThreadStart);
            }
            Payload::Exit(p) => {
                self.end_block(tid, ts);
                let th = self.thread(tid);
                th.tgid = p.tgid;
                th.exited_ts = Some(th.exited_ts.map_or(ts, |s| s.max(ts)));
                self.push(tid, ts, Event::ThreadEnd);
            }
            Payload::Exec(p) => {
                self.trace.stacks.execs.entry(p.tgid).or_default().push(ts);
                self.name_thread(tid, p.tgid, &p.comm);
                // Left out from here: the thread's time ends at its exec.
                if p.flags & fmt::EXEC_LEFT_OUT != 0 {
                    self.left_out(tid, ts, p);
                }
            }
            Payload::Comm(p) => {
                self.name_thread(tid, p.tgid, &p.comm);
            }
            // A task in a pid namespace: its tid there (read/pid_ns.rs).
            Payload::TaskNs(p) => {
                let th = self.thread(tid);
                th.tgid = p.tgid;
                th.ns_tid = Some(p.ns_tid);
            }
            // Syscalls, faults, files.
            Payload::Syscall(rec) => self.syscall(tid, ts, rec),
            Payload::PageFault(p) => self.push(tid, ts, Event::PageFault { address: p.address }),
            Payload::FilePath(p) => {
                self.trace.file_paths.insert((p.dev, p.ino), p.path);
            }
            // Library calls.
            Payload::ProbeDef(p) => {
                let m = self.intern_method(MethodInfo {
                    class: p.library,
                    name: p.symbol,
                    signature: String::new(),
                    native: true,
                });
                self.probes.insert(p.probe, m);
            }
            Payload::LibCall(p) => self.lib_call(tid, ts, p),
            _ => {}
        }
    }

    /// Process `p.tgid` (its thread `tid`) was left out at its exec at
    /// `ts`: the thread ends there, as at an exit (its time after it is
    /// in no stream).
    fn left_out(&mut self, tid: u32, ts: u64, p: fmt::TaskInfo) {
        self.end_block(tid, ts);
        let th = self.thread(tid);
        th.exited_ts = Some(th.exited_ts.map_or(ts, |s| s.max(ts)));
        let comm = th.comm.clone();
        self.push(tid, ts, Event::ThreadEnd);
        let left = &mut self.trace.losses.left_out;
        if !left.iter().any(|l| l.pid == p.tgid && l.ts == ts) {
            left.push(LeftOut { pid: p.tgid, comm, ts });
        }
    }

    /// A thread left its CPU (the CPU's switch chain, the thread's tgid, its
    /// event).
    #[inline]
    fn switch_out(&mut self, tid: u32, ts: u64, p: fmt::SwitchOut) {
        self.trace.sched_chain.switch_out(p.cpu, ts, tid, p.next_tid);
        self.set_tgid(tid, p.tgid);
        self.push(
            tid,
            ts,
            Event::SwitchOut {
                preempted: p.prev_state == fmt::TASK_RUNNING,
                prev_state: p.prev_state,
                cpu: p.cpu,
                next_tid: p.next_tid,
            },
        );
    }

    /// A thread got a CPU: the block of an at-switch syscall ends too.
    #[inline]
    fn switch_in(&mut self, tid: u32, ts: u64, p: fmt::SwitchIn) {
        self.trace.sched_chain.switch_in(p.cpu, tid);
        self.set_tgid(tid, p.tgid);
        self.end_block(tid, ts);
        self.push(
            tid,
            ts,
            Event::SwitchIn {
                cpu: p.cpu,
                prev_tid: p.prev_tid,
            },
        );
    }

    /// A throttle or steal window of thread `tid` from `from` to `to` (none
    /// when empty).
    fn held(&mut self, tid: u32, cause: Cause, from: u64, to: u64) {
        if to > from {
            self.push(tid, from, Event::Held { cause, begin: true });
            self.push(tid, to, Event::Held { cause, begin: false });
        }
    }

    /// The thread's process and name, from a task record.
    fn name_thread(&mut self, tid: u32, tgid: u32, comm: &[u8; 16]) -> &mut ThreadInfo {
        let th = self.thread(tid);
        th.tgid = tgid;
        th.comm = printable_owned(fmt::comm_str(comm));
        th
    }

    /// A SYSCALL record: its entry, and its exit at the record's exit time
    /// or, for one written at a switch-out, at the thread's next switch-in.
    fn syscall(&mut self, tid: u32, ts: u64, rec: fmt::Syscall) {
        let info = SyscallInfo { tid, enter: ts, rec };
        let idx = match &mut self.sorter {
            Some(s) => s.add_syscall(info),
            None if self.scan.is_some() => 0,
            None => {
                self.trace.syscalls.push(info);
                (self.trace.syscalls.len() - 1) as u32
            }
        };
        self.copy_syscall(&info, idx);
        self.push(tid, ts, Event::Syscall { idx, enter: true });
        if rec.flags & fmt::SYSCALL_AT_SWITCH != 0 {
            // Its block ends at the thread's next switch-in.
            if let Some(open) = self.open_blocks.insert(tid, idx) {
                self.push(
                    tid,
                    ts,
                    Event::Syscall {
                        idx: open,
                        enter: false,
                    },
                );
            }
        } else {
            self.push(tid, rec.exit_ts.max(ts), Event::Syscall { idx, enter: false });
        }
    }

    /// A LIB_CALL record: a span (enter and exit) of the method its probe
    /// stands for, or a safepoint window.
    fn lib_call(&mut self, tid: u32, ts: u64, p: fmt::LibCall) {
        let m = match self.probes.get(&p.probe) {
            Some(&m) => m,
            None => self.intern_method(MethodInfo {
                class: "?".into(),
                name: format!("probe{}", p.probe),
                signature: String::new(),
                native: true,
            }),
        };
        if self.safepoint_probe(tid, m, ts, p.exit_ts.max(ts)) {
            return;
        }
        self.push(tid, ts, Event::Enter(m));
        self.push(
            tid,
            p.exit_ts.max(ts),
            Event::Exit {
                method: m,
                exception: false,
            },
        );
    }

    /// The VM thread's calls of `SafepointSynchronize::begin` and `end`
    /// (probed by the kernel recorder, see `jtrace_bpf::safepoints`) bound
    /// a safepoint of its JVM: from the call of begin to the return of end.
    /// Returns whether the call was one of them (then it is a window, not a
    /// library call of the VM thread's).
    fn safepoint_probe(&mut self, tid: u32, m: MethodIdx, call: u64, ret: u64) -> bool {
        let (ts, begin) = match self.trace.methods[m as usize].name.as_str() {
            jtrace_symbols::hotspot::SAFEPOINT_BEGIN_SYMBOL => (call, true),
            jtrace_symbols::hotspot::SAFEPOINT_END_SYMBOL => (ret, false),
            _ => return false,
        };
        let pid = self.trace.threads.get(&tid).map_or(self.trace.meta.pid, |t| t.tgid);
        self.windows.entry(pid).or_default().push((ts, Cause::Safepoint, begin));
        true
    }

    /// The stacks of a switch-out, right after it (same time).
    fn push_stacks(&mut self, tid: u32, ts: u64, tgid: u32, st: fmt::SwitchStacks) {
        if st.kstack == 0 && st.ustack == 0 {
            return;
        }
        self.trace.stacks.use_user(st.ustack, ts);
        let pair = self.trace.stacks.pair(StackPair {
            tgid,
            kstack: st.kstack,
            ustack: st.ustack,
        });
        self.push(tid, ts, Event::Stack(pair));
    }

    /// The method a library-call probe stands for (interned: probes are few).
    fn intern_method(&mut self, info: MethodInfo) -> MethodIdx {
        if let Some(i) = self.trace.methods.iter().position(|m| *m == info) {
            return i as MethodIdx;
        }
        self.trace.methods.push(info);
        (self.trace.methods.len() - 1) as MethodIdx
    }

    /// Switch records repeat the thread's process id: look the thread up
    /// only when it changes (once per thread, not once per switch).
    fn set_tgid(&mut self, tid: u32, tgid: u32) {
        if self.tgids.get(&tid) != Some(&tgid) {
            self.thread(tid).tgid = tgid;
            self.tgids.insert(tid, tgid);
        }
    }

    /// The thread is back on CPU (or gone): the block an at-switch SYSCALL
    /// record described is over, and so is that syscall as far as we know.
    fn end_block(&mut self, tid: u32, ts: u64) {
        if let Some(idx) = self.open_blocks.remove(&tid) {
            self.push(tid, ts, Event::Syscall { idx, enter: false });
        }
    }
}

/// The event of a WAKEUP record: one a hard interrupt did (a timer, a
/// device) has no waker (tid 0, as the idle task's): the task it found
/// running had nothing to do with it.
#[inline]
fn wakeup(p: &fmt::Wakeup) -> Event {
    let irq = p.flags & fmt::WAKEUP_HARDIRQ != 0;
    Event::Wakeup {
        waker_tid: if irq { 0 } else { p.waker_tid },
        waker_tgid: if irq { 0 } else { p.waker_tgid },
        new_task: p.new_task != 0,
    }
}
