//! Syscalls as the attribution sees them: the x86-64 numbers it tells
//! apart, their names, and the cause a block inside each gets.

use crate::cause::Cause;
use crate::event::SyscallInfo;

/// x86-64 syscall numbers the attribution distinguishes.
pub mod nr {
    #![allow(missing_docs)]
    pub const READ: u32 = 0;
    pub const WRITE: u32 = 1;
    pub const OPEN: u32 = 2;
    pub const POLL: u32 = 7;
    pub const PREAD64: u32 = 17;
    pub const PWRITE64: u32 = 18;
    pub const READV: u32 = 19;
    pub const WRITEV: u32 = 20;
    pub const SELECT: u32 = 23;
    pub const NANOSLEEP: u32 = 35;
    pub const CONNECT: u32 = 42;
    pub const ACCEPT: u32 = 43;
    pub const SENDTO: u32 = 44;
    pub const RECVFROM: u32 = 45;
    pub const SENDMSG: u32 = 46;
    pub const RECVMSG: u32 = 47;
    pub const FSYNC: u32 = 74;
    pub const FDATASYNC: u32 = 75;
    pub const FUTEX: u32 = 202;
    pub const CLOCK_NANOSLEEP: u32 = 230;
    pub const EPOLL_WAIT: u32 = 232;
    pub const OPENAT: u32 = 257;
    pub const PSELECT6: u32 = 270;
    pub const PPOLL: u32 = 271;
    pub const SYNC_FILE_RANGE: u32 = 277;
    pub const EPOLL_PWAIT: u32 = 281;
    pub const ACCEPT4: u32 = 288;
    pub const PREADV: u32 = 295;
    pub const PWRITEV: u32 = 296;
    pub const RECVMMSG: u32 = 299;
    pub const SENDMMSG: u32 = 307;
    pub const EPOLL_PWAIT2: u32 = 441;
}

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

    /// The numbers jtrace's BPF programs classify (bpf/c/syscall_ctx.h), and ones
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
