//! The x86-64 syscall numbers jtrace tells apart, named as the kernel names
//! them (`READ` is `read`): generated from c/syscall_nr.h, which the BPF
//! programs classify syscalls by, so [`Syscall::nr`](crate::Syscall::nr)
//! compares with these. [`ALL`] lists them with their names.

// One constant per syscall, named after it: nothing to add in a doc line.
#![allow(missing_docs)]

include!(concat!(env!("OUT_DIR"), "/syscall_nr.rs"));

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers are x86-64's, as the `syscalls` crate has them from
    /// the kernel's syscall table.
    #[test]
    fn numbers_are_the_kernels() {
        assert!(ALL.len() >= 38, "{ALL:?}");
        for &(name, nr) in ALL {
            let sysno = syscalls::x86_64::Sysno::new(nr as usize).unwrap_or_else(|| panic!("{name}: {nr}"));
            assert_eq!(sysno.name(), name);
        }
        assert_eq!((FUTEX, CLOCK_NANOSLEEP, EPOLL_PWAIT2), (202, 230, 441));
    }
}
