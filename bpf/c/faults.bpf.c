// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * User page faults of the traced threads. A fault is only remembered here,
 * in the thread's task storage (and a bit in pf_bits); sched.bpf.c writes
 * it as a PAGE_FAULT record (with the fault's own timestamp) if the thread
 * then switches out voluntarily outside a syscall, i.e. blocks handling
 * it. Faults that do not block (nearly all) cost one task-storage update
 * and no record.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "jtrace.bpf.h"
#include "arch.bpf.h"

SEC("tp_btf/page_fault_user")
int BPF_PROG(page_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct task_state *st;
	__u32 tid;

	if (!tgid_traced(pid_tgid >> 32))
		return 0;
	st = bpf_task_storage_get(&task_states, bpf_get_current_task_btf(), 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st)
		return 0;
	st->pf_ts = bpf_ktime_get_ns();
	st->pf_addr = address;
	st->pf_ip = fault_ip(regs);
	st->pf_err = error_code;
	st->pf_pending = 1;
	/*
	 * Tells sched_switch to look at the task storage. The barrier keeps
	 * the tid a 32-bit value: otherwise clang tests the bound on pid_tgid
	 * with a mask, which the verifier does not follow to the index.
	 */
	tid = pid_tgid;
	barrier_var(tid);
	if (!bit_test(pf_bits, tid))
		bit_set(pf_bits, tid);
	return 0;
}
