/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The user registers the programs read, for the one architecture jtrace
 * supports today: x86-64 (README.md). Another architecture needs its
 * branch here, its syscall numbers (format/c/syscall_nr.h) and its library
 * directories (LIB_DIRS in bpf/src/libcalls.rs).
 */
#ifndef JTRACE_ARCH_BPF_H
#define JTRACE_ARCH_BPF_H

#if defined(__TARGET_ARCH_x86)

#define ENOSYS 38

/* The first three arguments of the syscall whose entry saved `regs`.
 * Direct loads: callers pass a BTF pointer, no helper call needed. */
static __always_inline void syscall_args(const struct pt_regs *regs, __u64 args[3])
{
	args[0] = regs->di;
	args[1] = regs->si;
	args[2] = regs->dx;
}

/*
 * Whether the task whose saved user registers these are is inside a
 * syscall, and which (*nr): entry_SYSCALL_64 stores the syscall number in
 * orig_ax and -ENOSYS in ax, which becomes the return value only at exit;
 * exceptions store an error code in orig_ax but the user's rax in ax, and
 * interrupts a negative vector in orig_ax.
 */
static __always_inline bool in_syscall(const struct pt_regs *regs, __u32 *nr)
{
	long orig_ax = regs->orig_ax;

	if (orig_ax < 0 || (long)regs->ax != -ENOSYS)
		return false;
	*nr = orig_ax;
	return true;
}

/* The user instruction pointer in the registers of a page fault. */
static __always_inline __u64 fault_ip(struct pt_regs *regs)
{
	return BPF_CORE_READ(regs, ip);
}

#else
#error "jtrace's BPF programs read x86-64 registers only (arch.bpf.h)"
#endif

#endif /* JTRACE_ARCH_BPF_H */
