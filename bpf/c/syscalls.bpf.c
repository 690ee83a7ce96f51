// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * Full syscall records (modes io and all only; see syscall_ctx.bpf.h): entry
 * and exit on the raw syscall tracepoints (tp_btf, no tracefs), the syscall
 * in flight kept in the thread's task storage, one SYSCALL record at exit
 * with the result. These programs are not even loaded in modes none and
 * blocked: attaching them puts every task of the system on the slow
 * syscall path, which costs about 0.5 µs per syscall.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "jtrace.bpf.h"
#include "arch.bpf.h"
#include "syscall_ctx.bpf.h"

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct task_struct *t;
	struct task_state *st;

	if (!tgid_traced(pid_tgid >> 32))
		return 0;
	t = bpf_get_current_task_btf();
	st = bpf_task_storage_get(&task_states, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st)
		return 0;
	st->sc_ts = bpf_ktime_get_ns();
	st->sc_nr = id;
	st->sc_flags = SC_IN_FLIGHT;
	syscall_args(regs, st->sc_args);
	/* After close() the fd is gone: resolve it now. */
	if (id == NR_close)
		resolve_fd(t, (int)st->sc_args[0], &st->sc_fd);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct task_struct *t;
	struct task_state *st;
	struct fd_info fi;
	__u64 ts, arg;
	__s64 fd;
	__u32 nr, flags;
	int cls;
	bool blocked;

	if (!tgid_traced(pid_tgid >> 32))
		return 0;
	t = bpf_get_current_task_btf();
	st = bpf_task_storage_get(&task_states, t, 0, 0);
	if (!st || !(st->sc_flags & SC_IN_FLIGHT))
		return 0;
	ts = bpf_ktime_get_ns();
	flags = st->sc_flags;
	st->sc_flags = 0;
	nr = st->sc_nr;
	blocked = flags & SC_BLOCKED;
	cls = classify(nr);
	if (!blocked && cls == C_UNLISTED)
		return 0;
	/* Not blocked, only I/O wanted: futex, sleep and select have no fd. */
	if (!blocked && syscall_mode == SCM_IO && (cls == C_FUTEX || cls == C_SLEEP || cls == C_SELECT))
		return 0;

	syscall_detail(t, nr, cls, st->sc_args, ret, &fi, &fd, &arg);
	if (cls == C_CLOSE)
		fi = st->sc_fd;
	if (!blocked && syscall_mode == SCM_IO && !is_io_kind(fi.fd_kind))
		return 0;
	emit_syscall((__u32)pid_tgid, st->sc_ts, ts, nr, ret, fd, blocked ? SYSCALL_BLOCKED : 0, arg, &fi);
	return 0;
}
