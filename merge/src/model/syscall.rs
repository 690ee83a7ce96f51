//! Syscalls as the attribution sees them: the x86-64 numbers it tells
//! apart, their names, and the cause a block inside each gets.

use crate::cause::Cause;
use crate::model::event::SyscallInfo;

/// x86-64 syscall numbers: the one table the BPF code also classifies by
/// (format/c/syscall_nr.h).
pub use jtrace_format::syscall_nr as nr;

/// Name of an x86-64 syscall number (`syscall_N` for a number the kernel
/// did not have when the `syscalls` crate was built).
pub fn syscall_name(n: u32) -> String {
    match syscalls::x86_64::Sysno::new(n as usize) {
        Some(s) => s.name().to_string(),
        None => format!("syscall_{n}"),
    }
}

/// The cause a block inside syscall `sc` gets from the kernel's evidence.
/// (JVM-level evidence, when present, wins over this.)
pub fn syscall_cause(sc: &SyscallInfo) -> Cause {
    use jtrace_format::fd_kind;
    match sc.rec.nr {
        nr::FUTEX => return Cause::LockNative,
        nr::NANOSLEEP | nr::CLOCK_NANOSLEEP => return Cause::Sleep,
        nr::ACCEPT
        | nr::ACCEPT4
        | nr::CONNECT
        | nr::SENDTO
        | nr::RECVFROM
        | nr::SENDMSG
        | nr::RECVMSG
        | nr::RECVMMSG
        | nr::SENDMMSG => return Cause::Socket,
        nr::FSYNC | nr::FDATASYNC | nr::SYNC_FILE_RANGE | nr::OPEN | nr::OPENAT => return Cause::File,
        _ => {}
    }
    match sc.rec.fd_kind {
        fd_kind::SOCKET => Cause::Socket,
        fd_kind::FILE | fd_kind::BLOCK | fd_kind::DIR => Cause::File,
        _ => Cause::SyscallOther,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers jtrace's BPF programs classify (format/c/syscall_nr.h), and ones
    /// they do not, by their kernel names.
    #[test]
    fn syscall_names() {
        let names: Vec<String> = [
            nr::READ,
            nr::PREAD64,
            nr::FUTEX,
            nr::CLOCK_NANOSLEEP,
            nr::EPOLL_PWAIT2,
            3,
            10,
            61,
        ]
        .into_iter()
        .map(syscall_name)
        .collect();
        assert_eq!(
            names,
            [
                "read",
                "pread64",
                "futex",
                "clock_nanosleep",
                "epoll_pwait2",
                "close",
                "mprotect",
                "wait4"
            ]
        );
        assert_eq!(syscall_name(100_000), "syscall_100000");
    }
}
