/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Shared by the jtrace BPF programs: the kernel record layouts (they must
 * match format/src/lib.rs byte for byte), the maps every program uses, and
 * the filter / emit helpers.
 */
#ifndef JTRACE_H
#define JTRACE_H

#define TASK_COMM_LEN 16

/* Record kinds: format/src/lib.rs `kind`. */
#define K_SWITCH_OUT 1
#define K_SWITCH_IN 2
#define K_WAKEUP 3
#define K_FORK 4
#define K_EXIT 5
#define K_COMM 6
#define K_EXEC 7
/* Counter slot, not a record kind: a process could not be added to the filter. */
#define K_FILTER_FULL 0
/* Counter slot of `emitted`, not a record kind: SWITCH_IN records inferred
 * from a switch-out whose switch-in was not seen (also counted as SWITCH_IN). */
#define K_INFERRED_SWITCH_IN 31
/* prev_tid of an inferred SWITCH_IN: the previous task is not known. */
#define PREV_TID_UNKNOWN 0xffffffff
/* Size of the per-kind counter arrays. */
#define N_KINDS 32

/* Every record starts with this 16-byte header; len is the total size. */
struct rec_hdr {
	__u16 kind;
	__u16 len;
	__u32 tid;
	__u64 ts;
};

struct switch_out_rec {
	struct rec_hdr h;
	__u32 tgid;
	__u32 prev_state;
	__u32 cpu;
	__u32 next_tid;
};

struct switch_in_rec {
	struct rec_hdr h;
	__u32 tgid;
	__u32 cpu;
	__u32 prev_tid;
	__u32 reserved;
};

struct wakeup_rec {
	struct rec_hdr h;
	__u32 tgid;
	__u32 waker_tid;
	__u32 waker_tgid;
	__u32 target_cpu;
	__u32 new_task;
	__u32 reserved;
};

struct fork_rec {
	struct rec_hdr h;
	__u32 tgid;
	__u32 parent_tid;
	__u32 parent_tgid;
	__u32 reserved;
	char comm[TASK_COMM_LEN];
};

/* EXIT, COMM and EXEC. */
struct task_rec {
	struct rec_hdr h;
	__u32 tgid;
	__u32 reserved;
	char comm[TASK_COMM_LEN];
};

/* The reader skips records by len and requires 8-byte multiples. */
_Static_assert(sizeof(struct rec_hdr) == 16, "rec_hdr");
_Static_assert(sizeof(struct switch_out_rec) == 32, "switch_out_rec");
_Static_assert(sizeof(struct switch_in_rec) == 32, "switch_in_rec");
_Static_assert(sizeof(struct wakeup_rec) == 40, "wakeup_rec");
_Static_assert(sizeof(struct fork_rec) == 48, "fork_rec");
_Static_assert(sizeof(struct task_rec) == 40, "task_rec");

/* The one event stream; user space sets max_entries before load. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} events SEC(".maps");

/* The filter: processes (tgids) whose threads are recorded. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u8);
} traced_tgids SEC(".maps");

/* Records submitted, per kind. Per-CPU so counting needs no atomics. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, N_KINDS);
	__type(key, __u32);
	__type(value, __u64);
} emitted SEC(".maps");

/* Records lost because the ring buffer was full, per kind. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, N_KINDS);
	__type(key, __u32);
	__type(value, __u64);
} dropped SEC(".maps");

static __always_inline bool tgid_traced(__u32 tgid)
{
	return bpf_map_lookup_elem(&traced_tgids, &tgid) != NULL;
}

static __always_inline void count(void *map, __u32 kind)
{
	__u64 *c = bpf_map_lookup_elem(map, &kind);

	if (c)
		(*c)++;
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
	h->kind = kind;
	h->len = size;
	h->tid = tid;
	h->ts = ts;
	return h;
}

/*
 * Submits without waking the consumer unless the buffer is getting full:
 * a wakeup per record would cost an irq_work on every context switch, and
 * the consumer polls on a short timer anyway.
 */
static __always_inline void rec_submit(void *rec, __u16 kind)
{
	__u64 flags = BPF_RB_NO_WAKEUP;

	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >
	    bpf_ringbuf_query(&events, BPF_RB_RING_SIZE) / 4)
		flags = BPF_RB_FORCE_WAKEUP;
	count(&emitted, kind);
	bpf_ringbuf_submit(rec, flags);
}

/* Copies a task name NUL-padded: reserved ring buffer memory is not zeroed. */
static __always_inline void copy_comm(char *dst, const char *src)
{
	__builtin_memset(dst, 0, TASK_COMM_LEN);
	bpf_probe_read_kernel_str(dst, TASK_COMM_LEN, src);
}

#endif /* JTRACE_H */
