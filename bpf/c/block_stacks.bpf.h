/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Deferred stacks (stack mode STACKS_DEFERRED): the stacks of a block are
 * taken once the block turns out long, not at every switch-out, so that
 * a program switching 100 000 times a second pays for the few blocks that
 * hold its off-CPU time, not for every switch.
 *
 * While a thread is off CPU, its kernel stack is frozen: at the switch-in
 * that ends a block of at least `stack_min_block_ns`, bpf_get_task_stack
 * of the incoming task reads exactly where it blocked. Its user registers
 * and user stack are frozen too, until it returns to user mode; the user
 * walk needs its address space loaded, which at the switch-in (still in
 * the previous task's context) it is not, so the walk waits for the
 * thread's own return to user mode: the rseq_update tracepoint, which the
 * kernel runs there after every switch of a task that registered rseq
 * (glibc does for every thread since 2.35). That walk is checked against
 * the registers seen at the switch-in: a signal handler set up meanwhile
 * moves them, and then the block has no user stack (BLOCK_STACK_NO_USER),
 * never a wrong one. A thread with no rseq gets its user walk at the
 * switch-in when the outgoing task shares its address space, else none.
 *
 * Short blocks are sampled: on each CPU, at most one per
 * `short_stack_every_ns`, flagged BLOCK_STACK_SAMPLED. Causes, wakers and
 * times stay exact for every block; the report says which share of the
 * off-CPU time has a stack.
 *
 * Switch-out times live in a table indexed by tid modulo its size (a
 * direct load, no hash lookup, on the switch path); a thread whose slot
 * another thread took meanwhile loses that block's stacks, counted
 * (K_BLOCK_UNTIMED).
 */
#ifndef JTRACE_BLOCK_STACKS_BPF_H
#define JTRACE_BLOCK_STACKS_BPF_H

#include "jtrace.bpf.h"
#include "stacks.bpf.h"

/* Blocks at least this long get their stacks (deferred mode). */
const volatile __u64 stack_min_block_ns __weak = 500000;
/* Per CPU, the least time between two sampled short blocks (~0: none). */
const volatile __u64 short_stack_every_ns __weak = 10000000;

#define BLOCK_SLOTS (1 << 18)

/* A thread's last switch-out (ts 0: none pending). */
struct block_out {
	__u32 tid;
	__u32 reserved;
	__u64 ts;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, BLOCK_SLOTS);
	__type(key, __u32);
	__type(value, struct block_out);
} block_outs __weak SEC(".maps");

/* Few at once: a thread waits here only from its switch-in to its return
 * to user mode. */
#define USTACK_WANT_SLOTS (1 << 12)

/* Blocks of one system call (fsync waits more than once) wait together. */
#define WANT_BLOCKS 4

/* Blocks whose user stack the thread's return to user mode takes: all
 * with the same user registers, those at their switch-ins. */
struct ustack_want {
	__u32 tid;
	__u32 tgid;
	__u64 ip, bp, sp;
	__u32 n;
	__u32 reserved;
	__u64 out_ts[WANT_BLOCKS];
	__u32 kstack[WANT_BLOCKS];
	__u32 flags[WANT_BLOCKS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, USTACK_WANT_SLOTS);
	__type(key, __u32);
	__type(value, struct ustack_want);
} ustack_wants __weak SEC(".maps");

/* Threads with a ustack_want pending, by tid (block_stacks.bpf.c): the
 * rseq_update program of every task tests one bit. */
extern __u64 ustack_want_bits[TRACED_TGID_LIMIT / 64];

/* Per CPU: when a short block's stacks were last sampled here. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} short_stack_marks __weak SEC(".maps");

/* Writes a BLOCK_STACK record. */
static __always_inline void emit_block_stack(__u32 tid, __u32 tgid, __u64 ts, __u64 out_ts, __u32 kstack,
					     __u32 ustack, __u32 flags)
{
	struct block_stack_rec *r = rec_reserve(K_BLOCK_STACK, sizeof(*r), tid, ts);

	if (!r)
		return;
	r->out_ts = out_ts;
	r->tgid = tgid;
	r->flags = flags;
	r->kstack = kstack;
	r->ustack = ustack;
	rec_submit(r, K_BLOCK_STACK);
}

/* Thread `tid` switches out at `ts`: its block's stacks may be wanted. */
static __always_inline void block_out_note(__u32 tid, __u64 ts)
{
	__u32 key = tid & (BLOCK_SLOTS - 1);
	struct block_out *o = bpf_map_lookup_elem(&block_outs, &key);

	if (!o)
		return;
	if (o->tid != tid && o->ts)
		count(&dropped, K_BLOCK_UNTIMED);
	o->tid = tid;
	o->ts = ts;
}

/* The blocks waiting in `w` get their kernel stacks and user stack `us`
 * (0: none, flagged so); `w` is free again. */
static __always_inline void want_flush(struct ustack_want *w, __u64 ts, __u32 us)
{
	__u32 i, extra = us ? 0 : BLOCK_STACK_NO_USER;

	for (i = 0; i < WANT_BLOCKS; i++) {
		if (i >= w->n)
			break;
		emit_block_stack(w->tid, w->tgid, ts, w->out_ts[i], w->kstack[i], us, w->flags[i] | extra);
	}
	w->tid = 0;
	w->n = 0;
}

/*
 * The kernel stack of `t`, which is off CPU (bpf_get_task_stack: where it
 * blocked or was preempted), interned; 0 if none.
 */
static __always_inline __u32 task_kernel_stack(struct task_struct *t, __u32 slot, __u32 tid, __u64 ts)
{
	struct stack_buf *b = bpf_map_lookup_elem(&stack_bufs, &slot);
	__u64 h = 0xcbf29ce484222325ULL ^ 1;
	__u32 i, n;
	long bytes;

	if (!b || !(stack_mode & STACKS_KERNEL))
		return 0;
	bytes = bpf_get_task_stack(t, b->w, KSTACK_MAX * 8, 0);
	if (bytes <= 0)
		return 0;
	n = bytes / 8;
	b->h.tgid = 0;
	b->h.n = n;
	b->h.flags = STACK_KERNEL | (n >= KSTACK_MAX ? STACK_TRUNCATED : 0);
	for (i = 0; i < KSTACK_MAX; i++) {
		if (i >= n)
			break;
		h = hash_word(h, b->w[i]);
	}
	return stack_intern(b, tid, ts, n, hash_word(h, b->h.flags));
}

/* Whether `t` registered rseq (so rseq_update runs at its return to user
 * mode). Kernels whose task_struct keeps it otherwise: no. */
struct task_struct___rseq {
	void *rseq;
} __attribute__((preserve_access_index));

static __always_inline bool has_rseq(struct task_struct *t)
{
	struct task_struct___rseq *r = (void *)t;

	if (!bpf_core_field_exists(r->rseq) || bpf_core_field_size(r->rseq) != 8)
		return false;
	return BPF_CORE_READ(r, rseq) != NULL;
}

/*
 * Thread `next` (tid `tid`, process `tgid`) comes on CPU at `ts`, its
 * user registers `regs`: if the block its last switch-out began is long,
 * or is the short one this CPU samples now, its kernel stack now and its
 * user stack at its return to user mode (or now: see above).
 */
static __always_inline void block_in_note(struct task_struct *next, struct pt_regs *regs, __u32 tid, __u32 tgid,
					  __u64 ts)
{
	__u32 key = tid & (BLOCK_SLOTS - 1), zero = 0, flags = 0, ks, us = 0;
	struct block_out *o = bpf_map_lookup_elem(&block_outs, &key);
	struct task_struct *cur;
	struct ustack_want *w;
	__u64 out_ts, *mark;

	if (!o || o->tid != tid || !o->ts)
		return;
	out_ts = o->ts;
	o->ts = 0;
	if (ts - out_ts < stack_min_block_ns) {
		mark = bpf_map_lookup_elem(&short_stack_marks, &zero);
		if (!mark || ts - *mark < short_stack_every_ns)
			return;
		*mark = ts;
		flags = BLOCK_STACK_SAMPLED;
	}
	ks = task_kernel_stack(next, 0, tid, ts);
	if (!regs || !(stack_mode & STACKS_USER)) {
		emit_block_stack(tid, tgid, ts, out_ts, ks, 0, flags);
		return;
	}
	if (has_rseq(next)) {
		key = tid & (USTACK_WANT_SLOTS - 1);
		w = bpf_map_lookup_elem(&ustack_wants, &key);
		if (!w)
			return;
		/* This thread blocked again before it got back to user mode
		 * (in the same system call): its blocks share a user stack. */
		if (w->tid == tid && w->n < WANT_BLOCKS && w->ip == regs->ip && w->sp == regs->sp) {
			__u32 i = w->n & (WANT_BLOCKS - 1);

			w->out_ts[i] = out_ts;
			w->kstack[i] = ks;
			w->flags[i] = flags;
			w->n = i + 1;
			return;
		}
		/* Other blocks still wait there (another thread's, or this
		 * one's): they keep their kernel stacks. */
		if (w->tid) {
			bit_clear(ustack_want_bits, w->tid);
			want_flush(w, ts, 0);
		}
		w->tid = tid;
		w->tgid = tgid;
		w->ip = regs->ip;
		w->bp = regs->bp;
		w->sp = regs->sp;
		w->out_ts[0] = out_ts;
		w->kstack[0] = ks;
		w->flags[0] = flags;
		w->n = 1;
		bit_set(ustack_want_bits, tid);
		return;
	}
	/* No rseq: now, if the outgoing task's address space is the thread's. */
	cur = bpf_get_current_task_btf();
	if (cur->mm && cur->mm == next->mm)
		us = user_stack(0, tid, tgid, ts, regs->ip, regs->bp, regs->sp);
	emit_block_stack(tid, tgid, ts, out_ts, ks, us, flags | (us ? 0 : BLOCK_STACK_NO_USER));
}

#endif /* JTRACE_BLOCK_STACKS_BPF_H */
