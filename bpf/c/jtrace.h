/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Shared by the BPF programs and the recorder in user space, which
 * generates its side with bindgen (bpf/build.rs): the slots of the per-kind
 * counters, the size of the process filter and the syscall modes. The
 * record kinds and layouts are the format's (format/c/kernel_records.h).
 */
#ifndef JTRACE_H
#define JTRACE_H

/* Size of the per-kind counter arrays `emitted` and `dropped`, indexed by
 * record kind (K_* of kernel_records.h) or by one of the slots below. */
#define N_KINDS 32
/* Slot of `dropped`: a block whose switch-out time a thread with a colliding
 * tid overwrote in the deferred stacks' table: its stacks were not taken
 * (stacks.bpf.h). */
#define K_BLOCK_UNTIMED 19
/* Slot of `dropped`, not a record kind: a process could not be added to
 * the filter (its tgid is beyond TRACED_TGID_LIMIT: never on Linux today). */
#define K_FILTER_FULL 0
/* Slot of `emitted`: switch-outs of throttled threads whose throttle
 * could not be timed (their cfs_rq timed no episode, or they left it
 * before it ended): that time stays `runqueue`. */
#define K_THROTTLE_UNTIMED 28
/* Slot of `dropped`: a library call nested deeper than the per-thread
 * stack (LIB_STACK_DEPTH of libcalls.bpf.c) was not recorded. */
#define K_LIB_TOO_DEEP 29
/* Slot of `dropped`: a block request could not be remembered between issue
 * and completion (in-flight map full). */
#define K_BLOCK_MAP_FULL 30
/* Slot of `emitted`: SWITCH_IN records inferred from a switch-out whose
 * switch-in was not seen (also counted as SWITCH_IN). */
#define K_INFERRED_SWITCH_IN 31

/*
 * Ids (tgids, tids) the bitmaps of the BPF side hold: PID_MAX_LIMIT, the
 * largest pid_max of a 64-bit kernel, so the process filter is never full.
 */
#define TRACED_TGID_LIMIT (4 << 20)

/* Which syscalls produce a record (`syscall_mode`; see syscall_ctx.bpf.h). */
#define SCM_NONE 0
#define SCM_BLOCKED 1
#define SCM_IO 2
#define SCM_ALL 3

/* Stacks (`stack_mode`, a bit set; see stacks.bpf.h). */
#define STACKS_KERNEL 1
#define STACKS_USER 2
/* Stacks of blocks taken after them, when long or sampled (deferred stacks,
 * stacks.bpf.h), not at every switch-out. */
#define STACKS_DEFERRED 4

/*
 * Stack ids with this bit are buckets of the kernel's stack map (a hash
 * of the frames' addresses: the recorder renumbers them when the viewer
 * may not see kernel addresses); the others come from a counter.
 */
#define KSTACK_MAP_ID 0x80000000u

/* Most frames of a stack the BPF programs capture. */
#define KSTACK_MAX 64
#define USTACK_MAX 128

/*
 * What the JVMTI agent tells the BPF programs about its JVM, by calling
 * jtrace_hotspot_layout() (agent/src/events/code.rs), which a uprobe
 * reads: where the template interpreter's code is (its frames hold the
 * Method* at fp - 3 words), and where a JavaThread keeps its last Java
 * frame (the frame anchor: sp, fp, pc), so that a walk from a thread
 * blocked in native or VM code finds its Java frames.
 */
struct hotspot_layout {
	__u64 interp_lo;
	__u64 interp_hi;
	__u32 anchor_sp;	/* offsets in JavaThread */
	__u32 anchor_fp;
	__u32 anchor_pc;
	__u32 reserved;
	__u64 code_lo;		/* the JVM's code seen so far */
	__u64 code_hi;
};

/*
 * A process that entered the followed cgroup subtree (map cgroup_joins of
 * tasks.bpf.c): when, and whether the BPF side traces it already (else
 * user space decides).
 */
struct cgroup_join {
	__u64 ts;
	__u32 traced;
	__u32 reserved;
};

/* Cookies of the agent's hooks in their multi link (agent_hooks_multi). */
#define AGENT_HOOK_HOTSPOT_LAYOUT 0
#define AGENT_HOOK_JAVA_THREAD 1

#endif /* JTRACE_H */
