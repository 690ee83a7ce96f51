/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * What the invoking user (the trace's viewer) may see of a process: a
 * trace handed to an ordinary user holds nothing of a process that user
 * could not ptrace. A traced process can become one only by an exec (of a
 * setuid, setgid or file-capability program; nothing else gives a
 * process of an ordinary user other credentials), so tasks.bpf.c asks at
 * sched_process_exec, where the new credentials and dumpability are
 * final, and leaves the process out from there: its EXEC carries
 * EXEC_LEFT_OUT and it leaves the filter, so neither it nor what it
 * forks is recorded. tasks.bpf.c asks the same of a process that joins
 * a followed cgroup. docs/SECURITY.md, "What a trace reveals".
 */
#ifndef JTRACE_VIEWER_BPF_H
#define JTRACE_VIEWER_BPF_H

#include "jtrace.bpf.h"

/* The viewer, set by user space unless it is root (who may trace all). */
const volatile bool viewer_limited = false;
const volatile __u32 viewer_uid = 0;
const volatile __u32 viewer_gid = 0;

/* Defined in sched.bpf.c: threads named in the stream (by tid). */
extern __u64 named_bits[TRACED_TGID_LIMIT / 64];

/*
 * Processes the launcher forked while recording for a viewer, by tgid:
 * until their exec they run jtrace's own code, as root and then as the
 * viewer but not dumpable, so they are followed from that exec on.
 */
__u64 launched_bits[TRACED_TGID_LIMIT / 64] SEC(".bss");

/* Deepest nesting of user namespaces (the kernel's limit). */
#define USERNS_MAX_DEPTH 32

/*
 * Whether the viewer owns user namespace `ns` or an ancestor below the
 * initial one, and so holds every capability in it (cap_capable): the
 * processes of a rootless container the viewer started.
 */
static __always_inline bool viewer_owns_userns(struct user_namespace *ns)
{
	for (int i = 0; i < USERNS_MAX_DEPTH; i++) {
		int level;

		if (!ns)
			return false;
		level = BPF_CORE_READ(ns, level);
		if (level <= 0)
			return false;
		if (level == 1)
			return BPF_CORE_READ(ns, owner.val) == viewer_uid;
		ns = BPF_CORE_READ(ns, parent);
	}
	return false;
}

/* Whether every uid and gid of credentials `c` is the viewer's. */
static __always_inline bool viewer_ids(const struct cred *c)
{
	return BPF_CORE_READ(c, uid.val) == viewer_uid && BPF_CORE_READ(c, euid.val) == viewer_uid &&
	       BPF_CORE_READ(c, suid.val) == viewer_uid && BPF_CORE_READ(c, gid.val) == viewer_gid &&
	       BPF_CORE_READ(c, egid.val) == viewer_gid && BPF_CORE_READ(c, sgid.val) == viewer_gid;
}

/* Whether credentials `c` hold a capability (kernel_cap_t: one u64, or
 * two u32 before 6.3; 8 bytes either way). Unreadable counts as held. */
static __always_inline bool holds_caps(const struct cred *c)
{
	__u64 caps = 0;

	return bpf_probe_read_kernel(&caps, sizeof(caps), (void *)c + bpf_core_field_offset(struct cred, cap_permitted)) ||
	       caps;
}

/* Whether memory `mm` is dumpable (SUID_DUMP_USER in the low bits of
 * mm->flags, a word or a bitmap by kernel version: read as a word at the
 * field's offset). */
static __always_inline bool dumpable(struct mm_struct *mm)
{
	unsigned long flags = 0;

	if (bpf_probe_read_kernel(&flags, sizeof(flags), (void *)mm + bpf_core_field_offset(struct mm_struct, flags)))
		return false;
	return (flags & 3) == 1;
}

/*
 * Whether the viewer may trace `t`: ptrace_may_access's answer to a user
 * of the initial user namespace without capabilities asking for
 * PTRACE_MODE_READ, as far as the task's credentials and memory tell (an
 * LSM's say is not asked). The one check of both places that decide it
 * in the kernel: an exec (tasks.bpf.c, which leaves out a process the
 * viewer may not trace) and a join of the followed cgroup (which traces
 * a joiner at once only if the viewer may; user space asks the kernel
 * about the others). Its three steps, as the kernel takes them:
 *  - every uid and gid the viewer's, or a user namespace the viewer owns
 *    (ptrace_has_cap on the task's credentials' namespace);
 *  - dumpable, or memory of a user namespace the viewer owns;
 *  - no capability in the viewer's (initial) namespace, or a namespace
 *    the viewer owns (cap_ptrace_access_check).
 * A task without memory (exiting) is refused.
 */
static __always_inline bool viewer_may_trace(struct task_struct *t)
{
	const struct cred *c = BPF_CORE_READ(t, real_cred);
	struct user_namespace *ns = BPF_CORE_READ(c, user_ns);
	struct mm_struct *mm = BPF_CORE_READ(t, mm);
	bool owned;

	if (!viewer_limited)
		return true;
	owned = viewer_owns_userns(ns);
	if (!owned && (!viewer_ids(c) || BPF_CORE_READ(ns, level) != 0 || holds_caps(c)))
		return false;
	if (!mm)
		return false;
	return dumpable(mm) || viewer_owns_userns(BPF_CORE_READ(mm, user_ns));
}

/*
 * Whether new process `ctgid` of `ptgid` is the launcher's (`launcher`),
 * to be followed from its exec (launched_bits) rather than now.
 */
static __always_inline bool launched_for_viewer(__u32 ptgid, __u32 ctgid, __u32 launcher)
{
	if (!viewer_limited || !launcher || ptgid != launcher || ctgid == ptgid)
		return false;
	bit_set(launched_bits, ctgid);
	return true;
}

/* Whether `tgid` is a process of the launcher's not exec'd yet; it is
 * not any more (it execs, or it exits). */
static __always_inline bool take_launched(__u32 tgid)
{
	if (!bit_test(launched_bits, tgid))
		return false;
	bit_clear(launched_bits, tgid);
	return true;
}

/*
 * Process `tgid` (its thread `tid` exec'd) is left out: off the filter,
 * and its thread's name forgotten (a recycled tid is named anew).
 */
static __always_inline void leave_out(__u32 tgid, __u32 tid)
{
	bit_clear(traced_bits, tgid);
	bit_clear(named_bits, tid);
}

#endif /* JTRACE_VIEWER_BPF_H */
