/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * What sched.bpf.c shares with the CPU samples of stacks.bpf.c: the
 * per-CPU switch batch (which also says which traced thread is on the
 * CPU since when, and the steal clock then), and the steal clock.
 */
#ifndef JTRACE_SCHED_BPF_H
#define JTRACE_SCHED_BPF_H

#include "jtrace.bpf.h"

/*
 * The records of one sched_switch run, built in a per-CPU buffer and
 * written with one ring-buffer operation (one reserve/commit, one
 * availability query) instead of one per record:
 *   [WAKEUP (40)] [SYSCALL (112) | PAGE_FAULT (40)] [STEAL (40)] [SWITCH_OUT (32|40)]
 *   [THROTTLE (32)] [SWITCH_IN (32)]
 * The consumer splits a sample into its records by their `len`; the stream
 * is byte for byte what separate samples would give. A batch is written or
 * lost whole, and counted per record either way.
 *
 * The WAKEUP is one that sched_waking left here: a wakeup of a task that
 * last ran on this CPU (nearly always where it runs next) waits for the
 * next switch of this CPU, traced or not, which comes soon: the woken task
 * is queued here. That saves the wakeup its own ring-buffer operation. The
 * stream stays in time order per thread except for the rare wakee that
 * another CPU steals (the merge sorts each thread's events by time).
 * Programs on one CPU never interleave here: sched_switch and the wakeup
 * tracepoints run with interrupts off. Recording stops with a flush of
 * these from user space (`flush_pending_wakeups` in bpf/src/pump.rs).
 */
#define BATCH_BYTES 256

struct switch_batch {
	__u32 wake_pending;	/* `wake` holds a record not yet written */
	__u32 pad;
	struct wakeup_rec wake;	/* immediately before b: one contiguous sample */
	__u8 b[BATCH_BYTES];
	/* The traced task whose switch-in on this CPU was the last one
	 * reported; 0 after a traced task's switch-out. */
	__u32 in_tid;
	/* Batches written since the last ring-buffer availability query. */
	__u32 unqueried;
	/* Time of the last traced switch on this CPU (in_tid's switch-in). */
	__u64 last_ts;
	/* The steal clock at in_tid's switch-in or its last CPU sample since,
	 * and when: where its next STEAL record's stretch begins. */
	__u64 in_steal;
	__u64 steal_ts;
	/* This CPU's run queue (0: not learnt yet), for its steal clock. */
	__u64 rq;
};

_Static_assert(__builtin_offsetof(struct switch_batch, b) ==
	       __builtin_offsetof(struct switch_batch, wake) + sizeof(struct wakeup_rec), "batch layout");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct switch_batch);
} switch_batches __weak SEC(".maps");

/*
 * The paravirt steal clock of this CPU (`batch`'s), task `t` being on it:
 * its run queue's prev_steal_time_rq, which update_rq_clock() sets to the
 * clock's value (so __schedule() refreshes it right before sched_switch,
 * and the tick at least once a tick while a task runs). The run queue is
 * learnt once per CPU through a task's cfs_rq, then read with a probe
 * load through the pointer kept (two dependent loads fewer a switch): the
 * per-CPU `runqueues` has no kallsyms address without CONFIG_KALLSYMS_ALL.
 * Hypervisor-neutral (KVM, Xen, Hyper-V: whatever steal clock the guest
 * kernel reads). 0 where the kernel keeps none (no
 * CONFIG_PARAVIRT_TIME_ACCOUNTING, no group scheduling): no STEAL then.
 */
static __always_inline __u64 steal_clock(struct switch_batch *batch, struct task_struct *t)
{
	struct rq *rq;

	if (!bpf_core_field_exists(struct rq, prev_steal_time_rq) || !bpf_core_field_exists(t->se.cfs_rq))
		return 0;
	if (!batch->rq)
		batch->rq = (__u64)t->se.cfs_rq->rq;
	rq = bpf_rdonly_cast((void *)batch->rq, bpf_core_type_id_kernel(struct rq));
	return rq->prev_steal_time_rq;
}

/*
 * Fills a STEAL record at `buf` for thread `tid`'s stretch on this CPU,
 * from the batch's mark to `ts`, if the steal clock (`steal` now) moved;
 * returns its size (0: none).
 */
static __always_inline __u32 fill_steal(void *buf, struct switch_batch *batch, __u32 tid, __u32 cpu, __u64 ts,
					__u64 steal)
{
	struct steal_rec *r = buf;
	__u64 ns = steal - batch->in_steal;

	if ((__s64)ns <= 0)
		return 0;
	rec_hdr_fill(r, K_STEAL, sizeof(*r), tid, ts);
	r->from = batch->steal_ts;
	r->ns = ns;
	r->cpu = cpu;
	r->reserved = 0;
	return sizeof(*r);
}

#endif /* JTRACE_SCHED_BPF_H */
