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

/* Process that launches the traced command (jtrace itself); 0 = none. */
const volatile __u32 launcher_tgid = 0;

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

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u64 ts = bpf_ktime_get_ns();
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	__u32 cpid = BPF_CORE_READ(child, pid);
	struct fork_rec *r;

	/*
	 * A new process (not a new thread) of the launcher or of a traced
	 * process joins the filter: this follows the process tree of the
	 * command without tracing the launcher's own threads.
	 */
	if (ctgid != ptgid && ((launcher_tgid && ptgid == launcher_tgid) || tgid_traced(ptgid)) &&
	    !trace_tgid(ctgid))
		count(&dropped, K_FILTER_FULL);
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

	/* comm already holds the new program's name here. */
	if (tgid_traced(tgid))
		emit_task(K_EXEC, BPF_CORE_READ(p, pid), tgid, p->comm, bpf_ktime_get_ns());
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
