//! The payloads of the kernel stream's records. The ones the BPF programs
//! write have the layout of c/kernel_records.h: `kernel_payload!` reads
//! and writes each field at the offset, and with the type, that bindgen
//! found in the C struct (build.rs), so the C header is the one definition.

use std::mem::{offset_of, size_of};

use crate::wire::{wire, Cursor, Wire};
use crate::{c, RECORD_HEADER_LEN};

// Every record begins with the header that the stream's readers parse.
const _: () = assert!(size_of::<c::rec_hdr>() == RECORD_HEADER_LEN);

/// [`SwitchIn::prev_tid`] of a switch-in the kernel never reported and the
/// recorder inferred at the thread's next switch-out: the task that left the
/// CPU is not known. Its timestamp is derived from the thread's CPU time
/// since the scheduler picked it (exact to the nanosecond for normal tasks
/// unless interrupt time was accounted separately), and is never earlier
/// than the last switch recorded on that CPU.
pub const PREV_TID_UNKNOWN: u32 = c::PREV_TID_UNKNOWN;

/// `prev_state` value of a task that was preempted while runnable.
pub const TASK_RUNNING: u32 = 0;

/// Kernel payload of [`kind::SWITCH_OUT`](crate::kind::SWITCH_OUT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchOut {
    /// Thread group (process) id of the thread.
    pub tgid: u32,
    /// Kernel `prev_state`: [`TASK_RUNNING`] (0) means preempted (involuntary).
    pub prev_state: u32,
    /// CPU the thread left.
    pub cpu: u32,
    /// Thread that got the CPU.
    pub next_tid: u32,
}

/// Kernel payload of [`kind::SWITCH_IN`](crate::kind::SWITCH_IN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchIn {
    /// Thread group (process) id of the thread.
    pub tgid: u32,
    /// CPU the thread got.
    pub cpu: u32,
    /// Thread that left the CPU.
    pub prev_tid: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// Kernel payload of [`kind::WAKEUP`](crate::kind::WAKEUP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wakeup {
    /// Thread group of the woken thread.
    pub tgid: u32,
    /// Thread that did the waking (the current task at sched_waking).
    pub waker_tid: u32,
    /// Process of the waker.
    pub waker_tgid: u32,
    /// CPU the woken thread is queued on.
    pub target_cpu: u32,
    /// 0 = sched_waking, 1 = sched_wakeup_new (a new thread's first wakeup).
    pub new_task: u32,
    /// [`WAKEUP_HARDIRQ`] (0 in traces written before it existed).
    pub flags: u32,
}

/// Flag in [`Wakeup::flags`]: the wakeup ran in a hard interrupt (a timer,
/// a device), so `waker_tid` is whichever task the interrupt found running,
/// not the waker. Readers report no waker (tid 0) for it.
pub const WAKEUP_HARDIRQ: u32 = c::WAKEUP_HARDIRQ;

/// Flag in [`TaskInfo::flags`] of an EXEC: the process became one the
/// invoking user may not trace (setuid, setgid, file capabilities, not
/// dumpable); nothing of it is recorded from this exec on, and readers
/// end its thread there (docs/SECURITY.md, "What a trace reveals").
pub const EXEC_LEFT_OUT: u32 = c::EXEC_LEFT_OUT;

/// Kernel payload of [`kind::FORK`](crate::kind::FORK).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fork {
    /// Thread group of the new thread (== tid for a new process).
    pub tgid: u32,
    /// Thread that created it.
    pub parent_tid: u32,
    /// Process of the creator.
    pub parent_tgid: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// Name (comm) inherited at creation, NUL-padded.
    pub comm: [u8; 16],
}

/// Kernel payload of [`kind::EXIT`](crate::kind::EXIT), [`kind::COMM`](crate::kind::COMM) and [`kind::EXEC`](crate::kind::EXEC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskInfo {
    /// Thread group of the thread.
    pub tgid: u32,
    /// [`EXEC_LEFT_OUT`] on an EXEC; 0 otherwise (and in traces written
    /// before the flag existed).
    pub flags: u32,
    /// Name (comm), NUL-padded.
    pub comm: [u8; 16],
}

/// Kernel payload of [`kind::TASK_NS`](crate::kind::TASK_NS): a task's
/// ids in its own pid namespace (the record's tid is its host tid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskNs {
    /// Thread group of the task, on the host.
    pub tgid: u32,
    /// The task's id in its namespace (what gettid() returns there).
    pub ns_tid: u32,
    /// Its thread group's id in its namespace (getpid() there).
    pub ns_tgid: u32,
    /// The namespace's depth: 1 is a child of the initial namespace.
    pub level: u32,
    /// The namespace's inode (as `/proc/PID/ns/pid` names it).
    pub pidns_ino: u64,
}

/// Kind of the file behind an fd, resolved in the kernel at the syscall.
pub mod fd_kind {
    use crate::c;

    /// No fd, or not resolved.
    pub const NONE: u32 = c::FDK_NONE;
    /// A socket.
    pub const SOCKET: u32 = c::FDK_SOCKET;
    /// A regular file.
    pub const FILE: u32 = c::FDK_FILE;
    /// A pipe or FIFO.
    pub const PIPE: u32 = c::FDK_PIPE;
    /// A block device.
    pub const BLOCK: u32 = c::FDK_BLOCK;
    /// A character device.
    pub const CHAR: u32 = c::FDK_CHAR;
    /// An anonymous inode (eventfd, epoll, timerfd, ...).
    pub const ANON: u32 = c::FDK_ANON;
    /// A directory.
    pub const DIR: u32 = c::FDK_DIR;
    /// Anything else.
    pub const OTHER: u32 = c::FDK_OTHER;

    /// Name of an fd kind.
    pub fn name(k: u32) -> &'static str {
        match k {
            SOCKET => "socket",
            FILE => "file",
            PIPE => "pipe",
            BLOCK => "block",
            CHAR => "char",
            ANON => "anon",
            DIR => "dir",
            OTHER => "other",
            _ => "none",
        }
    }
}

/// Flag in [`Syscall::flags`]: the thread switched out inside the syscall.
pub const SYSCALL_BLOCKED: u32 = c::SYSCALL_BLOCKED;

/// Flag in [`Syscall::flags`]: written at a voluntary switch-out inside the
/// syscall (read from the task's saved registers), not at its exit. The
/// record describes that one block: the header ts is the switch-out, the
/// block ends at the thread's next SWITCH_IN, `exit_ts` and `ret` are 0
/// (not known). Costs nothing on syscalls that do not block.
pub const SYSCALL_AT_SWITCH: u32 = c::SYSCALL_AT_SWITCH;

/// Kernel payload of [`kind::SYSCALL`](crate::kind::SYSCALL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Syscall {
    /// Exit time (the header ts is the entry time); 0 with [`SYSCALL_AT_SWITCH`].
    pub exit_ts: u64,
    /// x86-64 syscall number ([`syscall_nr`](crate::syscall_nr) names the ones jtrace tells apart).
    pub nr: u32,
    /// [`fd_kind`] of `fd`.
    pub fd_kind: u32,
    /// Return value (0 with [`SYSCALL_AT_SWITCH`]: not known).
    pub ret: i64,
    /// The fd argument, or -1.
    pub fd: i32,
    /// [`SYSCALL_BLOCKED`], [`SYSCALL_AT_SWITCH`].
    pub flags: u32,
    /// A syscall-specific argument: futex address and op, timeout, ...
    pub arg: u64,
    /// Socket address family (AF_INET 2, AF_INET6 10, AF_UNIX 1) or 0.
    pub family: u16,
    /// Socket protocol (IPPROTO_TCP 6, IPPROTO_UDP 17) or 0.
    pub protocol: u16,
    /// Local port (host order).
    pub sport: u16,
    /// Remote port (host order).
    pub dport: u16,
    /// Local address (IPv4 in the first 4 bytes).
    pub saddr: [u8; 16],
    /// Remote address.
    pub daddr: [u8; 16],
    /// File: device number (kernel dev_t).
    pub dev: u64,
    /// File: inode number.
    pub ino: u64,
}

/// Kernel payload of [`kind::PAGE_FAULT`](crate::kind::PAGE_FAULT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageFault {
    /// Faulting address.
    pub address: u64,
    /// User instruction pointer.
    pub ip: u64,
    /// Hardware error code.
    pub error_code: u64,
}

/// Kernel payload of [`kind::BLOCK_IO`](crate::kind::BLOCK_IO).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockIo {
    /// Completion time (0 if not seen).
    pub complete_ts: u64,
    /// Device (kernel dev_t).
    pub dev: u64,
    /// First sector.
    pub sector: u64,
    /// Bytes.
    pub bytes: u32,
    /// 1 = write, 0 = read.
    pub write: u32,
}

/// Kernel payload of [`kind::LIB_CALL`](crate::kind::LIB_CALL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LibCall {
    /// Return time (the header ts is the call time).
    pub exit_ts: u64,
    /// Probe id, named by a [`ProbeDef`].
    pub probe: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// Return value.
    pub ret: u64,
}

/// Flag in [`Throttle::flags`]: the unthrottle the kernel's throttled time
/// put after the thread's switch-in (more than one throttle episode in
/// between, or clock drift); `to` is that switch-in.
pub const THROTTLE_CLAMPED: u32 = c::THROTTLE_CLAMPED;

/// Kernel payload of [`kind::THROTTLE`](crate::kind::THROTTLE): written at
/// the switch-in of a thread that its cgroup's CPU quota (or an ancestor's)
/// had held off CPU since its switch-out (the header ts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttle {
    /// When it was queued to run again (unthrottled); from here to its
    /// switch-in it waited for a CPU. Not before the header ts.
    pub to: u64,
    /// CPU whose run queue of the cgroup was throttled.
    pub cpu: u32,
    /// [`THROTTLE_CLAMPED`].
    pub flags: u32,
}

/// Kernel payload of [`kind::STEAL`](crate::kind::STEAL): the paravirt steal
/// clock's advance over an on-CPU stretch of the thread, which ends at the
/// header ts (its switch-out, or a CPU sample).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Steal {
    /// Start of the stretch: the thread's switch-in, or the CPU sample before.
    pub from: u64,
    /// Nanoseconds the hypervisor ran something else on the vCPU meanwhile.
    pub ns: u64,
    /// The CPU.
    pub cpu: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// Flag in [`BlockStack::flags`]: a short block, one of those sampled
/// (at most a few per CPU per second), not one every block of its kind has.
pub const BLOCK_STACK_SAMPLED: u32 = c::BLOCK_STACK_SAMPLED;
/// Flag in [`BlockStack::flags`]: the user stack could not be taken (the
/// thread's user registers moved before the walk: a signal handler).
pub const BLOCK_STACK_NO_USER: u32 = c::BLOCK_STACK_NO_USER;

/// Kernel payload of [`kind::BLOCK_STACK`](crate::kind::BLOCK_STACK): the
/// stacks of the thread's block that began with its SWITCH_OUT at
/// `out_ts`, taken once the block turned out long (or was sampled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockStack {
    /// The block's switch-out.
    pub out_ts: u64,
    /// Process of the thread.
    pub tgid: u32,
    /// [`BLOCK_STACK_SAMPLED`], [`BLOCK_STACK_NO_USER`].
    pub flags: u32,
    /// Kernel stack id (0: none).
    pub kstack: u32,
    /// User stack id (0: none).
    pub ustack: u32,
}

/// Kernel payload of [`kind::PROBE_DEF`](crate::kind::PROBE_DEF).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeDef {
    /// Id used by [`LibCall::probe`].
    pub probe: u32,
    /// Library as the user named it (`libz.so.1`).
    pub library: String,
    /// Symbol (`inflate`).
    pub symbol: String,
}
wire! { ProbeDef { probe, library, symbol } }

/// Kernel payload of [`kind::FILE_PATH`](crate::kind::FILE_PATH).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePath {
    /// Device (kernel dev_t), as in [`Syscall::dev`].
    pub dev: u64,
    /// Inode number, as in [`Syscall::ino`].
    pub ino: u64,
    /// Absolute path the file had when it was resolved.
    pub path: String,
}
wire! { FilePath { dev, ino, path } }

/// Turns a NUL-padded comm into a string.
pub fn comm_str(comm: &[u8; 16]) -> String {
    let n = comm.iter().position(|&c| c == 0).unwrap_or(16);
    String::from_utf8_lossy(&comm[..n]).into_owned()
}

/// A field of a C record as the stream carries it: little-endian.
trait LeField: Copy {
    /// Its size in bytes.
    const SIZE: usize;
    /// Reads it from `b`, which is `SIZE` bytes long.
    fn read(b: &[u8]) -> Self;
    /// Writes it to `b`, which is `SIZE` bytes long.
    fn write(self, b: &mut [u8]);
}

macro_rules! le_int {
    ($($t:ty),*) => {$(
        impl LeField for $t {
            const SIZE: usize = size_of::<$t>();
            #[inline(always)]
            fn read(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().expect("field size"))
            }
            #[inline(always)]
            fn write(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_le_bytes())
            }
        }
    )*};
}
le_int!(u16, u32, u64, i32, i64);

impl LeField for [u8; 16] {
    const SIZE: usize = 16;
    #[inline(always)]
    fn read(b: &[u8]) -> Self {
        b.try_into().expect("field size")
    }
    #[inline(always)]
    fn write(self, b: &mut [u8]) {
        b.copy_from_slice(&self)
    }
}

/// The field of C record `R` at byte `at` of a payload (the record after
/// its header). `_field` selects that field of `R` and is never called: it
/// gives the value the C field's type, so a type changed in the header
/// no longer compiles here instead of reading the wrong bytes.
#[inline(always)]
fn read_field<R, F: LeField, const N: usize>(payload: &[u8; N], at: usize, _field: fn(&R) -> &F) -> F {
    F::read(&payload[at..at + F::SIZE])
}

/// Writes `v` as the field of C record `R` at byte `at` of a payload; see
/// [`read_field`].
#[inline(always)]
fn write_field<R, F: LeField, const N: usize>(payload: &mut [u8; N], at: usize, v: F, _field: fn(&R) -> &F) {
    v.write(&mut payload[at..at + F::SIZE])
}

/// Offset of a field of a C record in its payload (the record after its header).
macro_rules! payload_offset {
    ($rec:ident, $($field:ident).+) => {
        const { offset_of!(c::$rec, $($field).+) - RECORD_HEADER_LEN }
    };
}

/// Gives the Rust payload `$name` the layout of C record `$rec`: `LEN`,
/// `to_bytes` and `from_bytes`, with every listed field where the C struct
/// has it. Fields of an embedded struct are listed under its member name
/// (`obj { family, .. }` is `rec.obj.family` in C, `family` in Rust).
macro_rules! kernel_payload {
    ($name:ident = $rec:ident { $($field:ident),* $(,)? } $($sub:ident { $($subfield:ident),* $(,)? })?) => {
        impl $name {
            #[doc = concat!("Bytes of the payload on the wire: `struct ", stringify!($rec),
                "` of c/kernel_records.h after its header (a multiple of 8).")]
            pub const LEN: usize = size_of::<c::$rec>() - RECORD_HEADER_LEN;

            /// The payload as the stream carries it: the one encoding of
            /// the record, which [`Encoder`](crate::Encoder) writes.
            #[inline]
            pub fn to_bytes(&self) -> [u8; $name::LEN] {
                let mut o = [0u8; $name::LEN];
                $(write_field(&mut o, payload_offset!($rec, $field), self.$field, |r: &c::$rec| &r.$field);)*
                $($(write_field(
                    &mut o,
                    payload_offset!($rec, $sub.$subfield),
                    self.$subfield,
                    |r: &c::$rec| &r.$sub.$subfield,
                );)*)?
                o
            }

            /// Reads the payload from the start of `b` (the inverse of
            /// `to_bytes`); `None` when `b` is shorter than `LEN`.
            #[inline]
            pub fn from_bytes(b: &[u8]) -> Option<$name> {
                let p: &[u8; $name::LEN] = b.first_chunk()?;
                Some($name {
                    $($field: read_field(p, payload_offset!($rec, $field), |r: &c::$rec| &r.$field),)*
                    $($($subfield: read_field(
                        p,
                        payload_offset!($rec, $sub.$subfield),
                        |r: &c::$rec| &r.$sub.$subfield,
                    ),)*)?
                })
            }

            /// Bytes of the C record's payload that the listed fields cover.
            #[cfg(test)]
            fn mapped_bytes() -> usize {
                0 $(+ field_size(|r: &c::$rec| &r.$field))* $($(+ field_size(|r: &c::$rec| &r.$sub.$subfield))*)?
            }
        }

        impl Wire for $name {
            fn put(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_bytes());
            }
            fn get(c: &mut Cursor<'_>) -> Option<Self> {
                let p = $name::from_bytes(c.rest())?;
                c.take($name::LEN)?;
                Some(p)
            }
        }
    };
}

kernel_payload! { SwitchOut = switch_out_rec { tgid, prev_state, cpu, next_tid } }
kernel_payload! { SwitchIn = switch_in_rec { tgid, cpu, prev_tid, reserved } }
kernel_payload! { Wakeup = wakeup_rec { tgid, waker_tid, waker_tgid, target_cpu, new_task, flags } }
kernel_payload! { Fork = fork_rec { tgid, parent_tid, parent_tgid, reserved, comm } }
kernel_payload! { TaskInfo = task_rec { tgid, flags, comm } }
kernel_payload! { TaskNs = task_ns_rec { tgid, ns_tid, ns_tgid, level, pidns_ino } }
kernel_payload! {
    Syscall = syscall_rec { exit_ts, nr, fd_kind, ret, fd, flags, arg }
    obj { family, protocol, sport, dport, saddr, daddr, dev, ino }
}
kernel_payload! { PageFault = page_fault_rec { address, ip, error_code } }
kernel_payload! { BlockIo = block_io_rec { complete_ts, dev, sector, bytes, write } }
kernel_payload! { LibCall = lib_call_rec { exit_ts, probe, reserved, ret } }
kernel_payload! { Throttle = throttle_rec { to, cpu, flags } }
kernel_payload! { Steal = steal_rec { from, ns, cpu, reserved } }
kernel_payload! { BlockStack = block_stack_rec { out_ts, tgid, flags, kstack, ustack } }

impl Syscall {
    /// The `fd_kind` of a SYSCALL payload, read alone: most SYSCALL records
    /// name no file, which a reader can tell without decoding them.
    #[inline]
    pub fn fd_kind_of(payload: &[u8]) -> Option<u32> {
        let at = payload_offset!(syscall_rec, fd_kind);
        Some(u32::read(payload.get(at..at + 4)?))
    }
}

#[cfg(test)]
fn field_size<R, F>(_field: fn(&R) -> &F) -> usize {
    size_of::<F>()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A field added to a C record fails here until the Rust payload has it
    /// (a renamed or retyped one does not compile).
    #[test]
    fn every_byte_of_every_kernel_record_is_a_payload_field() {
        let covered = [
            (SwitchOut::mapped_bytes(), SwitchOut::LEN),
            (SwitchIn::mapped_bytes(), SwitchIn::LEN),
            (Wakeup::mapped_bytes(), Wakeup::LEN),
            (Fork::mapped_bytes(), Fork::LEN),
            (TaskInfo::mapped_bytes(), TaskInfo::LEN),
            (TaskNs::mapped_bytes(), TaskNs::LEN),
            (Syscall::mapped_bytes(), Syscall::LEN),
            (PageFault::mapped_bytes(), PageFault::LEN),
            (BlockIo::mapped_bytes(), BlockIo::LEN),
            (LibCall::mapped_bytes(), LibCall::LEN),
            (Throttle::mapped_bytes(), Throttle::LEN),
            (Steal::mapped_bytes(), Steal::LEN),
            (BlockStack::mapped_bytes(), BlockStack::LEN),
        ];
        for (i, (mapped, len)) in covered.into_iter().enumerate() {
            assert_eq!(mapped, len, "kernel payload #{i}");
            assert_eq!(len % 8, 0, "kernel payload #{i}");
        }
    }

    #[test]
    fn fields_sit_where_the_c_layout_puts_them() {
        let sc = Syscall {
            exit_ts: 0x0102_0304_0506_0708,
            nr: 202,
            fd_kind: fd_kind::DIR,
            ret: -11,
            fd: 5,
            flags: SYSCALL_BLOCKED | SYSCALL_AT_SWITCH,
            arg: 7,
            family: 10,
            protocol: 6,
            sport: 1234,
            dport: 80,
            saddr: [1; 16],
            daddr: [2; 16],
            dev: 3,
            ino: 4,
        };
        let b = sc.to_bytes();
        // Offsets of docs/FORMAT.md, which readers outside this crate use.
        assert_eq!(b.len(), 96);
        assert_eq!(b[..8], sc.exit_ts.to_le_bytes());
        assert_eq!(b[8..12], 202u32.to_le_bytes());
        assert_eq!(Syscall::fd_kind_of(&b), Some(fd_kind::DIR));
        assert_eq!(b[16..24], (-11i64).to_le_bytes());
        assert_eq!(b[40..42], 10u16.to_le_bytes());
        assert_eq!(b[48..64], [1; 16]);
        assert_eq!(b[88..96], 4u64.to_le_bytes());
        assert_eq!(Syscall::from_bytes(&b), Some(sc));
        assert_eq!(Syscall::from_bytes(&b[..95]), None);
        let so = SwitchOut {
            tgid: 1,
            prev_state: 2,
            cpu: 3,
            next_tid: 4,
        };
        assert_eq!(so.to_bytes(), *b"\x01\0\0\0\x02\0\0\0\x03\0\0\0\x04\0\0\0");
    }
}
