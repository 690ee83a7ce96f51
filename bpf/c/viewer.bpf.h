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
 * forks is recorded. docs/SECURITY.md, "What a trace reveals".
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

/*
 * Whether the viewer may trace `t`, as ptrace_may_access answers
 * PTRACE_MODE_READ for a user without capabilities: its objective
 * credentials are all the viewer's (uids and gids), it holds no
 * capability in the initial user namespace, and it is dumpable
 * (SUID_DUMP_USER in the low bits of mm->flags, a word or a bitmap by
 * kernel version: read as a word at the field's offset); or it lives in
 * a user namespace the viewer owns.
 */
static __always_inline bool viewer_may_trace(struct task_struct *t)
{
	const struct cred *c = BPF_CORE_READ(t, real_cred);
	struct user_namespace *ns = BPF_CORE_READ(c, user_ns);
	struct mm_struct *mm = BPF_CORE_READ(t, mm);
	unsigned long mm_flags = 0;
	__u64 caps = 0;

	if (!viewer_limited)
		return true;
	if (viewer_owns_userns(ns))
		return true;
	if (BPF_CORE_READ(c, uid.val) != viewer_uid || BPF_CORE_READ(c, euid.val) != viewer_uid ||
	    BPF_CORE_READ(c, suid.val) != viewer_uid || BPF_CORE_READ(c, gid.val) != viewer_gid ||
	    BPF_CORE_READ(c, egid.val) != viewer_gid || BPF_CORE_READ(c, sgid.val) != viewer_gid)
		return false;
	/* kernel_cap_t: one u64, or two u32 before 6.3; 8 bytes either way. */
	if (bpf_probe_read_kernel(&caps, sizeof(caps), (void *)c + bpf_core_field_offset(struct cred, cap_permitted)) ||
	    caps)
		return false;
	if (!mm || bpf_probe_read_kernel(&mm_flags, sizeof(mm_flags),
					 (void *)mm + bpf_core_field_offset(struct mm_struct, flags)))
		return false;
	return (mm_flags & 3) == 1;
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
