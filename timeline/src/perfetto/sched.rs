//! The kernel's scheduling as ftrace bundles, one per CPU at a time.
//!
//! A switch whose previous thread is the one the CPU's last switch put
//! there goes into the bundle's `compact_sched` arrays (about 8 bytes:
//! a time delta, the state, the next thread, its comm's index in the
//! bundle's table); Perfetto takes such a switch's previous thread from the
//! CPU's last switch. jtrace records only the traced threads' switches, so
//! the writer says which switches chain (a traced thread's switch-out on
//! the CPU its recorded switch-in put it on); every other switch, and every
//! waking, is a full `sched_switch` / `sched_waking` event.

use super::fields::{ftrace, packet, TRACE_PACKET};
use super::wire;

/// Events buffered per CPU before they go out as one bundle.
pub const BUNDLE: usize = 512;

/// One CPU's events not yet written.
#[derive(Default)]
struct Bundle {
    /// Events in it (full and compact).
    len: usize,
    /// Full `FtraceEvent`s, each already a `FtraceEventBundle.event` field.
    events: Vec<u8>,
    /// Compact switches: packed arrays, in the bundle's order.
    ts: Vec<u8>,
    last_ts: u64,
    state: Vec<u8>,
    next_pid: Vec<u8>,
    comm_index: Vec<u8>,
    switches: usize,
    /// The comm table: each entry's thread, in index order.
    comms: Vec<u32>,
    table: Vec<u8>,
}

/// The CPUs' bundles.
#[derive(Default)]
pub struct Sched {
    cpus: Vec<Bundle>,
}

/// What a full `sched_switch` says.
pub struct Switch<'a> {
    /// Time.
    pub ts: u64,
    /// The thread leaving and its name.
    pub prev: (u32, &'a str),
    /// Its state (the kernel's bits).
    pub prev_state: u32,
    /// The thread taking the CPU and its name.
    pub next: (u32, &'a str),
}

impl Bundle {
    /// Empties it, keeping its buffers.
    fn reset(&mut self) {
        for v in [
            &mut self.events,
            &mut self.ts,
            &mut self.state,
            &mut self.next_pid,
            &mut self.comm_index,
            &mut self.table,
        ] {
            v.clear();
        }
        self.comms.clear();
        self.len = 0;
        self.switches = 0;
        self.last_ts = 0;
    }
}

impl Sched {
    fn cpu(&mut self, cpu: u32) -> &mut Bundle {
        let i = cpu as usize;
        if i >= self.cpus.len() {
            self.cpus.resize_with(i + 1, Bundle::default);
        }
        &mut self.cpus[i]
    }

    /// A switch that chains on `cpu` (its previous thread is the one the
    /// CPU's last switch put there); `false` if it cannot go in the compact
    /// arrays (it is older than the bundle's last), so the caller writes it
    /// in full.
    #[must_use]
    pub fn compact_switch(&mut self, cpu: u32, ts: u64, prev_state: u32, next: (u32, &str)) -> bool {
        let b = self.cpu(cpu);
        if ts < b.last_ts {
            return false;
        }
        wire::varint(&mut b.ts, ts - b.last_ts);
        b.last_ts = ts;
        wire::varint(&mut b.state, prev_state as i64 as u64);
        wire::varint(&mut b.next_pid, next.0 as i32 as u64);
        let index = match b.comms.iter().position(|&t| t == next.0) {
            Some(i) => i,
            None => {
                b.comms.push(next.0);
                wire::bytes(&mut b.table, ftrace::INTERN_TABLE, next.1.as_bytes());
                b.comms.len() - 1
            }
        };
        wire::varint(&mut b.comm_index, index as u64);
        b.switches += 1;
        b.len += 1;
        true
    }

    /// A switch written in full.
    pub fn switch(&mut self, cpu: u32, s: &Switch) {
        let b = self.cpu(cpu);
        let e = wire::open(&mut b.events, ftrace::EVENT);
        wire::uint(&mut b.events, ftrace::TIMESTAMP, s.ts);
        wire::uint(&mut b.events, ftrace::PID, s.prev.0 as u64);
        let m = wire::open(&mut b.events, ftrace::SCHED_SWITCH);
        wire::bytes(&mut b.events, ftrace::PREV_COMM, s.prev.1.as_bytes());
        wire::uint(&mut b.events, ftrace::PREV_PID, s.prev.0 as i32 as u64);
        wire::uint(&mut b.events, ftrace::PREV_STATE, s.prev_state as i64 as u64);
        wire::bytes(&mut b.events, ftrace::NEXT_COMM, s.next.1.as_bytes());
        wire::uint(&mut b.events, ftrace::NEXT_PID, s.next.0 as i32 as u64);
        wire::close(&mut b.events, m);
        wire::close(&mut b.events, e);
        b.len += 1;
    }

    /// A waking of `wakee` by `waker`, on the CPU the wakee will run on.
    pub fn waking(&mut self, cpu: u32, ts: u64, waker: u32, wakee: (u32, &str)) {
        let b = self.cpu(cpu);
        let e = wire::open(&mut b.events, ftrace::EVENT);
        wire::uint(&mut b.events, ftrace::TIMESTAMP, ts);
        wire::uint(&mut b.events, ftrace::PID, waker as u64);
        let m = wire::open(&mut b.events, ftrace::SCHED_WAKING);
        wire::bytes(&mut b.events, ftrace::WAKING_COMM, wakee.1.as_bytes());
        wire::uint(&mut b.events, ftrace::WAKING_PID, wakee.0 as i32 as u64);
        wire::uint(&mut b.events, ftrace::WAKING_SUCCESS, 1);
        wire::uint(&mut b.events, ftrace::WAKING_TARGET_CPU, cpu as i32 as u64);
        wire::close(&mut b.events, m);
        wire::close(&mut b.events, e);
        b.len += 1;
    }

    /// Whether `cpu`'s bundle is full.
    pub fn full(&self, cpu: u32) -> bool {
        self.cpus.get(cpu as usize).is_some_and(|b| b.len >= BUNDLE)
    }

    /// Writes `cpu`'s bundle as a packet into `out` (nothing if empty).
    pub fn flush(&mut self, cpu: u32, out: &mut Vec<u8>) {
        let Some(b) = self.cpus.get_mut(cpu as usize) else {
            return;
        };
        if b.len == 0 {
            return;
        }
        let p = wire::open(out, TRACE_PACKET);
        let bundle = wire::open(out, packet::FTRACE_EVENTS);
        wire::uint(out, ftrace::CPU, cpu as u64);
        out.extend_from_slice(&b.events);
        if b.switches > 0 {
            let c = wire::open(out, ftrace::COMPACT_SCHED);
            out.extend_from_slice(&b.table);
            wire::bytes(out, ftrace::SWITCH_TIMESTAMP, &b.ts);
            wire::bytes(out, ftrace::SWITCH_PREV_STATE, &b.state);
            wire::bytes(out, ftrace::SWITCH_NEXT_PID, &b.next_pid);
            // Priorities are not recorded: 0, as the full events leave them.
            let prio = wire::open(out, ftrace::SWITCH_NEXT_PRIO);
            out.resize(out.len() + b.switches, 0);
            wire::close(out, prio);
            wire::bytes(out, ftrace::SWITCH_NEXT_COMM_INDEX, &b.comm_index);
            wire::close(out, c);
        }
        wire::close(out, bundle);
        wire::close(out, p);
        b.reset();
    }

    /// Writes every CPU's bundle.
    pub fn flush_all(&mut self, out: &mut Vec<u8>) {
        for cpu in 0..self.cpus.len() {
            self.flush(cpu as u32, out);
        }
    }
}
