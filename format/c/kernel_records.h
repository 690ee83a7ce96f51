/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The records of the kernel event stream (kernel.bin), as the BPF programs
 * write them: the one definition of their kinds and layouts. The BPF side
 * includes this header (bpf/c/jtrace.bpf.h); the format crate generates its
 * Rust side from it with bindgen (format/build.rs), so a field moved here
 * moves in the reader too. docs/FORMAT.md describes the same bytes.
 *
 * The includer provides __u8 ... __u64, __s32 and __s64: vmlinux.h in BPF
 * programs, <linux/types.h> for bindgen. All records are little-endian
 * (x86-64 is the supported architecture) and multiples of 8 bytes.
 */
#ifndef JTRACE_KERNEL_RECORDS_H
#define JTRACE_KERNEL_RECORDS_H

/* Bytes of a task name (comm), NUL-padded. */
#define COMM_LEN 16

/* Record kinds of the kernel stream (format/src/kind.rs names them). */
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
/* Written by the recorder in user space, not by a BPF program. */
#define K_PROBE_DEF 12
#define K_FILE_PATH 13
/* Stacks: written by the BPF programs ... */
#define K_STACK 20
#define K_CPU_SAMPLE 21
/* ... and by the recorder in user space. */
#define K_MAPPING 22
#define K_KSYM 23
/* The first record of each chunk of a ring recording (recorder, user space). */
#define K_CHUNK 24
/* A task's ids in its own pid namespace (BPF at fork; the recorder for
 * the tasks of a process it starts following). */
#define K_TASK_NS 25

/* prev_tid of an inferred SWITCH_IN: the previous task is not known. */
#define PREV_TID_UNKNOWN 0xffffffff

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

/* Flag of a WAKEUP: the wakeup ran in a hard interrupt (a timer, a
 * device), so waker_tid is whichever task the interrupt found running,
 * not a waker. Records written before the flag existed have 0 here. */
#define WAKEUP_HARDIRQ 1

struct wakeup_rec {
	struct rec_hdr h;
	__u32 tgid;
	__u32 waker_tid;
	__u32 waker_tgid;
	__u32 target_cpu;
	__u32 new_task;
	__u32 flags;		/* WAKEUP_HARDIRQ */
};

struct fork_rec {
	struct rec_hdr h;
	__u32 tgid;
	__u32 parent_tid;
	__u32 parent_tgid;
	__u32 reserved;
	__u8 comm[COMM_LEN];
};

/* Flag of an EXEC: the process became one the invoking user may not
 * trace (setuid, setgid, file capabilities, not dumpable), so nothing of
 * it is recorded from this exec on (bpf/c/viewer.bpf.h). */
#define EXEC_LEFT_OUT 1

/* EXIT, COMM and EXEC. */
struct task_rec {
	struct rec_hdr h;
	__u32 tgid;
	__u32 flags;		/* EXEC_LEFT_OUT on an EXEC; else 0 */
	__u8 comm[COMM_LEN];
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

/* The socket or file behind an fd: a socket's family, protocol and
 * 4-tuple, or a file's device and inode. */
struct fd_object {
	__u16 family;
	__u16 protocol;
	__u16 sport;
	__u16 dport;
	__u8 saddr[16];
	__u8 daddr[16];
	__u64 dev;
	__u64 ino;
};

/* An fd as resolve_fd() (bpf/c/syscall_ctx.bpf.h) found it. */
struct fd_info {
	__u32 fd_kind;		/* FDK_* */
	__u32 reserved;
	struct fd_object obj;
};

/* Flags of a SYSCALL record: the thread switched out voluntarily inside. */
#define SYSCALL_BLOCKED 1
/* ... and the record was written at that switch-out, not at the exit. */
#define SYSCALL_AT_SWITCH 2

/* Holds an fd_info, its kind apart from its object: the order of the
 * stream since format version 1. */
struct syscall_rec {
	struct rec_hdr h;	/* ts = entry */
	__u64 exit_ts;
	__u32 nr;		/* x86-64 syscall number (syscall_nr.h) */
	__u32 fd_kind;		/* fd_info.fd_kind */
	__s64 ret;
	__s32 fd;
	__u32 flags;		/* SYSCALL_* */
	__u64 arg;
	struct fd_object obj;	/* fd_info.obj */
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

/*
 * Stacks. With stacks taken at every switch-out (not deferred: see
 * BLOCK_STACK), every SWITCH_OUT carries the ids of the thread's
 * kernel and user stacks at that switch-out (0: none) after its base
 * fields: `len` is then 40 instead of 32, and readers of the base fields
 * see no difference.
 */
struct switch_out_stacks_rec {
	struct switch_out_rec base;
	__u32 kstack;
	__u32 ustack;
};

/* stack_rec.flags */
#define STACK_KERNEL 1		/* kernel frames: one u64 pc each */
#define STACK_USER 2		/* user frames: a ustack_frame each */
#define STACK_TRUNCATED 4	/* the walk stopped at its depth limit */
#define STACK_JAVA_ANCHOR 8	/* Java frames came from the thread's last Java frame */

/* A user frame: its pc and, for a frame of the JVM's interpreter, the
 * Method* of the interpreted method read from the frame (else 0). */
struct ustack_frame {
	__u64 pc;
	__u64 method;
};

/*
 * The definition of a stack id, written once (the first time it is used;
 * again only if the kernel's dedup table forgot it): `n` frames follow,
 * innermost first, u64 pcs (STACK_KERNEL) or ustack_frames (STACK_USER).
 * Ids are unique within the stream; tgid is 0 for kernel stacks. The
 * header tid is the thread that used it first.
 */
struct stack_rec {
	struct rec_hdr h;
	__u32 id;
	__u32 tgid;
	__u32 flags;		/* STACK_* */
	__u32 n;
};

/* A CPU sample of a traced thread (perf clock), with its stacks. */
struct cpu_sample_rec {
	struct rec_hdr h;
	__u32 tgid;
	__u32 cpu;
	__u32 kstack;
	__u32 ustack;
};

/*
 * A traced task in a pid namespace other than the initial one (a
 * container's): the header's tid is its host tid (the identity of every
 * record), and this is how the task is known inside, where a JVM's agent
 * learns its threads' tids. Written when the task is forked there (from
 * its struct pid) and, by the recorder, for each task of a process it
 * starts following there (attach, record). Nested namespaces: the ids in
 * the task's own (deepest) namespace.
 */
struct task_ns_rec {
	struct rec_hdr h;
	__u32 tgid;		/* host */
	__u32 ns_tid;
	__u32 ns_tgid;
	__u32 level;		/* depth of the namespace: 1 is a child of the initial one */
	__u64 pidns_ino;	/* the namespace's inode (/proc/PID/ns/pid) */
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
_Static_assert(sizeof(struct switch_out_stacks_rec) == 40, "switch_out_stacks_rec");
_Static_assert(sizeof(struct stack_rec) == 32, "stack_rec");
_Static_assert(sizeof(struct ustack_frame) == 16, "ustack_frame");
_Static_assert(sizeof(struct cpu_sample_rec) == 32, "cpu_sample_rec");
_Static_assert(sizeof(struct task_ns_rec) == 40, "task_ns_rec");

/*
 * CPU-quota throttling and steal (bpf/c/sched.bpf.c, bpf/c/stacks.bpf.c).
 * Kinds 26 and 27; their records follow.
 */
#define K_THROTTLE 26
#define K_STEAL 27

/* Flag of a THROTTLE: the unthrottle computed from the cfs_rq's throttled
 * time fell after the switch-in (more than one throttle episode, or the
 * clocks' drift): `to` is the switch-in. */
#define THROTTLE_CLAMPED 1

/*
 * A thread held off CPU by its cgroup's CPU quota (CFS bandwidth): from
 * its switch-out (the header ts), at which it was throttled, until it
 * was queued to run again (`to`); from there to its switch-in it waited
 * for a CPU. Written at that switch-in.
 */
struct throttle_rec {
	struct rec_hdr h;	/* ts = the switch-out */
	__u64 to;		/* unthrottled: queued again */
	__u32 cpu;		/* CPU of the throttled cfs_rq */
	__u32 flags;		/* THROTTLE_* */
};

/*
 * Steal in an on-CPU stretch of a thread (paravirt steal clock): the
 * hypervisor ran something else on the vCPU for `ns` of the stretch from
 * `from` to the header ts (the thread's switch-out, or a CPU sample).
 */
struct steal_rec {
	struct rec_hdr h;	/* ts = end of the stretch */
	__u64 from;		/* its start: the switch-in or the previous CPU sample */
	__u64 ns;		/* stolen */
	__u32 cpu;
	__u32 reserved;
};

_Static_assert(sizeof(struct throttle_rec) == 32, "throttle_rec");
_Static_assert(sizeof(struct steal_rec) == 40, "steal_rec");

/*
 * Stacks taken after a block (bpf/c/stacks.bpf.h, "deferred stacks"):
 * kind 14, its record follows.
 */
#define K_BLOCK_STACK 14

/* block_stack_rec.flags */
#define BLOCK_STACK_SAMPLED 1	/* a short block, one of the few sampled per CPU */
#define BLOCK_STACK_NO_USER 2	/* the user stack could not be taken (see below) */

/*
 * The stacks of a thread's block, taken when the block turned out long
 * (or was sampled), not at its switch-out: the kernel stack at the
 * switch-in that ended it (frozen while the thread was off CPU), the user
 * stack when the thread returned to user mode (its registers and stack
 * unchanged since the switch-out). They belong to the thread's SWITCH_OUT
 * at `out_ts`, which carries no stack ids itself. BLOCK_STACK_NO_USER: the
 * thread's user registers had moved before the walk (a signal handler) or
 * it never returned to user mode; ustack is 0.
 */
struct block_stack_rec {
	struct rec_hdr h;	/* ts = when the stacks were taken */
	__u64 out_ts;		/* the SWITCH_OUT of the block */
	__u32 tgid;
	__u32 flags;		/* BLOCK_STACK_* */
	__u32 kstack;		/* ids as in switch_out_stacks_rec; 0: none */
	__u32 ustack;
};

_Static_assert(sizeof(struct block_stack_rec) == 40, "block_stack_rec");

#endif /* JTRACE_KERNEL_RECORDS_H */
