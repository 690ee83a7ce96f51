/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Stacks of traced threads, captured at switch-outs (sched.bpf.c; or
 * after the block, block_stacks.bpf.h) and CPU samples (stacks.bpf.c),
 * deduplicated: a stack is written once as a
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
 * Kernel stacks, deduplicated by the kernel itself (bpf_get_stackid): it
 * hashes the frames it unwound and compares them with the bucket's, in
 * native code, so a known kernel stack costs its unwinding and no BPF
 * loop. Without BPF_F_REUSE_STACKID a bucket, once filled, keeps its stack
 * for the session and an id names one stack only; a different stack that
 * hashes to a taken bucket gets -EEXIST and takes the path of the user
 * stacks (bpf_get_stack, hash, stack_ids). Its ids in records are
 * KSTACK_MAP_ID | bucket (jtrace.h), apart from the counter's.
 */
#define KSTACK_IDS 16384

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, KSTACK_IDS);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, KSTACK_MAX * sizeof(__u64));
} kstack_map __weak SEC(".maps");

/* Buckets of kstack_map whose STACK record was written, by bucket:
 * kstack_epoch at the time plus 1, so that a new chunk of a ring
 * recording (a new epoch) writes them again. Defined in stacks.bpf.c. */
extern __u32 kstack_epoch;
extern __u32 kstack_written[KSTACK_IDS];

/* Bytes of user stack read at once: the frames of a walk come out of
 * this window, one bpf_probe_read_user for many frames. */
#define UWIN 1024
#define UWIN_WORDS (UWIN / 8)

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
	__u64 code_lo, code_hi;	/* the JVM's code */
	__u64 win_lo, win_hi;	/* user addresses the window holds (empty: equal) */
	__u64 hash;		/* of the frames pushed so far */
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
	__u64 win[UWIN_WORDS];
};

/* bpf_loop callback context: the buffer. */
struct walk_ctx {
	struct stack_buf *b;
};

/* Per CPU: slot 0 for sched_switch, slot 1 for the sampler (a perf NMI
 * may interrupt sched_switch on the same CPU), slot 2 for the return to
 * user mode (block_stacks.bpf.c; the sampler may interrupt it too). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, struct stack_buf);
} stack_bufs __weak SEC(".maps");

/* One step of the stacks' hash (a multiply and an xor-shift, so that
 * every bit of a word reaches the low bits too). */
static __always_inline __u64 hash_word(__u64 h, __u64 x)
{
	h = (h ^ x) * 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 29);
}

/*
 * The id of the `words` words of `b`, whose hash is `h` (their STACK
 * record written if they are new), or 0 if the record was lost.
 */
static __always_inline __u32 stack_intern(struct stack_buf *b, __u32 tid, __u64 ts, __u32 words, __u64 h)
{
	__u32 *known, id, len;

	if (words > 2 * USTACK_MAX)
		return 0;
	known = bpf_map_lookup_elem(&stack_ids, &h);
	if (known && *known >= *(volatile __u32 *)&stack_id_floor)
		return *known;
	id = __sync_fetch_and_add(&next_stack_id, 1);
	len = sizeof(struct stack_rec) + words * 8;
	if (len > sizeof(b->h) + sizeof(b->w))
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

/*
 * The kernel stack of the current task into `b` (at most KSTACK_MAX
 * frames: bpf_get_stack's, or the same walk's as bpf_get_stackid's), its
 * STACK record header filled; false if there is none.
 */
static __always_inline bool kernel_frames(void *ctx, struct stack_buf *b)
{
	long bytes = bpf_get_stack(ctx, b->w, KSTACK_MAX * 8, 0);

	if (bytes <= 0)
		return false;
	b->h.tgid = 0;
	b->h.n = bytes / 8;
	b->h.flags = STACK_KERNEL | (b->h.n >= KSTACK_MAX ? STACK_TRUNCATED : 0);
	return true;
}

/* The kernel stack of the current task, interned. */
static __always_inline __u32 kernel_stack(void *ctx, __u32 slot, __u32 tid, __u64 ts)
{
	struct stack_buf *b = bpf_map_lookup_elem(&stack_bufs, &slot);
	__u64 h = 0xcbf29ce484222325ULL ^ 1;
	long id;
	__u32 i, n, len, epoch;

	if (!b || !(stack_mode & STACKS_KERNEL))
		return 0;
	id = bpf_get_stackid(ctx, &kstack_map, 0);
	if (id >= 0 && id < KSTACK_IDS) {
		epoch = *(volatile __u32 *)&kstack_epoch + 1;
		if (kstack_written[id] == epoch)
			return KSTACK_MAP_ID | id;
		/*
		 * First use of the bucket: its STACK record, from a second
		 * walk. The task has not run since, so it is the same stack;
		 * its innermost frame is this program's own pc, as in every
		 * stack taken in a tracepoint (readers drop the tracing frames).
		 */
		if (!kernel_frames(ctx, b))
			return 0;
		len = sizeof(struct stack_rec) + b->h.n * 8;
		if (len > sizeof(b->h) + sizeof(b->w))
			return 0;
		rec_hdr_fill(b, K_STACK, len, tid, ts);
		b->h.id = KSTACK_MAP_ID | id;
		if (bpf_ringbuf_output(&events, b, len, wake_flags(false))) {
			count(&dropped, K_STACK);
			return 0;
		}
		count(&emitted, K_STACK);
		kstack_written[id] = epoch;
		return KSTACK_MAP_ID | id;
	}
	/* The bucket holds another stack (or the map is full). */
	if (!kernel_frames(ctx, b))
		return 0;
	n = b->h.n;
	for (i = 0; i < KSTACK_MAX; i++) {
		if (i >= n)
			break;
		h = hash_word(h, b->w[i]);
	}
	return stack_intern(b, tid, ts, n, hash_word(h, b->h.flags));
}

/*
 * The user stack's window: a read of UWIN bytes at `addr`, or, when that
 * crosses into memory that is not there (the top of a stack), up to the
 * end of addr's page. 0 if addr holds a word.
 */
static __always_inline int uwin_fill(struct stack_buf *b, __u64 addr)
{
	struct uwalk *w = &b->st;
	__u64 len;

	if (!bpf_probe_read_user(b->win, UWIN, (void *)addr)) {
		w->win_lo = addr;
		w->win_hi = addr + UWIN;
		return 0;
	}
	w->win_lo = w->win_hi = 0;
	len = 4096 - (addr & 4095);
	if (len >= UWIN)
		return -1;
	if (len < 8)
		len = 8;
	if (bpf_probe_read_user(b->win, len, (void *)addr))
		return -1;
	w->win_lo = addr;
	w->win_hi = addr + len;
	return 0;
}

/* The user word at `addr` (8-aligned), through the window. */
static __always_inline int uread(struct stack_buf *b, __u64 addr, __u64 *out)
{
	struct uwalk *w = &b->st;

	if (addr & 7)
		return -1;
	if ((addr < w->win_lo || addr + 8 > w->win_hi) && uwin_fill(b, addr))
		return -1;
	*out = b->win[((addr - w->win_lo) >> 3) & (UWIN_WORDS - 1)];
	return 0;
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
	if (pc >= w->ilo && pc < w->ihi && fp > INTERP_METHOD_SLOT && uread(b, fp - INTERP_METHOD_SLOT, &method))
		method = 0;
	b->w[(2 * i) & (2 * USTACK_MAX - 1)] = pc;
	b->w[(2 * i + 1) & (2 * USTACK_MAX - 1)] = method;
	w->hash = hash_word(hash_word(w->hash, pc), method);
	w->n = i + 1;
}

static long uwalk_step(__u64 idx, void *ctx)
{
	struct stack_buf *b = ((struct walk_ctx *)ctx)->b;
	struct uwalk *w = &b->st;
	__u64 fp = w->fp, next_fp, ret;

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
		else if (fp + 16 == w->stop_at && !uread(b, fp, &next_fp))
			w->carry_fp = next_fp;
		return 1;
	}
	/* The caller's frame pointer, the return address. */
	if (uread(b, fp, &next_fp) || uread(b, fp + 8, &ret))
		return 1;
	/* Not a user code address: rbp held something else. */
	if (ret < 4096 || ret >= (1ULL << 47))
		return 1;
	uwalk_push(b, ret, next_fp);
	w->floor = fp + 16;
	w->fp = next_fp;
	return 0;
}

/* The fp saved at sp - 16 if its frame returns into the JVM's code, else 0. */
static __always_inline __u64 wrapper_fp(struct stack_buf *b, __u64 sp)
{
	__u64 fp = 0, ret;

	if (uread(b, sp - 16, &fp))
		return 0;
	if (fp < sp || fp - sp > 65536 || uread(b, fp + 8, &ret))
		return 0;
	return ret >= b->st.code_lo && ret < b->st.code_hi ? fp : 0;
}

/*
 * bpf_loop callback: is word i of the words above the anchor's sp the
 * saved fp of a frame (the next word its return address into the code
 * cache, the saved fp above it)? The first such is the wrapper's frame.
 */
static long scan_step(__u64 i, void *ctx)
{
	struct stack_buf *b = ((struct walk_ctx *)ctx)->b;
	__u64 at = b->st.stop_at + 8 * i, fp, ret;

	if (i + 1 >= WRAPPER_SCAN || uread(b, at, &fp) || uread(b, at + 8, &ret))
		return 1;
	if (ret >= b->st.code_lo && ret < b->st.code_hi && fp > at && fp - at < 65536 && !(fp & 7)) {
		b->st.carry_fp = at;
		return 1;
	}
	return 0;
}

/* Where a Java thread keeps its last Java frame: sp, fp, pc. */
static __always_inline void java_anchor(__u64 jt, struct hotspot_layout *jvm, __u64 anchor[3])
{
	__u32 lo = jvm->anchor_sp, hi = jvm->anchor_sp;
	__u64 all[4] = {};

	if (jvm->anchor_fp < lo)
		lo = jvm->anchor_fp;
	if (jvm->anchor_pc < lo)
		lo = jvm->anchor_pc;
	if (jvm->anchor_fp > hi)
		hi = jvm->anchor_fp;
	if (jvm->anchor_pc > hi)
		hi = jvm->anchor_pc;
	/* HotSpot keeps the three together (JavaFrameAnchor): one read. */
	if (hi - lo <= 16 && !((hi - lo) & 7) && !bpf_probe_read_user(all, 24, (void *)(jt + lo))) {
		anchor[0] = all[((jvm->anchor_sp - lo) / 8) & 3];
		anchor[1] = all[((jvm->anchor_fp - lo) / 8) & 3];
		anchor[2] = all[((jvm->anchor_pc - lo) / 8) & 3];
		return;
	}
	bpf_probe_read_user(&anchor[0], 8, (void *)(jt + jvm->anchor_sp));
	bpf_probe_read_user(&anchor[1], 8, (void *)(jt + jvm->anchor_fp));
	bpf_probe_read_user(&anchor[2], 8, (void *)(jt + jvm->anchor_pc));
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
	w->hash = 0xcbf29ce484222325ULL ^ ((__u64)tgid << 32) ^ 2;
	jvm = bpf_map_lookup_elem(&jvms, &tgid);
	if (jvm) {
		w->ilo = jvm->interp_lo;
		w->ihi = jvm->interp_hi;
		w->code_lo = jvm->code_lo;
		w->code_hi = jvm->code_hi;
		jt = bpf_map_lookup_elem(&java_threads, &tid);
		if (jt && *jt)
			java_anchor(*jt, jvm, anchor);
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
			uread(b, w->stop_at - 8, &pc);
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
			w->fp = wrapper_fp(b, w->stop_at);
		/*
		 * Else the wrapper's callee kept no frame pointer: the wrapper's
		 * own frame is the first pair above the anchor's sp that looks
		 * like a frame returning into the code cache.
		 */
		if (!w->fp && jvm && w->code_hi) {
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
	return stack_intern(b, tid, ts, w->n > USTACK_MAX ? 2 * USTACK_MAX : 2 * w->n,
			    hash_word(w->hash, ((__u64)b->h.flags << 32) | w->n));
}

#endif /* JTRACE_STACKS_BPF_H */
