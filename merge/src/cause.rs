//! The off-CPU cause taxonomy (README.md, docs/REPORT.md) and exact time
//! breakdowns.

use serde::ser::SerializeMap;
use std::ops::{AddAssign, Sub};

/// Why a thread was off CPU. The order is the report's column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Cause {
    /// Runnable but not running: preempted, or waiting for a CPU after wakeup.
    Runqueue,
    /// Blocked entering a contended Java monitor.
    Monitor,
    /// In Object.wait().
    Wait,
    /// In LockSupport.park.
    Park,
    /// In Thread.sleep / nanosleep.
    Sleep,
    /// Stopped for a garbage collection.
    Gc,
    /// Stopped at a non-GC safepoint.
    Safepoint,
    /// Blocked in a syscall on a socket.
    Socket,
    /// Blocked in a syscall on a file or block device.
    File,
    /// Blocked handling a page fault.
    PageFault,
    /// Futex wait not explained by a JVM-level event.
    LockNative,
    /// Blocked in another syscall.
    SyscallOther,
    /// Off CPU with no explanation.
    Unknown,
    /// Blocked in the tracer's own work: the JVM agent writing the
    /// thread's records out (last, so that the columns before it keep
    /// their places).
    Tracer,
    /// A runnable virtual thread waiting to be mounted on a carrier: the
    /// JDK's scheduler is the queue, not the kernel's (added after the
    /// others, as `tracer` was).
    Carrier,
    /// Runnable, but held off CPU because its cgroup (or an ancestor) used
    /// up its CPU quota (CFS bandwidth throttling).
    Throttled,
    /// On CPU for the guest kernel, but the hypervisor ran something else
    /// on the vCPU (paravirt steal time).
    Steal,
}

/// Number of causes.
pub const N_CAUSES: usize = 17;

impl Cause {
    /// Every cause, in column order.
    pub const ALL: [Cause; N_CAUSES] = [
        Cause::Runqueue,
        Cause::Monitor,
        Cause::Wait,
        Cause::Park,
        Cause::Sleep,
        Cause::Gc,
        Cause::Safepoint,
        Cause::Socket,
        Cause::File,
        Cause::PageFault,
        Cause::LockNative,
        Cause::SyscallOther,
        Cause::Unknown,
        Cause::Tracer,
        Cause::Carrier,
        Cause::Throttled,
        Cause::Steal,
    ];

    /// The name used in reports and JSON (docs/REPORT.md).
    pub fn name(self) -> &'static str {
        match self {
            Cause::Runqueue => "runqueue",
            Cause::Monitor => "monitor",
            Cause::Wait => "wait",
            Cause::Park => "park",
            Cause::Sleep => "sleep",
            Cause::Gc => "gc",
            Cause::Safepoint => "safepoint",
            Cause::Socket => "socket",
            Cause::File => "file",
            Cause::PageFault => "page_fault",
            Cause::LockNative => "lock_native",
            Cause::SyscallOther => "syscall_other",
            Cause::Unknown => "unknown",
            Cause::Tracer => "tracer",
            Cause::Carrier => "carrier",
            Cause::Throttled => "throttled",
            Cause::Steal => "steal",
        }
    }

    /// Parses a cause name.
    pub fn from_name(s: &str) -> Option<Cause> {
        Cause::ALL.into_iter().find(|c| c.name() == s)
    }
}

/// Off-CPU nanoseconds per cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffCpu(pub [u64; N_CAUSES]);

impl OffCpu {
    /// Nanoseconds of one cause.
    pub fn get(&self, c: Cause) -> u64 {
        self.0[c as usize]
    }
    /// Adds nanoseconds to one cause.
    pub fn add(&mut self, c: Cause, ns: u64) {
        self.0[c as usize] += ns;
    }
    /// Sum over all causes.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    /// Whether no cause has time.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&ns| ns == 0)
    }
    /// Non-zero causes, in column order.
    pub fn nonzero(&self) -> impl Iterator<Item = (Cause, u64)> + '_ {
        Cause::ALL.into_iter().map(|c| (c, self.get(c))).filter(|&(_, v)| v > 0)
    }
}

impl AddAssign for OffCpu {
    fn add_assign(&mut self, o: OffCpu) {
        for i in 0..N_CAUSES {
            self.0[i] += o.0[i];
        }
    }
}

impl Sub for OffCpu {
    type Output = OffCpu;
    fn sub(self, o: OffCpu) -> OffCpu {
        let mut r = self;
        for i in 0..N_CAUSES {
            r.0[i] -= o.0[i];
        }
        r
    }
}

/// Serialises as `{"<cause>": ns}` with only the non-zero causes (docs/REPORT.md).
impl serde::Serialize for OffCpu {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (c, v) in self.nonzero() {
            m.serialize_entry(c.name(), &v)?;
        }
        m.end()
    }
}

/// Wall time split exactly into CPU, off-CPU causes and time no kernel
/// data covers, with switch counts.
/// Invariant: `wall == cpu + off.total() + not_covered`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Breakdown {
    /// Elapsed nanoseconds.
    pub wall: u64,
    /// Nanoseconds on CPU.
    pub cpu: u64,
    /// Nanoseconds off CPU, by cause.
    pub off: OffCpu,
    /// Nanoseconds after the kernel stream's coverage ended (jtrace killed,
    /// disk full): whether the thread ran is not known, so this is neither
    /// CPU nor a cause. 0 in a trace whose kernel stream is complete.
    pub not_covered: u64,
    /// Voluntary switch-outs (the thread blocked).
    pub voluntary: u64,
    /// Involuntary switch-outs (the thread was preempted).
    pub involuntary: u64,
}

impl Breakdown {
    /// True when `wall == cpu + Σ off + not_covered`, the accounting invariant.
    pub fn is_exact(&self) -> bool {
        self.wall == self.cpu + self.off.total() + self.not_covered
    }
}

impl AddAssign for Breakdown {
    fn add_assign(&mut self, o: Breakdown) {
        self.wall += o.wall;
        self.cpu += o.cpu;
        self.off += o.off;
        self.not_covered += o.not_covered;
        self.voluntary += o.voluntary;
        self.involuntary += o.involuntary;
    }
}

impl Sub for Breakdown {
    type Output = Breakdown;
    fn sub(self, o: Breakdown) -> Breakdown {
        Breakdown {
            wall: self.wall - o.wall,
            cpu: self.cpu - o.cpu,
            off: self.off - o.off,
            not_covered: self.not_covered - o.not_covered,
            voluntary: self.voluntary - o.voluntary,
            involuntary: self.involuntary - o.involuntary,
        }
    }
}
