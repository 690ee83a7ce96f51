//! Human-readable descriptions of evidence, shared by every view.

use crate::cause::Cause;
use crate::model::event::SyscallInfo;
use crate::model::syscall::{nr, syscall_name};
use crate::model::trace::Trace;
use crate::visitor::Evidence;
use jtrace_format::fd_kind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn addr(family: u16, a: &[u8; 16], port: u16) -> String {
    let ip = match family {
        2 => IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3])),
        10 => IpAddr::V6(Ipv6Addr::from(*a)),
        _ => return String::new(),
    };
    match ip {
        IpAddr::V6(v6) => format!("[{v6}]:{port}"),
        v4 => format!("{v4}:{port}"),
    }
}

/// `FUTEX_WAIT_BITSET_PRIVATE`: the command and flags of a futex op.
fn futex_op(op: u32) -> String {
    const NAMES: [&str; 14] = [
        "WAIT",
        "WAKE",
        "FD",
        "REQUEUE",
        "CMP_REQUEUE",
        "WAKE_OP",
        "LOCK_PI",
        "UNLOCK_PI",
        "TRYLOCK_PI",
        "WAIT_BITSET",
        "WAKE_BITSET",
        "WAIT_REQUEUE_PI",
        "CMP_REQUEUE_PI",
        "LOCK_PI2",
    ];
    let mut s = match NAMES.get((op & 127) as usize) {
        Some(n) => format!("FUTEX_{n}"),
        None => format!("FUTEX_op{}", op & 127),
    };
    if op & 128 != 0 {
        s.push_str("_PRIVATE");
    }
    if op & 256 != 0 {
        s.push_str("|FUTEX_CLOCK_REALTIME");
    }
    s
}

/// `read(fd 5: socket tcp 127.0.0.1:40000->127.0.0.1:5000) = 4`,
/// `fsync(fd 3: file /data/x.log) = 0` (the path if the trace has it, else
/// the device and inode; no result for a record written at a switch-out:
/// the syscall had not returned).
pub fn describe_syscall(trace: &Trace, sc: &SyscallInfo) -> String {
    let r = &sc.rec;
    let mut s = syscall_name(r.nr);
    if r.fd >= 0 {
        s.push_str(&format!("(fd {}: {}", r.fd, fd_kind::name(r.fd_kind)));
        if r.fd_kind == fd_kind::SOCKET {
            match r.family {
                1 => s.push_str(" unix"),
                2 | 10 => {
                    let proto = match r.protocol {
                        6 => " tcp",
                        17 => " udp",
                        _ => "",
                    };
                    s.push_str(&format!(
                        "{proto} {}->{}",
                        addr(r.family, &r.saddr, r.sport),
                        addr(r.family, &r.daddr, r.dport)
                    ));
                }
                _ => {}
            }
        } else if let Some(path) = trace.file_paths.get(&(r.dev, r.ino)) {
            s.push_str(&format!(" {path}"));
        } else if r.ino != 0 {
            s.push_str(&format!(" dev {}:{} ino {}", r.dev >> 20, r.dev & 0xfffff, r.ino));
        }
        s.push(')');
    } else if r.nr == nr::FUTEX {
        // arg packs the address in its low 48 bits and the op above them.
        s.push_str(&format!(
            "(uaddr {:#x}, {})",
            r.arg & 0xffff_ffff_ffff,
            futex_op((r.arg >> 48) as u32)
        ));
    } else {
        s.push_str("()");
    }
    if r.flags & jtrace_format::SYSCALL_AT_SWITCH == 0 {
        s.push_str(&format!(" = {}", r.ret));
    }
    s
}

/// "on monitor of java.lang.Object", "in read(fd 5: socket …)", "stopped for GC".
pub fn describe_evidence(trace: &Trace, e: &Evidence) -> String {
    let detail = |d: u32| trace.details.get(d as usize).cloned().unwrap_or_default();
    match *e {
        Evidence::None => "no evidence".into(),
        Evidence::Preempted => "preempted".into(),
        Evidence::Jvm { cause, detail: d } => {
            let class = detail(d);
            match cause {
                Cause::Monitor => format!("entering contended monitor of {class}"),
                Cause::Wait => format!("in Object.wait on {class}"),
                Cause::Park if class.is_empty() => "parked".into(),
                Cause::Park => format!("parked on {class}"),
                Cause::Sleep => "in Thread.sleep".into(),
                Cause::Tracer => "writing its trace records (jtrace agent)".into(),
                c => c.name().into(),
            }
        }
        Evidence::Window(Cause::Gc) => "stopped for GC".into(),
        Evidence::Window(_) => "stopped at a safepoint".into(),
        Evidence::Syscall(i) => match trace.syscalls.get(i as usize) {
            Some(sc) => format!("in {}", describe_syscall(trace, sc)),
            None => "in a syscall".into(),
        },
        Evidence::PageFault => "handling a page fault".into(),
        Evidence::Throttled => "throttled: its cgroup used up its CPU quota".into(),
        Evidence::Steal => "its vCPU ran another guest (steal)".into(),
    }
}

/// One line saying which window of time a ring recording covers and what
/// fell out of it (`report` and `info` print it).
pub fn describe_window(w: &crate::WindowJson) -> String {
    let ms = |ns: u64| format!("{}.{:03}", ns / 1_000_000, ns / 1000 % 1000);
    let mut bounds = Vec::new();
    if let Some(b) = w.max_size_bytes {
        bounds.push(format!("--max-size {} MiB", b >> 20));
    }
    if let Some(a) = w.max_age_ns {
        bounds.push(format!("--max-age {} s", ms(a / 1000)));
    }
    let ring = if bounds.is_empty() {
        "the trace".to_string()
    } else {
        format!("ring recording ({})", bounds.join(", "))
    };
    if w.from_ns == 0 {
        return format!(
            "NOTE: {ring}: covers the whole recording, +0 .. +{} ms; nothing fell out",
            ms(w.to_ns)
        );
    }
    format!(
        "NOTE: {ring}: covers +{} .. +{} ms only; the first {} ms fell out ({} chunk(s), {} MiB deleted) and are \
         not covered: no CPU time or cause is given for them, and a thread's time is covered from its first \
         switch in the window",
        ms(w.from_ns),
        ms(w.to_ns),
        ms(w.from_ns),
        w.dropped_chunks,
        w.dropped_bytes >> 20
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn futex_address_and_op_are_unpacked() {
        let rec = jtrace_format::Syscall {
            exit_ts: 0,
            nr: nr::FUTEX,
            fd_kind: 0,
            ret: 0,
            fd: -1,
            flags: jtrace_format::SYSCALL_AT_SWITCH,
            arg: 0x7ff9_6004_39f8 | (9 | 128) << 48,
            ..Default::default()
        };
        let sc = SyscallInfo { tid: 1, enter: 0, rec };
        assert_eq!(
            describe_syscall(&Trace::default(), &sc),
            "futex(uaddr 0x7ff9600439f8, FUTEX_WAIT_BITSET_PRIVATE)"
        );
    }
}
