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
#define K_SYSCALL 8
#define K_PAGE_FAULT 9
#define K_BLOCK_IO 10
#define K_LIB_CALL 11
/* Counter slot, not a record kind: a process could not be added to the
 * filter (its tgid is beyond TRACED_TGID_LIMIT: never on Linux today). */
#define K_FILTER_FULL 0
/* Counter slot of `dropped`, not a record kind: a library call nested deeper
 * than the per-thread stack (LIB_STACK_DEPTH) was not recorded. */
#define K_LIB_TOO_DEEP 29
/* Counter slot of `dropped`, not a record kind: a block request could not be
 * remembered between issue and completion (in-flight map full). */
#define K_BLOCK_MAP_FULL 30
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

/* What the kernel knows about the file behind an fd (format `fd_kind`). */
#define FDK_NONE 0
#define FDK_SOCKET 1
#define FDK_FILE 2
#define FDK_PIPE 3
#define FDK_BLOCK 4
#define FDK_CHAR 5
#define FDK_ANON 6
#define FDK_DIR 7
#define FDK_OTHER 8

/* The fd part of a SYSCALL record, in record order from fd_kind's
 * neighbours on: resolved by resolve_fd() in syscalls.bpf.c. */
struct fd_info {
	__u32 fd_kind;
	__u16 family;
	__u16 protocol;
	__u16 sport;
	__u16 dport;
	__u8 saddr[16];
	__u8 daddr[16];
	__u64 dev;
	__u64 ino;
};

/* SYSCALL_BLOCKED of format: the thread switched out voluntarily inside. */
#define SYSCALL_BLOCKED 1
/* SYSCALL_AT_SWITCH of format: written at that switch-out, not at the exit. */
#define SYSCALL_AT_SWITCH 2

struct syscall_rec {
	struct rec_hdr h;	/* ts = entry */
	__u64 exit_ts;
	__u32 nr;
	__u32 fd_kind;
	__s64 ret;
	__s32 fd;
	__u32 flags;
	__u64 arg;
	__u16 family;
	__u16 protocol;
	__u16 sport;
	__u16 dport;
	__u8 saddr[16];
	__u8 daddr[16];
	__u64 dev;
	__u64 ino;
};

struct page_fault_rec {
	struct rec_hdr h;
	__u64 address;
	__u64 ip;
	__u64 error_code;
};

struct block_io_rec {
	struct rec_hdr h;	/* ts = issue, tid = issuer */
	__u64 complete_ts;
	__u64 dev;
	__u64 sector;
	__u32 bytes;
	__u32 write;
};

struct lib_call_rec {
	struct rec_hdr h;	/* ts = call */
	__u64 exit_ts;
	__u32 probe;
	__u32 reserved;
	__u64 ret;
};

/* The reader skips records by len and requires 8-byte multiples. */
_Static_assert(sizeof(struct rec_hdr) == 16, "rec_hdr");
_Static_assert(sizeof(struct switch_out_rec) == 32, "switch_out_rec");
_Static_assert(sizeof(struct switch_in_rec) == 32, "switch_in_rec");
_Static_assert(sizeof(struct wakeup_rec) == 40, "wakeup_rec");
_Static_assert(sizeof(struct fork_rec) == 48, "fork_rec");
_Static_assert(sizeof(struct task_rec) == 40, "task_rec");
_Static_assert(sizeof(struct syscall_rec) == 112, "syscall_rec");
_Static_assert(sizeof(struct page_fault_rec) == 40, "page_fault_rec");
_Static_assert(sizeof(struct block_io_rec) == 48, "block_io_rec");
_Static_assert(sizeof(struct lib_call_rec) == 40, "lib_call_rec");

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
 * tgid. Sized for PID_MAX_LIMIT (the largest pid_max of a 64-bit kernel),
 * so it can never be full; testing a tgid is one load and a bit test, no
 * helper call, which matters on sched_switch (every switch of the system).
 * Defined in sched.bpf.c (a global variable in .bss, which user space
 * reaches through the skeleton's mmap), declared here for the others.
 */
#define TRACED_TGID_LIMIT (4 << 20)
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
	return tgid < TRACED_TGID_LIMIT && (traced_bits[tgid / 64] & (1ULL << (tgid % 64)));
}

/* Adds a process to the filter; false if its tgid does not fit (cannot
 * happen below PID_MAX_LIMIT). Atomic: forks on other CPUs set bits of the
 * same word. */
static __always_inline bool trace_tgid(__u32 tgid)
{
	if (tgid >= TRACED_TGID_LIMIT)
		return false;
	__sync_fetch_and_or(&traced_bits[tgid / 64], 1ULL << (tgid % 64));
	return true;
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
static __always_inline void rec_hdr_fill(void *rec, __u16 kind, __u32 size, __u32 tid, __u64 ts)
{
	struct rec_hdr *h = rec;

	h->kind = kind;
	h->len = size;
	h->tid = tid;
	h->ts = ts;
}

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
static __always_inline void copy_comm(char *dst, const char *src)
{
	__builtin_memset(dst, 0, TASK_COMM_LEN);
	bpf_probe_read_kernel_str(dst, TASK_COMM_LEN, src);
}

#endif /* JTRACE_H */
