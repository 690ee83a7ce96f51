// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * User page faults of the traced threads. A fault is only remembered here,
 * in the thread's task storage (and a bit in pf_bits); sched.bpf.c writes it as a PAGE_FAULT
 * record (with the fault's own timestamp) if the thread then switches out
 * voluntarily outside a syscall, i.e. blocks handling it. Faults that do
 * not block (nearly all) cost one task-storage update and no record.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "jtrace.h"

SEC("tp_btf/page_fault_user")
int BPF_PROG(page_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct task_state *st;

	if (!tgid_traced(pid_tgid >> 32))
		return 0;
	st = bpf_task_storage_get(&task_states, bpf_get_current_task_btf(), 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st)
		return 0;
	st->pf_ts = bpf_ktime_get_ns();
	st->pf_addr = address;
	st->pf_ip = BPF_CORE_READ(regs, ip);
	st->pf_err = error_code;
	st->pf_pending = 1;
	/* Tells sched_switch to look at the task storage (tids < pid_max). */
	__u32 tid = (__u32)pid_tgid;
	if (tid < TRACED_TGID_LIMIT && !(pf_bits[tid / 64] & (1ULL << (tid % 64))))
		__sync_fetch_and_or(&pf_bits[tid / 64], 1ULL << (tid % 64));
	return 0;
}
