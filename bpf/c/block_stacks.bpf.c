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
 * Runs on every task's return to user mode after a switch (rseq's notify
 * resume), of every process: one bit test for all but the threads a long
 * block left waiting for their user stack.
 */
SEC("tp_btf/rseq_update")
int BPF_PROG(rseq_update, struct task_struct *t)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), ts;
	__u32 tid = (__u32)pid_tgid, key, us = 0;
	struct ustack_want *w;
	struct pt_regs *regs;

	/* In a register of its own: the verifier must see the bound checked
	 * on the value that indexes the bitmap. */
	asm volatile("" : "+r"(tid));
	if (!bit_test(ustack_want_bits, tid))
		return 0;
	bit_clear(ustack_want_bits, tid);
	key = tid & (USTACK_WANT_SLOTS - 1);
	w = bpf_map_lookup_elem(&ustack_wants, &key);
	if (!w || w->tid != tid)
		return 0;
	ts = bpf_ktime_get_ns();
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	/* Registers moved since the switch-in (a signal frame): no user stack. */
	if (regs && BPF_CORE_READ(regs, ip) == w->ip && BPF_CORE_READ(regs, sp) == w->sp)
		us = user_stack(2, tid, pid_tgid >> 32, ts, w->ip, w->bp, w->sp);
	want_flush(w, ts, us);
	return 0;
}
