// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * Interposed library calls: user space attaches lib_enter / lib_exit to
 * each requested function of every process, as one uprobe.multi /
 * uretprobe.multi link per library (Linux 6.6+), or as a uprobe /
 * uretprobe pair per function where multi links are missing; the probe id
 * is the BPF cookie. Only threads of traced processes are recorded. A
 * small per-thread stack pairs calls with returns, so nested and recursive
 * calls each get their own LIB_CALL span.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "jtrace.bpf.h"

/* A power of two: indexes are masked with LIB_STACK_DEPTH - 1. */
#define LIB_STACK_DEPTH 16

struct lib_frame {
	__u64 ts;
	__u64 probe;
};

struct lib_stack {
	__u32 depth;	/* may exceed LIB_STACK_DEPTH: those frames are not kept */
	__u32 pad;
	struct lib_frame f[LIB_STACK_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct lib_stack);
} lib_stacks SEC(".maps");

static __always_inline int enter(void *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct lib_stack *s;
	__u32 d;

	if (!tgid_traced(pid_tgid >> 32))
		return 0;
	s = bpf_task_storage_get(&lib_stacks, bpf_get_current_task_btf(), 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s)
		return 0;
	d = s->depth;
	if (d < LIB_STACK_DEPTH) {
		s->f[d & (LIB_STACK_DEPTH - 1)].ts = bpf_ktime_get_ns();
		s->f[d & (LIB_STACK_DEPTH - 1)].probe = bpf_get_attach_cookie(ctx);
	} else {
		count(&dropped, K_LIB_TOO_DEEP);
	}
	s->depth = d + 1;
	return 0;
}

static __always_inline int leave(void *ctx, long ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u64 probe = bpf_get_attach_cookie(ctx);
	__u64 ts = bpf_ktime_get_ns();
	struct lib_call_rec *r;
	struct lib_stack *s;
	__u32 d, i;

	if (!tgid_traced(pid_tgid >> 32))
		return 0;
	s = bpf_task_storage_get(&lib_stacks, bpf_get_current_task_btf(), 0, 0);
	if (!s || !s->depth)
		return 0;
	d = s->depth;
	if (d > LIB_STACK_DEPTH) {
		/* The call's frame was not kept (already counted). */
		s->depth = d - 1;
		return 0;
	}
	/*
	 * The innermost frame of this probe: frames above it lost their
	 * returns (longjmp, or a return before recording started).
	 */
	for (i = 0; i < LIB_STACK_DEPTH; i++) {
		struct lib_frame *f;

		if (i >= d)
			return 0;
		f = &s->f[(d - 1 - i) & (LIB_STACK_DEPTH - 1)];
		if (f->probe != probe)
			continue;
		s->depth = d - 1 - i;
		r = rec_reserve(K_LIB_CALL, sizeof(*r), (__u32)pid_tgid, f->ts);
		if (!r)
			return 0;
		r->exit_ts = ts;
		r->probe = probe;
		r->reserved = 0;
		r->ret = ret;
		rec_submit(r, K_LIB_CALL);
		return 0;
	}
	return 0;
}

/*
 * One body, two attach types: a multi link detaches with one RCU grace
 * period for all its functions instead of one per uprobe (~0.1 s each).
 */
SEC("uprobe")
int BPF_UPROBE(lib_enter)
{
	return enter(ctx);
}

SEC("uretprobe")
int BPF_URETPROBE(lib_exit, long ret)
{
	return leave(ctx, ret);
}

SEC("uprobe.multi")
int BPF_UPROBE(lib_enter_multi)
{
	return enter(ctx);
}

SEC("uretprobe.multi")
int BPF_URETPROBE(lib_exit_multi, long ret)
{
	return leave(ctx, ret);
}
