/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Shared by the jtrace BPF programs: the maps every program uses, the
 * process filter and the helpers that reserve, fill and submit records.
 * The records themselves are format/c/kernel_records.h's.
 */
#ifndef JTRACE_BPF_H
#define JTRACE_BPF_H

#include "kernel_records.h"
#include "jtrace.h"
#include "bits.bpf.h"

/*
 * The programs of all *.bpf.c files are linked into one object (build.rs),
 * so the maps below are defined __weak in every file that includes this
 * header and the linker keeps one of each: all programs share them.
 */

/* The one event stream; user space sets max_entries before load. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} events __weak SEC(".maps");

/*
 * The filter: processes (tgids) whose threads are recorded, one bit per
 * tgid (bits.bpf.h), so it can never be full; testing a tgid is one load
 * and a bit test, no helper call, which matters on sched_switch (every
 * switch of the system). Defined in sched.bpf.c (a global variable in
 * .bss, which user space reaches through the skeleton's mmap), declared
 * here for the others.
 */
extern __u64 traced_bits[TRACED_TGID_LIMIT / 64];

/*
 * Threads (by tid) that may have a page fault pending in their task
 * storage: set by faults.bpf.c, cleared by sched.bpf.c, so that a switch
 * looks at the task storage only then. Defined in sched.bpf.c.
 */
extern __u64 pf_bits[TRACED_TGID_LIMIT / 64];

/* Records submitted, per kind. Per-CPU so counting needs no atomics. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, N_KINDS);
	__type(key, __u32);
	__type(value, __u64);
} emitted __weak SEC(".maps");

/* Records lost because the ring buffer was full, per kind. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, N_KINDS);
	__type(key, __u32);
	__type(value, __u64);
} dropped __weak SEC(".maps");

/* task_state.sc_flags */
#define SC_IN_FLIGHT 1	/* sys_enter seen, sys_exit not yet (modes io, all) */
#define SC_BLOCKED 2	/* switched out voluntarily since sys_enter */

/*
 * Per-thread state shared by the scheduler, syscall and page-fault
 * programs (task storage: freed with the task, no size limit to tune).
 */
struct task_state {
	/* syscalls.bpf.c (modes io and all): the syscall in flight */
	__u32 sc_flags;		/* SC_* */
	__u64 sc_ts;		/* entry */
	__u64 sc_args[3];	/* first three arguments */
	__u32 sc_nr;
	/* faults.bpf.c: the last user page fault, emitted only if the thread
	 * then blocks outside a syscall without having left the CPU since
	 * (pf_bits says which threads may have one) */
	__u32 pf_pending;
	__u64 pf_ts;
	__u64 pf_addr;
	__u64 pf_ip;
	__u64 pf_err;
	/* close(): the fd resolved at entry (it is gone at exit) */
	struct fd_info sc_fd;
	/* sched.bpf.c: a throttled switch-out (throttle_bits says which
	 * threads have one): when (0: none), on which CPU, the cfs_rq and its
	 * throttled time then */
	__u64 thr_ts;
	__u64 thr_cfs_rq;
	__u64 thr_out;
	__u32 thr_cpu;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_state);
} task_states __weak SEC(".maps");

/* Unconsumed bytes above which a record wakes the consumer: a quarter of
 * the ring buffer, set by user space (__weak: one copy once linked). */
const volatile __u64 wake_bytes __weak = (16 << 20) / 4;

static __always_inline bool tgid_traced(__u32 tgid)
{
	/* pid 0 (the idle tasks) is never set. */
	return bit_test(traced_bits, tgid);
}

/* Adds a process to the filter; false if its tgid does not fit (cannot
 * happen below PID_MAX_LIMIT). */
static __always_inline bool trace_tgid(__u32 tgid)
{
	return bit_set(traced_bits, tgid);
}

static __always_inline void count(void *map, __u32 kind)
{
	__u64 *c = bpf_map_lookup_elem(map, &kind);

	if (c)
		(*c)++;
}

/* Fills the header of a record of `size` bytes. */
static __always_inline void rec_hdr_fill(void *rec, __u16 kind, __u32 size, __u32 tid, __u64 ts)
{
	struct rec_hdr *h = rec;

	h->kind = kind;
	h->len = size;
	h->tid = tid;
	h->ts = ts;
}

/*
 * Reserves a record of `size` bytes and fills its header; NULL (and a drop
 * counted) when the ring buffer is full. The kernel never waits for the
 * consumer.
 */
static __always_inline void *rec_reserve(__u16 kind, __u32 size, __u32 tid, __u64 ts)
{
	struct rec_hdr *h = bpf_ringbuf_reserve(&events, size, 0);

	if (!h) {
		count(&dropped, kind);
		return NULL;
	}
	rec_hdr_fill(h, kind, size, tid, ts);
	return h;
}

/* Whether a record submitted now should wake the consumer. */
static __always_inline __u64 wake_flags(bool wake)
{
	/* Unconsumed data beyond wake_bytes: the consumer's timer may be too slow. */
	if (wake || bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > wake_bytes)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

/*
 * Submits without waking the consumer unless the buffer is getting full
 * or `wake` is set: a wakeup per record would cost an irq_work on every
 * context switch, and the consumer polls on a short timer anyway.
 */
static __always_inline void rec_submit_wake(void *rec, __u16 kind, bool wake)
{
	__u64 flags = wake_flags(wake);

	count(&emitted, kind);
	bpf_ringbuf_submit(rec, flags);
}

static __always_inline void rec_submit(void *rec, __u16 kind)
{
	rec_submit_wake(rec, kind, false);
}

/* Copies a task name NUL-padded: reserved ring buffer memory is not zeroed. */
static __always_inline void copy_comm(__u8 *dst, const char *src)
{
	__builtin_memset(dst, 0, COMM_LEN);
	bpf_probe_read_kernel_str(dst, COMM_LEN, src);
}

/* Writes an EXIT, COMM or EXEC record with `flags` (EXEC_LEFT_OUT). */
static __always_inline void emit_task_flags(__u16 kind, __u32 tid, __u32 tgid, const char *comm, __u64 ts,
					    __u32 flags)
{
	struct task_rec *r = rec_reserve(kind, sizeof(*r), tid, ts);

	if (!r)
		return;
	r->tgid = tgid;
	r->flags = flags;
	copy_comm(r->comm, comm);
	rec_submit(r, kind);
}

/* Writes an EXIT, COMM or EXEC record. */
static __always_inline void emit_task(__u16 kind, __u32 tid, __u32 tgid, const char *comm, __u64 ts)
{
	emit_task_flags(kind, tid, tgid, comm, ts, 0);
}

#endif /* JTRACE_BPF_H */
