// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * Stacks, besides the capture at switch-outs (stacks.bpf.h, called from
 * sched.bpf.c): what the JVMTI agent announces of its JVM through two
 * functions of its own that user space probes (the interpreter's range,
 * where each Java thread keeps its last Java frame), and the CPU samples
 * of traced threads (a perf clock per CPU), each with its stacks and the
 * steal of the stretch the sample ends (a STEAL record).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "jtrace.bpf.h"
#include "stacks.bpf.h"
#include "sched.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

__u32 next_stack_id SEC(".data") = 1;
/* Ids below this count as not written (user space raises it when it
 * begins a new chunk of a ring recording, which must define its stacks). */
__u32 stack_id_floor SEC(".data") = 0;
/* Raised by user space with the floor, at each new chunk (the floor alone
 * may not move: no new stack id since the last chunk). */
__u32 kstack_epoch SEC(".data") = 0;
__u32 kstack_written[KSTACK_IDS] SEC(".bss");

/* The current process, in a register of its own: the verifier must see
 * the bound checked on the value that indexes the filter. */
static __always_inline __u32 current_tgid(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	asm volatile("" : "+r"(tgid));
	return tgid;
}

/* jtrace_hotspot_layout(const struct hotspot_layout *l) of the agent. */
static __always_inline int on_hotspot_layout(const struct hotspot_layout *l)
{
	__u32 tgid = current_tgid();
	struct hotspot_layout v;

	if (!tgid_traced(tgid) || bpf_probe_read_user(&v, sizeof(v), l))
		return 0;
	bpf_map_update_elem(&jvms, &tgid, &v, BPF_ANY);
	return 0;
}

/* jtrace_java_thread(u64 tid, u64 java_thread) of the agent: 0 forgets. */
static __always_inline int on_java_thread(__u64 tid, __u64 java_thread)
{
	__u32 t = tid;

	if (!tgid_traced(current_tgid()))
		return 0;
	if (java_thread)
		bpf_map_update_elem(&java_threads, &t, &java_thread, BPF_ANY);
	else
		bpf_map_delete_elem(&java_threads, &t);
	return 0;
}

SEC("uprobe")
int BPF_UPROBE(hotspot_layout, const struct hotspot_layout *l)
{
	return on_hotspot_layout(l);
}

SEC("uprobe")
int BPF_UPROBE(java_thread, __u64 tid, __u64 java_thread)
{
	return on_java_thread(tid, java_thread);
}

/*
 * Both hooks in one multi link (Linux 6.6), the cookie telling which: a
 * uprobe's perf event detaches under a global lock, one RCU grace period
 * after another, while multi links detach together (BENCHMARKS.md,
 * "Start-up and exit").
 */
SEC("uprobe.multi")
int BPF_UPROBE(agent_hooks_multi, __u64 a, __u64 b)
{
	if (bpf_get_attach_cookie(ctx) == AGENT_HOOK_HOTSPOT_LAYOUT)
		return on_hotspot_layout((const struct hotspot_layout *)a);
	return on_java_thread(a, b);
}

/*
 * The steal since the thread's switch-in (or its last sample) on this CPU
 * as a STEAL record ending at the sample, so that a long stretch's steal
 * is placed within a sample period of when it happened rather than at its
 * switch-out. The steal clock read is the one of the run queue's last
 * update (the last tick at most: what sched_switch reads is fresher). A
 * record that cannot be written leaves the mark where it was: the next
 * one covers its time.
 */
static __always_inline void sample_steal(__u32 tid, __u32 cpu, __u64 ts)
{
	__u32 zero = 0;
	struct switch_batch *batch = bpf_map_lookup_elem(&switch_batches, &zero);
	struct steal_rec *r;
	__u64 steal;

	if (!batch || batch->in_tid != tid)
		return;
	steal = steal_clock(batch, bpf_get_current_task_btf());
	if ((__s64)(steal - batch->in_steal) > 0) {
		r = rec_reserve(K_STEAL, sizeof(*r), tid, ts);
		if (!r)
			return;
		fill_steal(r, batch, tid, cpu, ts, steal);
		rec_submit(r, K_STEAL);
	}
	batch->in_steal = steal;
	batch->steal_ts = ts;
}

/*
 * A CPU sample: the thread on this CPU, if traced, with its kernel stack
 * (when the clock interrupted kernel code) and user stack (from the
 * interrupted user registers, or those saved on entering the kernel).
 */
SEC("perf_event")
int cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u32 tid = bpf_get_current_pid_tgid(), tgid = current_tgid();
	struct task_struct *t;
	struct pt_regs *regs;
	struct cpu_sample_rec *r;
	__u64 ts, ip, bp, sp;
	__u32 ks = 0, us;

	if (!tgid || !tgid_traced(tgid))
		return 0;
	ts = bpf_ktime_get_ns();
	/* Interrupted in user mode: a user address (x86-64: the lower half). */
	if (ctx->regs.ip < (1ULL << 47)) {
		ip = ctx->regs.ip;
		bp = ctx->regs.bp;
		sp = ctx->regs.sp;
	} else {
		ks = kernel_stack(ctx, 1, tid, ts);
		t = bpf_get_current_task_btf();
		regs = (struct pt_regs *)bpf_task_pt_regs(t);
		if (!regs)
			return 0;
		ip = BPF_CORE_READ(regs, ip);
		bp = BPF_CORE_READ(regs, bp);
		sp = BPF_CORE_READ(regs, sp);
	}
	us = user_stack(1, tid, tgid, ts, ip, bp, sp);
	r = rec_reserve(K_CPU_SAMPLE, sizeof(*r), tid, ts);
	if (!r)
		return 0;
	r->tgid = tgid;
	r->cpu = bpf_get_smp_processor_id();
	r->kstack = ks;
	r->ustack = us;
	rec_submit(r, K_CPU_SAMPLE);
	sample_steal(tid, bpf_get_smp_processor_id(), ts);
	return 0;
}
