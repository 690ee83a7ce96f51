// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * Scheduler events of the traced processes: switches and wakeups, and what
 * a thread that switches out voluntarily blocks on: the syscall it is in
 * (read from the registers it saved at syscall entry) or the page fault it
 * is handling; what held a runnable thread: its cgroup's CPU quota
 * (THROTTLE), the hypervisor (STEAL). BTF-enabled tracepoints (tp_btf)
 * read task_struct directly with CO-RE and need no tracefs. Task
 * lifecycle events: tasks.bpf.c.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "jtrace.bpf.h"
#include "arch.bpf.h"
#include "syscall_ctx.bpf.h"
#include "stacks.bpf.h"
#include "block_stacks.bpf.h"
#include "sched.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* The filter (jtrace.bpf.h): defined once, here. */
__u64 traced_bits[TRACED_TGID_LIMIT / 64] SEC(".bss");

/*
 * Threads (by tid) whose COMM record was written: a bit test on both
 * halves of a switch instead of a task-storage get (≈40 ns each here),
 * so that a switch needs no task storage at all in the default mode. A
 * thread's bit is cleared at its last switch-out (TASK_DEAD), so a
 * recycled tid is named again. Sized like the filter: tids are below
 * pid_max too.
 */
__u64 named_bits[TRACED_TGID_LIMIT / 64] SEC(".bss");

/* Threads that may have a page fault pending (jtrace.bpf.h), by tid. */
__u64 pf_bits[TRACED_TGID_LIMIT / 64] SEC(".bss");

/* Threads switched out throttled whose throttle is being timed (their
 * task storage holds where from), by tid: the switch-in side tests a bit,
 * and no other thread's switch-in looks at task storage. */
__u64 throttle_bits[TRACED_TGID_LIMIT / 64] SEC(".bss");

/*
 * A COMM record before the first switch of a thread, so every thread in
 * kernel.bin has a name even if it existed before recording started: the
 * thread's bit in named_bits says it has one (tids beyond the bitmap are
 * never named). Returns whether the thread was named before.
 */
static __always_inline bool note_tid(struct task_struct *t, __u32 tid, __u32 tgid, __u64 ts)
{
	if (bit_test(named_bits, tid) || !bit_set(named_bits, tid))
		return true;
	emit_task(K_COMM, tid, tgid, t->comm, ts);
	return false;
}

/*
 * A switch-in the tracepoint never reported must be noticed: some kernels
 * and sandboxes run no tracepoint programs while certain (hidden) tasks
 * are current, so a switch from such a task to a traced one is invisible,
 * while the later switch-out is seen. A task leaves a CPU only by a switch
 * on that CPU, after the switch that brought it there, so the per-CPU
 * batch (switch_batch.in_tid) says whether that switch-in was reported.
 *
 * The thread is being switched out but its switch-in was never reported.
 * Its CPU time since the scheduler picked it (se.sum_exec_runtime, already
 * updated at this point, minus se.prev_sum_exec_runtime, set when picked)
 * says when it must have been switched in, though not before `floor` (the
 * last switch this CPU reported, which came before): emit that SWITCH_IN,
 * with prev_tid unknown. Returns its time.
 */
static __always_inline __u64 infer_switch_in(struct task_struct *t, __u32 tid, __u32 tgid,
					     __u32 cpu, __u64 floor, __u64 ts)
{
	__u64 ran = t->se.sum_exec_runtime - t->se.prev_sum_exec_runtime;
	__u64 in_ts = ts - floor > ran ? ts - ran : floor;
	struct switch_in_rec *r;

	count(&emitted, K_INFERRED_SWITCH_IN);
	r = rec_reserve(K_SWITCH_IN, sizeof(*r), tid, in_ts);
	if (!r)
		return in_ts;
	r->tgid = tgid;
	r->cpu = cpu;
	r->prev_tid = PREV_TID_UNKNOWN;
	r->reserved = 0;
	rec_submit(r, K_SWITCH_IN);
	return in_ts;
}

/* include/linux/sched.h: the state of a task's final switch-out (since 4.14). */
#define TASK_DEAD 0x80

/* Forgets that a fault of thread `tid` may be pending; no atomic operation
 * when none may be. */
static __always_inline void pf_hint_clear(__u32 tid)
{
	if (bit_test(pf_bits, tid))
		bit_clear(pf_bits, tid);
}

/*
 * Offset of a task's saved user registers (task_pt_regs) from its stack
 * page: THREAD_SIZE minus the padding and sizeof(struct pt_regs), one
 * constant of the running kernel, learnt from bpf_task_pt_regs on first
 * use (0: not yet). Then the registers are reached with a direct load and
 * no helper call (≈15 ns less per blocking switch-out here: calls and
 * returns are dear under the retpoline and safe-RET mitigations).
 */
__u64 pt_regs_off SEC(".bss");

static __always_inline struct pt_regs *saved_regs(struct task_struct *t)
{
	__u64 stack = (__u64)t->stack, off = pt_regs_off;
	struct pt_regs *regs;

	if (off && stack)
		return bpf_rdonly_cast((void *)(stack + off), bpf_core_type_id_kernel(struct pt_regs));
	regs = (struct pt_regs *)bpf_task_pt_regs(t);
	if (!regs)
		return NULL;
	if (stack)
		pt_regs_off = (__u64)regs - stack;
	/* The same pointer type on both paths: the verifier walks what uses
	 * the registers once, not once per type. */
	return bpf_rdonly_cast(regs, bpf_core_type_id_kernel(struct pt_regs));
}


/*
 * The thread `prev` (tid `tid`) switches out voluntarily. Its saved user
 * registers say whether it is inside a syscall, and which (in_syscall(),
 * arch.bpf.h). So the syscall it blocks in is
 * known with no syscall hook: a SYSCALL_AT_SWITCH record for this block
 * (mode blocked and above). Outside a syscall, a user page fault since the
 * thread came on CPU is what it blocks on: that fault, with its own
 * timestamp. Faults that do not block (nearly all) are never written,
 * which bounds their cost to a task-storage update. The thread's task
 * storage is looked at only when a fault may be pending (pf_bits) or the
 * syscall programs track its syscall (modes io and all).
 *
 * The record (if any) goes at the start of the batch `buf`, before the
 * SWITCH_OUT, so that the record that explains a block precedes it in the
 * stream. A fault counts only if it came after the thread's switch-in at
 * `in_ts` (one before a preemption did not block). Returns its kind (0:
 * none); *wake says it needs the consumer now.
 */
static __always_inline __u16 note_voluntary_switch_out(struct task_struct *prev, __u32 tid, __u64 ts,
						       __u64 in_ts, void *buf, bool *wake)
{
	struct task_state *st = NULL;
	struct pt_regs *regs = saved_regs(prev);
	struct page_fault_rec *r = buf;
	struct syscall_rec *sr = buf;
	struct fd_info fi;
	__u64 args[3], arg;
	__s64 fd;
	__u32 nr;
	int cls;

	if (!regs)
		return 0;
	if (in_syscall(regs, &nr)) {
		/* A fault before the syscall is not what it blocks on. */
		pf_hint_clear(tid);
		/* sys_enter (modes io, all) keeps the syscall in flight there. */
		if (syscall_mode >= SCM_IO)
			st = bpf_task_storage_get(&task_states, prev, 0, 0);
		if (st && (st->sc_flags & SC_IN_FLIGHT))
			st->sc_flags |= SC_BLOCKED;
		/* The last switch-out of an exiting thread explains nothing. */
		if (syscall_mode == SCM_NONE || nr == NR_exit || nr == NR_exit_group)
			return 0;
		syscall_args(regs, args);
		cls = classify(nr);
		syscall_detail(prev, nr, cls, args, -1, &fi, &fd, &arg);
		/* close() removed the fd before blocking; sys_enter saw it (io, all). */
		if (cls == C_CLOSE && fi.fd_kind == FDK_NONE && st && (st->sc_flags & SC_IN_FLIGHT) &&
		    st->sc_nr == nr)
			fi = st->sc_fd;
		rec_hdr_fill(sr, K_SYSCALL, sizeof(*sr), tid, ts);
		*wake = fill_syscall(sr, 0, nr, 0, fd, SYSCALL_BLOCKED | SYSCALL_AT_SWITCH, arg, &fi);
		return K_SYSCALL;
	}
	if (!bit_test(pf_bits, tid))
		return 0;
	pf_hint_clear(tid);
	st = bpf_task_storage_get(&task_states, prev, 0, 0);
	if (!st || !st->pf_pending)
		return 0;
	st->pf_pending = 0;
	/* Before the switch-in: it did not block (a preemption came after). */
	if (st->pf_ts < in_ts)
		return 0;
	rec_hdr_fill(r, K_PAGE_FAULT, sizeof(*r), tid, st->pf_ts);
	r->address = st->pf_addr;
	r->ip = st->pf_ip;
	r->error_code = st->pf_err;
	return K_PAGE_FAULT;
}

/*
 * Flags of a batch write: the availability query (≈18 ns) only on one batch
 * in `query_every` (set by user space so that what is written between two
 * queries, at most BATCH_BYTES + a WAKEUP each, stays far below the slack
 * beyond wake_bytes on all CPUs), or when the consumer is wanted now.
 */
const volatile __u32 query_every = 1;

static __always_inline __u64 batch_wake_flags(struct switch_batch *batch, bool wake)
{
	if (wake)
		return BPF_RB_FORCE_WAKEUP;
	if (++batch->unqueried < query_every)
		return BPF_RB_NO_WAKEUP;
	batch->unqueried = 0;
	return wake_flags(false);
}

/* Writes the WAKEUP waiting in `batch` on its own. */
static __always_inline void flush_wakeup(struct switch_batch *batch)
{
	batch->wake_pending = 0;
	if (bpf_ringbuf_output(&events, &batch->wake, sizeof(batch->wake), wake_flags(false)))
		count(&dropped, K_WAKEUP);
	else
		count(&emitted, K_WAKEUP);
}

/*
 * CPU-quota throttling (CFS bandwidth). Linux 6.18 throttles per task: a
 * task of a throttled cfs_rq is dequeued when it returns to user mode and
 * switched out still TASK_RUNNING, with `throttled` set, and is queued
 * again at the unthrottle, with no wakeup. Before 6.18 the whole cfs_rq
 * is dequeued and its running task switched out the same way, while its
 * throttle_count (which counts its own and its ancestors' throttles) is
 * above 0. Either way its cfs_rq accounts the time it is throttled
 * (`throttled_clock_self`, the rq clock when the running episode began,
 * 0 when none; `throttled_clock_self_time`, the episodes ended), since
 * Linux 6.6. So the time from the switch-out to the unthrottle is what
 * the episode still had to run then: the cfs_rq's throttled time at the
 * switch-in less that at the switch-out (the running episode included).
 */
static __always_inline bool throttle_timed(void)
{
	return bpf_core_field_exists(struct cfs_rq, throttled_clock_self_time) &&
	       bpf_core_field_exists(struct sched_entity, cfs_rq);
}

/* Whether `t`, switched out runnable, was throttled (throttle_timed()). */
static __always_inline bool task_throttled(struct task_struct *t)
{
	if (bpf_core_field_exists(t->throttled))
		return t->throttled;
	return t->se.cfs_rq->throttle_count > 0;
}

/*
 * Throttled thread `t` (tid `tid`) leaves the CPU at `ts`: its cfs_rq and
 * that cfs_rq's throttled time now go into its task storage, its bit into
 * throttle_bits. A cfs_rq not timing its episode (it had nothing queued
 * when throttled), or no storage, leaves the time runqueue, counted.
 */
static __always_inline void note_throttle(struct task_struct *t, __u32 tid, __u32 cpu, __u64 ts)
{
	struct cfs_rq *c = t->se.cfs_rq;
	__u64 since = c->throttled_clock_self, now = c->rq->clock;
	struct task_state *st;

	if (!since || tid >= TRACED_TGID_LIMIT)
		goto untimed;
	st = bpf_task_storage_get(&task_states, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st)
		goto untimed;
	st->thr_cfs_rq = (__u64)c;
	st->thr_out = c->throttled_clock_self_time + ((__s64)(now - since) > 0 ? now - since : 0);
	st->thr_ts = ts;
	st->thr_cpu = cpu;
	bit_set(throttle_bits, tid);
	return;
untimed:
	count(&emitted, K_THROTTLE_UNTIMED);
}

/*
 * Thread `t` (tid `tid`, its bit set in throttle_bits) comes back on CPU
 * at `ts`: a THROTTLE record at `buf` from its switch-out to when the
 * episode that throttled it ended (the cfs_rq's throttled time since,
 * read through the pointer kept: the thread may be on another CPU's
 * cfs_rq now). Returns its size (0: none, counted as untimed when the
 * episode did not end: the thread left that cfs_rq meanwhile).
 */
static __always_inline __u32 note_unthrottle(struct task_struct *t, __u32 tid, __u64 ts, void *buf)
{
	struct throttle_rec *r = buf;
	struct task_state *st;
	struct cfs_rq *c;
	__s64 held;
	__u64 to;

	bit_clear(throttle_bits, tid);
	st = bpf_task_storage_get(&task_states, t, 0, 0);
	if (!st || !st->thr_ts)
		return 0;
	/* A probe read: the cfs_rq may be gone with its cgroup. */
	c = bpf_rdonly_cast((void *)st->thr_cfs_rq, bpf_core_type_id_kernel(struct cfs_rq));
	held = c->throttled_clock_self_time - st->thr_out;
	if (held <= 0 || st->thr_ts >= ts) {
		st->thr_ts = 0;
		count(&emitted, K_THROTTLE_UNTIMED);
		return 0;
	}
	to = st->thr_ts + held;
	rec_hdr_fill(r, K_THROTTLE, sizeof(*r), tid, st->thr_ts);
	r->flags = 0;
	if (to > ts) {
		to = ts;
		r->flags = THROTTLE_CLAMPED;
	}
	r->to = to;
	r->cpu = st->thr_cpu;
	st->thr_ts = 0;
	return sizeof(*r);
}

/*
 * The stacks of `prev` at its switch-out (stacks.bpf.h), for the trailing
 * fields of its SWITCH_OUT: the kernel stack's id in the low half, the
 * user stack's in the high half. A dying thread's last switch has none.
 */
static __always_inline __u64 note_stacks(void *ctx, struct task_struct *prev, __u32 tid, __u32 tgid, __u64 ts,
					 unsigned int prev_state)
{
	struct pt_regs *regs;
	__u64 ids;

	if (prev_state & TASK_DEAD)
		return 0;
	ids = kernel_stack(ctx, 0, tid, ts);
	regs = saved_regs(prev);
	if (regs)
		ids |= (__u64)user_stack(0, tid, tgid, ts, regs->ip, regs->bp, regs->sp) << 32;
	return ids;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	/* Direct loads: tp_btf arguments are trusted BTF pointers, no helper call. */
	__u32 prev_tgid = prev->tgid;
	__u32 next_tgid = next->tgid;
	/* The idle tasks (pid 0) are never in the filter. */
	bool out = tgid_traced(prev_tgid);
	bool in = tgid_traced(next_tgid);
	__u32 prev_pid, next_pid, cpu, zero = 0, off = 0;
	/* A per-CPU array lookup is inlined (no helper call). */
	struct switch_batch *batch = bpf_map_lookup_elem(&switch_batches, &zero);
	__u64 ts, in_ts, steal;
	__u16 why = 0;
	__u32 size, stolen = 0, thr = 0;
	bool wake = false, pending, deferred = stack_mode & STACKS_DEFERRED;

	if (!batch)
		return 0;
	pending = batch->wake_pending;
	/* Nothing else before the filter: most switches of a busy machine are
	 * of untraced tasks, and this runs on every one of them. */
	if (!out && !in) {
		if (pending)
			flush_wakeup(batch);
		return 0;
	}
	/* One timestamp for both halves: the CPU passes from prev to next at one instant. */
	ts = bpf_ktime_get_ns();
	cpu = bpf_get_smp_processor_id();
	prev_pid = prev->pid;
	next_pid = next->pid;
	/* The CPU's steal clock, for the stretch ending and the one beginning. */
	steal = steal_clock(batch, out ? prev : next);
	/* Deferred stacks: the incoming thread's block, if long; the outgoing
	 * thread's switch-out time (not its last: a dying thread's). */
	if (deferred) {
		if (in)
			block_in_note(next, saved_regs(next), next_pid, next_tgid, ts);
		if (out && !(prev_state & TASK_DEAD))
			block_out_note(prev_pid, ts);
	}
	if (out) {
		struct switch_out_rec *r;
		/* Its switch-in on this CPU was reported (see above). */
		bool seen_in = batch->in_tid == prev_pid;
		/* First, while one verifier state reaches it: the stack code is
		 * then verified once, not once per path of what follows. */
		__u64 stacks = stack_mode && !deferred ? note_stacks(ctx, prev, prev_pid, prev_tgid, ts, prev_state) : 0;

		in_ts = batch->last_ts;
		batch->in_tid = 0;
		/* A thread seen before (named) whose switch-in was not. */
		if (note_tid(prev, prev_pid, prev_tgid, ts) && !seen_in)
			in_ts = infer_switch_in(prev, prev_pid, prev_tgid, cpu, in_ts, ts);
		else if (!seen_in)
			in_ts = 0;
		/*
		 * Its last switch (do_task_dead; a preemption after exit_notify
		 * is not): a recycled tid is a new thread.
		 */
		if (!preempt && (prev_state & TASK_DEAD) && prev->exit_state) {
			bit_clear(named_bits, prev_pid);
			pf_hint_clear(prev_pid);
		}
		if (!preempt && prev_state != 0) {
			why = note_voluntary_switch_out(prev, prev_pid, ts, in_ts, batch->b, &wake);
			off = why == K_SYSCALL ? sizeof(struct syscall_rec)
			      : why == K_PAGE_FAULT ? sizeof(struct page_fault_rec) : 0;
		} else if (throttle_timed() && task_throttled(prev)) {
			/* Switched out runnable: a preemption, or its cgroup's quota. */
			note_throttle(prev, prev_pid, cpu, ts);
		}
		/* Steal over the stretch since its switch-in (or last sample). */
		if (seen_in) {
			stolen = fill_steal(batch->b + off, batch, prev_pid, cpu, ts, steal);
			off += stolen;
		}
		/* off ≤ 152 here; the mask only tells the verifier. */
		r = (void *)batch->b + (off & 255);
		if ((off & 255) + sizeof(struct switch_out_stacks_rec) > BATCH_BYTES)
			return 0;
		size = stack_mode && !deferred ? sizeof(struct switch_out_stacks_rec) : sizeof(*r);
		rec_hdr_fill(r, K_SWITCH_OUT, size, prev_pid, ts);
		r->tgid = prev_tgid;
		/*
		 * A preempted task stays runnable even if it had already set a
		 * sleeping state (preempted on its way to schedule()); report it
		 * as TASK_RUNNING, as the kernel's own trace output does ("R+").
		 */
		r->prev_state = preempt ? 0 : prev_state;
		r->cpu = cpu;
		r->next_tid = next_pid;
		if (stack_mode && !deferred) {
			((struct switch_out_stacks_rec *)r)->kstack = (__u32)stacks;
			((struct switch_out_stacks_rec *)r)->ustack = stacks >> 32;
		}
		off += size;
	}
	if (in) {
		struct switch_in_rec *r;

		/* No task storage here: the name is a bit, the switch-in is
		 * remembered per CPU, and a fault before this switch-in is told
		 * apart by its time (note_voluntary_switch_out). */
		note_tid(next, next_pid, next_tgid, ts);
		batch->in_tid = next_pid;
		batch->in_steal = steal;
		batch->steal_ts = ts;
		/* Throttled at its switch-out: until when. off ≤ 192 here. */
		if (bit_test(throttle_bits, next_pid) && (off & 255) + sizeof(struct throttle_rec) <= BATCH_BYTES) {
			thr = note_unthrottle(next, next_pid, ts, batch->b + (off & 255));
			off += thr;
		}
		/* off ≤ 224 here; the mask only tells the verifier. */
		r = (void *)batch->b + (off & 255);
		if ((off & 255) + sizeof(*r) > BATCH_BYTES)
			return 0;
		rec_hdr_fill(r, K_SWITCH_IN, sizeof(*r), next_pid, ts);
		r->tgid = next_tgid;
		r->cpu = cpu;
		r->prev_tid = prev_pid;
		r->reserved = 0;
		off += sizeof(*r);
	}
	batch->last_ts = ts;
	if (off > BATCH_BYTES)
		return 0;
	batch->wake_pending = 0;
	if (bpf_ringbuf_output(&events, pending ? (void *)&batch->wake : (void *)batch->b,
			       pending ? off + sizeof(struct wakeup_rec) : off, batch_wake_flags(batch, wake))) {
		if (pending)
			count(&dropped, K_WAKEUP);
		if (why)
			count(&dropped, why);
		if (stolen)
			count(&dropped, K_STEAL);
		if (thr)
			count(&dropped, K_THROTTLE);
		if (out)
			count(&dropped, K_SWITCH_OUT);
		if (in)
			count(&dropped, K_SWITCH_IN);
		return 0;
	}
	if (pending)
		count(&emitted, K_WAKEUP);
	if (why)
		count(&emitted, why);
	if (stolen)
		count(&emitted, K_STEAL);
	if (thr)
		count(&emitted, K_THROTTLE);
	if (out)
		count(&emitted, K_SWITCH_OUT);
	if (in)
		count(&emitted, K_SWITCH_IN);
	return 0;
}

/*
 * Per CPU: inside an interrupt handler or a timer callback (device IRQ
 * handlers, hrtimer and timer-wheel expiries)? A wakeup there was done by
 * an interrupt (a timer, a device), not by the current task, which the
 * interrupt only happened to find running. The preempt count would say so
 * too, but its per-CPU variable has no kallsyms address on every kernel;
 * these tracepoints exist on all.
 *
 * A flag, not a nesting count: an exit missed while the programs were
 * being attached would leave a count stuck and every later wakeup of that
 * CPU flagged; a flag is cleared by the next exit. The price: in a timer
 * callback a hard interrupt cut short, the rest of the callback is not
 * flagged (its wakeups read as before the flag existed).
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} in_irq SEC(".maps");

static __always_inline void irq_enter_exit(__u32 inside)
{
	__u32 zero = 0, *n = bpf_map_lookup_elem(&in_irq, &zero);

	if (n)
		*n = inside;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(irq_handler_entry) { irq_enter_exit(1); return 0; }
SEC("tp_btf/irq_handler_exit")
int BPF_PROG(irq_handler_exit) { irq_enter_exit(0); return 0; }
SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(hrtimer_expire_entry) { irq_enter_exit(1); return 0; }
SEC("tp_btf/hrtimer_expire_exit")
int BPF_PROG(hrtimer_expire_exit) { irq_enter_exit(0); return 0; }
SEC("tp_btf/timer_expire_entry")
int BPF_PROG(timer_expire_entry) { irq_enter_exit(1); return 0; }
SEC("tp_btf/timer_expire_exit")
int BPF_PROG(timer_expire_exit) { irq_enter_exit(0); return 0; }

/* WAKEUP_HARDIRQ when this wakeup runs inside an interrupt handler or a
 * timer callback. */
static __always_inline __u32 wakeup_flags(void)
{
	__u32 zero = 0, *n = bpf_map_lookup_elem(&in_irq, &zero);

	return n && *n ? WAKEUP_HARDIRQ : 0;
}

static __always_inline void fill_wakeup(struct wakeup_rec *r, struct task_struct *p, __u32 tgid, __u32 cpu,
					__u32 new_task, __u64 ts)
{
	__u64 waker = bpf_get_current_pid_tgid();

	rec_hdr_fill(r, K_WAKEUP, sizeof(*r), p->pid, ts);
	r->tgid = tgid;
	r->waker_tid = (__u32)waker;
	r->waker_tgid = waker >> 32;
	r->target_cpu = cpu;
	r->new_task = new_task;
	r->flags = wakeup_flags();
}

static __always_inline void emit_wakeup(struct task_struct *p, __u32 new_task)
{
	__u32 tgid = p->tgid, zero = 0, cpu;
	struct switch_batch *batch;
	struct wakeup_rec *r;
	__u64 ts;

	if (!tgid_traced(tgid))
		return;
	ts = bpf_ktime_get_ns();
	/* task_cpu(p): what the tracepoint itself reports as target_cpu. */
	cpu = p->thread_info.cpu;
	/* Last ran here: the next switch of this CPU writes it (switch_batch). */
	batch = bpf_map_lookup_elem(&switch_batches, &zero);
	if (batch && cpu == bpf_get_smp_processor_id()) {
		if (batch->wake_pending)
			flush_wakeup(batch);
		fill_wakeup(&batch->wake, p, tgid, cpu, new_task, ts);
		batch->wake_pending = 1;
		return;
	}
	r = rec_reserve(K_WAKEUP, sizeof(*r), p->pid, ts);
	if (!r)
		return;
	fill_wakeup(r, p, tgid, cpu, new_task, ts);
	rec_submit(r, K_WAKEUP);
}

SEC("tp_btf/sched_waking")
int BPF_PROG(sched_waking, struct task_struct *p)
{
	emit_wakeup(p, 0);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new, struct task_struct *p)
{
	emit_wakeup(p, 1);
	return 0;
}
