/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Stacks of traced threads, captured at every switch-out (sched.bpf.c) and
 * CPU sample (stacks.bpf.c), deduplicated: a stack is written once as a
 * STACK record, and after that costs its 4-byte id in the record that
 * uses it.
 *
 * Kernel stacks come from bpf_get_stack (the kernel's own unwinder). User
 * stacks are walked here by frame pointers from the registers the thread
 * saved on entering the kernel. A Java thread blocked in native or VM code
 * has its Java frames behind native code that may keep no frame pointer
 * (glibc), so for threads of a JVM whose agent announced them (the
 * java_threads map) the walk stops where the native part reaches the
 * thread's last Java frame (HotSpot's frame anchor, as async-profiler's
 * vm walker does) and goes on from that anchor. A frame whose pc is in the
 * JVM's interpreter also gets the Method* its frame holds, which names the
 * interpreted method (the agent's METHOD_ADDRS records say which).
 */
#ifndef JTRACE_STACKS_BPF_H
#define JTRACE_STACKS_BPF_H

#include "jtrace.bpf.h"

/* STACKS_* bits; 0: no stacks (a SWITCH_OUT keeps its 32 bytes). */
const volatile __u32 stack_mode __weak = 0;

/* The interpreter keeps the Method* 3 words below its frame pointer
 * (frame_x86.hpp: interpreter_frame_method_offset). */
#define INTERP_METHOD_SLOT 24
/* Farthest a frame pointer may be from the stack pointer of the walk:
 * beyond it, a value in rbp is not a frame pointer. */
#define STACK_SPAN (64 << 20)

/* Next stack id (ids start at 1; 0 means no stack). Defined in stacks.bpf.c. */
extern __u32 next_stack_id;
/* Stack ids below this were written into an earlier chunk of a ring
 * recording: their stacks are written again. Defined in stacks.bpf.c. */
extern __u32 stack_id_floor;

/* The agent's JVMs (by tgid) and their Java threads (tid -> JavaThread*). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct hotspot_layout);
} jvms __weak SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u64);
} java_threads __weak SEC(".maps");

/* Stacks already written, by hash: an LRU, so a stack it forgot is
 * written again under a new id (readers take any id's definition). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u32);
} stack_ids __weak SEC(".maps");

/*
 * State of a user frame-pointer walk. It lives in the per-CPU buffer, not
 * on the BPF stack: the verifier then knows none of its values exactly,
 * so it checks the bpf_loop callback once instead of once per frame.
 */
struct uwalk {
	__u64 fp;		/* frame pointer of the frame to read next */
	__u64 floor;		/* frame pointers only grow */
	__u64 stop_at;		/* the Java anchor's sp: the native part ends below it */
	__u64 carry_fp;		/* a frame pointer at or above stop_at, found on the way */
	__u64 ilo, ihi;		/* the interpreter */
	__u32 n;
	__u32 flags;
};

/* Words above a Java anchor searched for the frame of a native wrapper. */
#define WRAPPER_SCAN 32

/* A STACK record being built, and the walk building it. */
struct stack_buf {
	struct stack_rec h;
	__u64 w[2 * USTACK_MAX];
	struct uwalk st;
	__u64 scan[WRAPPER_SCAN];
	__u64 code_lo, code_hi;
};

/* bpf_loop callback context: the buffer. */
struct walk_ctx {
	struct stack_buf *b;
};

/* Per CPU: slot 0 for sched_switch, slot 1 for the sampler (a perf NMI
 * may interrupt sched_switch on the same CPU). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct stack_buf);
} stack_bufs __weak SEC(".maps");

/* FNV-1a over the words of a stack (bpf_loop callback context). */
struct stack_hash {
	struct stack_buf *b;
	__u64 h;
};

static long hash_step(__u64 i, void *ctx)
{
	struct stack_hash *sh = ctx;

	sh->h = (sh->h ^ sh->b->w[i & (2 * USTACK_MAX - 1)]) * 0x100000001b3ULL;
	return 0;
}

/*
 * The id of the `words` words of `b` (their STACK record written if they
 * are new), or 0 if the record was lost.
 */
static __always_inline __u32 stack_intern(struct stack_buf *b, __u32 tid, __u64 ts, __u32 words, __u64 salt)
{
	struct stack_hash sh = { b, (0xcbf29ce484222325ULL ^ salt ^ ((__u64)b->h.flags << 56)) * 0x100000001b3ULL };
	__u32 *known, id, len;
	__u64 h;

	if (words > 2 * USTACK_MAX)
		return 0;
	bpf_loop(words, hash_step, &sh, 0);
	h = sh.h;
	known = bpf_map_lookup_elem(&stack_ids, &h);
	if (known && *known >= *(volatile __u32 *)&stack_id_floor)
		return *known;
	id = __sync_fetch_and_add(&next_stack_id, 1);
	len = sizeof(struct stack_rec) + words * 8;
	if (len > sizeof(*b))
		return 0;
	rec_hdr_fill(b, K_STACK, len, tid, ts);
	b->h.id = id;
	/* A new user stack wakes the consumer: it reads the process's
	 * mappings while the process lives (short-lived ones too). */
	if (bpf_ringbuf_output(&events, b, len, wake_flags(b->h.tgid != 0))) {
		count(&dropped, K_STACK);
		return 0;
	}
	count(&emitted, K_STACK);
	bpf_map_update_elem(&stack_ids, &h, &id, BPF_ANY);
	return id;
}

/* The kernel stack of the current task, interned. */
static __always_inline __u32 kernel_stack(void *ctx, __u32 slot, __u32 tid, __u64 ts)
{
	struct stack_buf *b = bpf_map_lookup_elem(&stack_bufs, &slot);
	long bytes;

	if (!b || !(stack_mode & STACKS_KERNEL))
		return 0;
	bytes = bpf_get_stack(ctx, b->w, KSTACK_MAX * 8, 0);
	if (bytes <= 0)
		return 0;
	b->h.tgid = 0;
	b->h.n = bytes / 8;
	b->h.flags = STACK_KERNEL | (b->h.n >= KSTACK_MAX ? STACK_TRUNCATED : 0);
	return stack_intern(b, tid, ts, b->h.n, 1);
}

/* Appends a frame: `pc`, in a function whose frame pointer is `fp`. */
static __always_inline void uwalk_push(struct stack_buf *b, __u64 pc, __u64 fp)
{
	struct uwalk *w = &b->st;
	__u64 method = 0;
	__u32 i = w->n;

	if (i >= USTACK_MAX) {
		w->flags |= STACK_TRUNCATED;
		return;
	}
	if (pc >= w->ilo && pc < w->ihi && fp > INTERP_METHOD_SLOT)
		bpf_probe_read_user(&method, 8, (void *)(fp - INTERP_METHOD_SLOT));
	b->w[(2 * i) & (2 * USTACK_MAX - 1)] = pc;
	b->w[(2 * i + 1) & (2 * USTACK_MAX - 1)] = method;
	w->n = i + 1;
}

static long uwalk_step(__u64 idx, void *ctx)
{
	struct stack_buf *b = ((struct walk_ctx *)ctx)->b;
	struct uwalk *w = &b->st;
	__u64 fr[2];	/* the caller's frame pointer, the return address */
	__u64 fp = w->fp;

	if (w->n >= USTACK_MAX) {
		w->flags |= STACK_TRUNCATED;
		return 1;
	}
	if (fp < w->floor || (fp & 7) || fp - w->floor > STACK_SPAN)
		return 1;
	if (w->stop_at && fp + 16 >= w->stop_at) {
		/* The frame that returns into the anchor's pc, or one beyond it. */
		if (fp >= w->stop_at)
			w->carry_fp = fp;
		else if (fp + 16 == w->stop_at && !bpf_probe_read_user(fr, 8, (void *)fp))
			w->carry_fp = fr[0];
		return 1;
	}
	if (bpf_probe_read_user(fr, 16, (void *)fp))
		return 1;
	/* Not a user code address: rbp held something else. */
	if (fr[1] < 4096 || fr[1] >= (1ULL << 47))
		return 1;
	uwalk_push(b, fr[1], fr[0]);
	w->floor = fp + 16;
	w->fp = fr[0];
	return 0;
}

/* The fp saved at sp - 16 if its frame returns into [lo, hi), else 0. */
static __always_inline __u64 wrapper_fp(__u64 sp, __u64 lo, __u64 hi)
{
	__u64 fp = 0, fr[2];

	if (bpf_probe_read_user(&fp, 8, (void *)(sp - 16)))
		return 0;
	if (fp < sp || fp - sp > 65536 || (fp & 7) || bpf_probe_read_user(fr, 16, (void *)fp))
		return 0;
	return fr[1] >= lo && fr[1] < hi ? fp : 0;
}

/*
 * bpf_loop callback: is word i of the words above the anchor's sp the
 * saved fp of a frame (the next word its return address into the code
 * cache, the saved fp above it)? The first such is the wrapper's frame.
 */
static long scan_step(__u64 i, void *ctx)
{
	struct stack_buf *b = ((struct walk_ctx *)ctx)->b;
	__u64 fp = b->scan[i & (WRAPPER_SCAN - 1)], ret = b->scan[(i + 1) & (WRAPPER_SCAN - 1)];
	__u64 at = b->st.stop_at + 8 * i;

	if (i + 1 >= WRAPPER_SCAN)
		return 1;
	if (ret >= b->code_lo && ret < b->code_hi && fp > at && fp - at < 65536 && !(fp & 7)) {
		b->st.carry_fp = at;
		return 1;
	}
	return 0;
}

/*
 * The user stack of thread `tid` of process `tgid`, from its user
 * registers ip/bp/sp, interned (0: none).
 */
static __always_inline __u32 user_stack(__u32 slot, __u32 tid, __u32 tgid, __u64 ts, __u64 ip, __u64 bp, __u64 sp)
{
	struct stack_buf *b = bpf_map_lookup_elem(&stack_bufs, &slot);
	struct hotspot_layout *jvm;
	struct walk_ctx ctx;
	struct uwalk *w;
	__u64 anchor[3] = {}, *jt, pc = 0;

	if (!b || !(stack_mode & STACKS_USER) || !ip)
		return 0;
	ctx.b = b;
	w = &b->st;
	__builtin_memset(w, 0, sizeof(*w));
	jvm = bpf_map_lookup_elem(&jvms, &tgid);
	if (jvm) {
		w->ilo = jvm->interp_lo;
		w->ihi = jvm->interp_hi;
		jt = bpf_map_lookup_elem(&java_threads, &tid);
		if (jt && *jt) {
			bpf_probe_read_user(&anchor[0], 8, (void *)(*jt + jvm->anchor_sp));
			bpf_probe_read_user(&anchor[1], 8, (void *)(*jt + jvm->anchor_fp));
			bpf_probe_read_user(&anchor[2], 8, (void *)(*jt + jvm->anchor_pc));
		}
	}
	/* The native part (all of it for a thread with no Java anchor). */
	uwalk_push(b, ip, bp);
	w->fp = bp;
	w->floor = sp;
	w->stop_at = anchor[0] > sp ? anchor[0] : 0;
	bpf_loop(USTACK_MAX, uwalk_step, &ctx, 0);
	/* The Java part, from the last Java frame. */
	if (w->stop_at) {
		w->flags |= STACK_JAVA_ANCHOR;
		pc = anchor[2];
		if (!pc)
			bpf_probe_read_user(&pc, 8, (void *)(w->stop_at - 8));
		/*
		 * Only the interpreter sets the anchor's fp; compiled code and
		 * its stubs leave whatever an earlier transition put there.
		 */
		if (pc >= w->ilo && pc < w->ihi && anchor[1])
			w->fp = anchor[1];
		else
			w->fp = w->carry_fp;
		/*
		 * A compiled native wrapper leaves no fp in the anchor; when the
		 * native chain was cut, its callee's prologue (push rbp) put the
		 * wrapper's fp right below the return address. Taken only if
		 * that frame returns into the code cache.
		 */
		if (!w->fp && jvm)
			w->fp = wrapper_fp(w->stop_at, jvm->code_lo, jvm->code_hi);
		/*
		 * Else the wrapper's callee kept no frame pointer: the wrapper's
		 * own frame is the first pair above the anchor's sp that looks
		 * like a frame returning into the code cache.
		 */
		if (!w->fp && jvm && jvm->code_hi &&
		    !bpf_probe_read_user(b->scan, sizeof(b->scan), (void *)w->stop_at)) {
			b->code_lo = jvm->code_lo;
			b->code_hi = jvm->code_hi;
			w->carry_fp = 0;
			bpf_loop(WRAPPER_SCAN - 1, scan_step, &ctx, 0);
			w->fp = w->carry_fp;
		}
		if (pc) {
			uwalk_push(b, pc, w->fp);
			w->floor = w->stop_at;
			w->stop_at = 0;
			bpf_loop(USTACK_MAX, uwalk_step, &ctx, 0);
		}
	}
	b->h.tgid = tgid;
	b->h.n = w->n;
	b->h.flags = STACK_USER | w->flags;
	return stack_intern(b, tid, ts, w->n > USTACK_MAX ? 2 * USTACK_MAX : 2 * w->n, ((__u64)tgid << 32) | 2);
}

#endif /* JTRACE_STACKS_BPF_H */
