//! The kernel's scheduling as ftrace bundles, one per CPU at a time.
//!
//! A switch whose previous thread is the one the CPU's last switch put
//! there goes into the bundle's `compact_sched` arrays (about 8 bytes:
//! a time delta, the state, the next thread, its comm's index in the
//! bundle's table); Perfetto takes such a switch's previous thread from the
//! CPU's last switch. jtrace records only the traced threads' switches, so
//! the writer says which switches chain (a traced thread's switch-out on
//! the CPU its recorded switch-in put it on, with no other recorded switch
//! of that CPU between: [`jtrace_merge::SchedChain`]); every other switch,
//! and every waking (whose waker Perfetto would take from the CPU too), is
//! a full `sched_switch` / `sched_waking` event.

use super::fields::{ftrace, packet, TRACE_PACKET};
use super::wire::Buf;

/// Events buffered per CPU before they go out as one bundle.
pub const BUNDLE: usize = 512;

/// One CPU's events not yet written.
#[derive(Default)]
struct Bundle {
    /// Events in it (full and compact).
    len: usize,
    /// Full `FtraceEvent`s, each already a `FtraceEventBundle.event` field.
    events: Buf,
    /// Compact switches: packed arrays, in the bundle's order.
    ts: Buf,
    last_ts: u64,
    state: Buf,
    next_pid: Buf,
    comm_index: Buf,
    switches: usize,
    /// The comm table: each entry's thread, in index order.
    comms: Vec<u32>,
    table: Buf,
}

impl Bundle {
    /// Empties it, keeping its buffers.
    fn reset(&mut self) {
        for b in [
            &mut self.events,
            &mut self.ts,
            &mut self.state,
            &mut self.next_pid,
            &mut self.comm_index,
            &mut self.table,
        ] {
            b.clear();
        }
        self.comms.clear();
        self.len = 0;
        self.switches = 0;
        self.last_ts = 0;
    }
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

/// Room for an event's fixed fields (keys, varints, lengths).
const EVENT_ROOM: usize = 96;

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
        b.ts.cursor(10).varint(ts - b.last_ts);
        b.last_ts = ts;
        b.state.cursor(10).varint(prev_state as i64 as u64);
        b.next_pid.cursor(10).varint(next.0 as i32 as u64);
        let index = match b.comms.iter().position(|&t| t == next.0) {
            Some(i) => i,
            None => {
                b.comms.push(next.0);
                b.table
                    .cursor(16 + next.1.len())
                    .bytes(ftrace::INTERN_TABLE, next.1.as_bytes());
                b.comms.len() - 1
            }
        };
        b.comm_index.cursor(10).varint(index as u64);
        b.switches += 1;
        b.len += 1;
        true
    }

    /// A switch written in full.
    pub fn switch(&mut self, cpu: u32, s: &Switch) {
        let b = self.cpu(cpu);
        let mut c = b.events.cursor(EVENT_ROOM + s.prev.1.len() + s.next.1.len());
        let e = c.open(ftrace::EVENT);
        c.uint(ftrace::TIMESTAMP, s.ts);
        c.uint(ftrace::PID, s.prev.0 as u64);
        let m = c.open(ftrace::SCHED_SWITCH);
        c.bytes(ftrace::PREV_COMM, s.prev.1.as_bytes());
        c.uint(ftrace::PREV_PID, s.prev.0 as i32 as u64);
        c.uint(ftrace::PREV_STATE, s.prev_state as i64 as u64);
        c.bytes(ftrace::NEXT_COMM, s.next.1.as_bytes());
        c.uint(ftrace::NEXT_PID, s.next.0 as i32 as u64);
        c.close(m);
        c.close(e);
        drop(c);
        b.len += 1;
    }

    /// A waking of `wakee` by `waker`, on the CPU the wakee will run on.
    pub fn waking(&mut self, cpu: u32, ts: u64, waker: u32, wakee: (u32, &str)) {
        let b = self.cpu(cpu);
        let mut c = b.events.cursor(EVENT_ROOM + wakee.1.len());
        let e = c.open(ftrace::EVENT);
        c.uint(ftrace::TIMESTAMP, ts);
        c.uint(ftrace::PID, waker as u64);
        let m = c.open(ftrace::SCHED_WAKING);
        c.bytes(ftrace::WAKING_COMM, wakee.1.as_bytes());
        c.uint(ftrace::WAKING_PID, wakee.0 as i32 as u64);
        c.uint(ftrace::WAKING_SUCCESS, 1);
        c.uint(ftrace::WAKING_TARGET_CPU, cpu as i32 as u64);
        c.close(m);
        c.close(e);
        drop(c);
        b.len += 1;
    }

    /// Whether `cpu`'s bundle is full.
    pub fn full(&self, cpu: u32) -> bool {
        self.cpus.get(cpu as usize).is_some_and(|b| b.len >= BUNDLE)
    }

    /// Writes `cpu`'s bundle as a packet into `out` (nothing if empty).
    pub fn flush(&mut self, cpu: u32, out: &mut Buf) {
        let Some(b) = self.cpus.get_mut(cpu as usize) else {
            return;
        };
        if b.len == 0 {
            return;
        }
        let parts = [&b.events, &b.table, &b.ts, &b.state, &b.next_pid, &b.comm_index];
        let room = 128 + 2 * b.switches + parts.iter().map(|p| p.len()).sum::<usize>();
        let mut c = out.cursor(room);
        let p = c.open(TRACE_PACKET);
        let bundle = c.open(packet::FTRACE_EVENTS);
        c.uint(ftrace::CPU, cpu as u64);
        c.raw(b.events.bytes());
        if b.switches > 0 {
            let m = c.open(ftrace::COMPACT_SCHED);
            c.raw(b.table.bytes());
            c.bytes(ftrace::SWITCH_TIMESTAMP, b.ts.bytes());
            c.bytes(ftrace::SWITCH_PREV_STATE, b.state.bytes());
            c.bytes(ftrace::SWITCH_NEXT_PID, b.next_pid.bytes());
            // Priorities are not recorded: 0, as the full events leave them.
            let prio = c.open(ftrace::SWITCH_NEXT_PRIO);
            c.zeros(b.switches);
            c.close(prio);
            c.bytes(ftrace::SWITCH_NEXT_COMM_INDEX, b.comm_index.bytes());
            c.close(m);
        }
        c.close(bundle);
        c.close(p);
        drop(c);
        b.reset();
    }

    /// Writes every CPU's bundle.
    pub fn flush_all(&mut self, out: &mut Buf) {
        for cpu in 0..self.cpus.len() {
            self.flush(cpu as u32, out);
        }
    }
}
