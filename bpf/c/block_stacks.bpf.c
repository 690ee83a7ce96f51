// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * Deferred stacks, the user half (block_stacks.bpf.h): a thread whose
 * long block ended walks its user stack on its own return to user mode,
 * where its address space is loaded and its registers are still those of
 * its switch-out.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "jtrace.bpf.h"
#include "stacks.bpf.h"
#include "block_stacks.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

__u64 ustack_want_bits[TRACED_TGID_LIMIT / 64] SEC(".bss");

/*
 * The current thread `tid` takes the user stack its blocks wait for, if
 * its registers are still those of their switch-ins (a signal frame moves
 * them: then no user stack).
 */
static __always_inline void want_walk(__u32 tid, __u32 tgid)
{
	__u32 key = tid & (USTACK_WANT_SLOTS - 1), us = 0;
	struct ustack_want *w;
	struct pt_regs *regs;
	__u64 ts;

	bit_clear(ustack_want_bits, tid);
	w = bpf_map_lookup_elem(&ustack_wants, &key);
	if (!w || w->tid != tid)
		return;
	ts = bpf_ktime_get_ns();
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (regs && BPF_CORE_READ(regs, ip) == w->ip && BPF_CORE_READ(regs, sp) == w->sp)
		us = user_stack(2, tid, tgid, ts, w->ip, w->bp, w->sp);
	want_flush(w, ts, us);
}

/* The current thread's user stack, if blocks wait for it: one bit test for
 * every thread that has none waiting. */
static __always_inline void walk_if_wanted(void)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;

	/* In a register of its own: the verifier must see the bound checked
	 * on the value that indexes the bitmap. */
	asm volatile("" : "+r"(tid));
	if (bit_test(ustack_want_bits, tid))
		want_walk(tid, pid_tgid >> 32);
}

/*
 * Runs on every task's return to user mode after a switch (rseq's notify
 * resume), of every process.
 */
SEC("tp_btf/rseq_update")
int BPF_PROG(rseq_update, struct task_struct *t)
{
	walk_if_wanted();
	return 0;
}

/*
 * A thread woken to exit (a JVM's threads at its end) never returns to
 * user mode: its blocks take their user stack here, in its own context,
 * where kernels since 6.16 still have its address space (before, the walk
 * finds none and the blocks keep their kernel stacks).
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(block_stacks_exit, struct task_struct *p)
{
	walk_if_wanted();
	return 0;
}
