// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * Task lifecycle events of the traced processes: fork, exit, exec and
 * rename, and the filter following the traced process tree (a new process
 * of the launcher or of a traced process is traced).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "jtrace.bpf.h"
#include "viewer.bpf.h"

/* Process that launches the traced command (jtrace itself); 0 = none. */
const volatile __u32 launcher_tgid = 0;

/*
 * The cgroup subtree whose joiners are followed (`--cgroup`): its top's
 * id (the kernfs node id, its directory's inode number; 0: none), depth
 * and hierarchy (0: v2; else the v1 hierarchy of the cpu controller).
 * A process that enters the subtree while recording (moved in, or, on
 * v2, cloned into it with CLONE_INTO_CGROUP) is traced from that instant
 * if the viewer may trace it as far as its credentials tell
 * (viewer_may_trace), else noted for user space to ask the kernel.
 */
const volatile __u64 follow_cgroup_id = 0;
const volatile __u32 follow_cgroup_level = 0;
const volatile __s32 follow_hierarchy = 0;
const volatile bool follow_v2 = false;

/* Deepest cgroup below the followed one that counts (as user space's walk). */
#define FOLLOW_MAX_DEPTH 64

/*
 * Processes that entered the followed subtree, for user space (which
 * names their existing tasks' namespaces and reads their cgroup, or first
 * asks whether the invoking user may trace them): tgid -> join.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct cgroup_join);
} cgroup_joins SEC(".maps");

/*
 * TASK_NS for a traced task forked in a pid namespace other than the
 * initial one: its tid and tgid as that namespace numbers them (what the
 * JVM's agent there records), with the namespace's inode. A task's own
 * namespace is the deepest level of its struct pid; its thread group's
 * number there is the group leader's.
 */
static __always_inline void note_pid_namespace(struct task_struct *t, __u32 tid, __u32 tgid, __u64 ts)
{
	struct pid *pid = BPF_CORE_READ(t, thread_pid);
	struct pid *lpid = BPF_CORE_READ(t, group_leader, thread_pid);
	unsigned int level = BPF_CORE_READ(pid, level);
	struct task_ns_rec *r;
	struct upid up, lup;

	if (level == 0 || level > 32)
		return;
	if (bpf_probe_read_kernel(&up, sizeof(up), &pid->numbers[level]) ||
	    bpf_probe_read_kernel(&lup, sizeof(lup), &lpid->numbers[level]))
		return;
	r = rec_reserve(K_TASK_NS, sizeof(*r), tid, ts);
	if (!r)
		return;
	r->tgid = tgid;
	r->ns_tid = up.nr;
	r->ns_tgid = lup.nr;
	r->level = level;
	r->pidns_ino = BPF_CORE_READ(up.ns, ns.inum);
	rec_submit(r, K_TASK_NS);
}

/* Whether cgroup `c` is the followed one or beneath it. */
static __always_inline bool in_followed_subtree(struct cgroup *c)
{
	int up;

	if (!c || BPF_CORE_READ(c, root, hierarchy_id) != follow_hierarchy)
		return false;
	up = BPF_CORE_READ(c, level) - (int)follow_cgroup_level;
	if (up < 0 || up > FOLLOW_MAX_DEPTH)
		return false;
	for (int i = 0; i < FOLLOW_MAX_DEPTH && i < up; i++) {
		c = BPF_CORE_READ(c, self.parent, cgroup);
		if (!c)
			return false;
	}
	return BPF_CORE_READ(c, kn, id) == follow_cgroup_id;
}

/*
 * Task `t` entered the followed subtree: its process is traced from now on
 * (or noted, for user space to decide), and user space told.
 */
static __always_inline void cgroup_join(struct task_struct *t, __u64 ts)
{
	__u32 tgid = BPF_CORE_READ(t, tgid);
	__u32 tid = BPF_CORE_READ(t, pid);
	struct cgroup_join j = { .ts = ts, .traced = 0 };

	if (tgid_traced(tgid))
		return;
	if (viewer_may_trace(t)) {
		if (!trace_tgid(tgid)) {
			count(&dropped, K_FILTER_FULL);
			return;
		}
		j.traced = 1;
		note_pid_namespace(t, tid, tgid, ts);
	}
	/* Full (thousands of joins between two looks): a process not yet
	 * traced is not followed, and counted so. */
	if (bpf_map_update_elem(&cgroup_joins, &tgid, &j, BPF_NOEXIST) && !j.traced)
		count(&dropped, K_FILTER_FULL);
}

/*
 * A task moved into a cgroup (a write to cgroup.procs or tasks: the whole
 * thread group or one thread; on v1 once per hierarchy it is moved in).
 */
SEC("tp_btf/cgroup_attach_task")
int BPF_PROG(cgroup_attach_task, struct cgroup *dst_cgrp, const char *path, struct task_struct *task,
	     bool threadgroup)
{
	if (follow_cgroup_id && in_followed_subtree(dst_cgrp))
		cgroup_join(task, bpf_ktime_get_ns());
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u64 ts = bpf_ktime_get_ns();
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	__u32 cpid = BPF_CORE_READ(child, pid);
	struct fork_rec *r;

	/* For a viewer, the launcher's new process from its exec on. */
	if (launched_for_viewer(ptgid, ctgid, launcher_tgid))
		return 0;
	/*
	 * A new process (not a new thread) of the launcher or of a traced
	 * process joins the filter: this follows the process tree of the
	 * command without tracing the launcher's own threads.
	 */
	if (ctgid != ptgid && ((launcher_tgid && ptgid == launcher_tgid) || tgid_traced(ptgid)) &&
	    !trace_tgid(ctgid))
		count(&dropped, K_FILTER_FULL);
	/* v2: a process cloned straight into the followed subtree
	 * (CLONE_INTO_CGROUP, as container runtimes start one) joins it. */
	if (follow_cgroup_id && follow_v2 && ctgid != ptgid && !tgid_traced(ctgid) &&
	    in_followed_subtree(BPF_CORE_READ(child, cgroups, dfl_cgrp)))
		cgroup_join(child, ts);
	if (!tgid_traced(ctgid))
		return 0;
	r = rec_reserve(K_FORK, sizeof(*r), cpid, ts);
	if (!r)
		return 0;
	r->tgid = ctgid;
	r->parent_tid = BPF_CORE_READ(parent, pid);
	r->parent_tgid = ptgid;
	r->reserved = 0;
	copy_comm(r->comm, child->comm);
	rec_submit(r, K_FORK);
	note_pid_namespace(child, cpid, ctgid, ts);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit, struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);

	take_launched(tgid);
	/*
	 * tgid stays in the filter: the dead thread still has its last
	 * switch-out to come.
	 */
	if (tgid_traced(tgid))
		emit_task(K_EXIT, BPF_CORE_READ(p, pid), tgid, p->comm, bpf_ktime_get_ns());
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(sched_process_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	__u32 tid = BPF_CORE_READ(p, pid);
	__u64 ts = bpf_ktime_get_ns();
	bool launched = take_launched(tgid);
	bool out;

	if (!tgid_traced(tgid) && !launched)
		return 0;
	/* comm already holds the new program's name here, and the
	 * credentials are the new program's (viewer.bpf.h). */
	out = !viewer_may_trace(p);
	emit_task_flags(K_EXEC, tid, tgid, p->comm, ts, out ? EXEC_LEFT_OUT : 0);
	if (out) {
		leave_out(tgid, tid);
	} else if (launched) {
		if (!trace_tgid(tgid))
			count(&dropped, K_FILTER_FULL);
		note_pid_namespace(p, tid, tgid, ts);
	}
	return 0;
}

SEC("tp_btf/task_rename")
int BPF_PROG(task_rename, struct task_struct *task, const char *comm)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);

	/* Fires before task->comm changes: the new name is the argument. */
	if (tgid_traced(tgid))
		emit_task(K_COMM, BPF_CORE_READ(task, pid), tgid, comm, bpf_ktime_get_ns());
	return 0;
}
