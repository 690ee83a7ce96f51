/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * What a syscall is about, shared by the two places that write SYSCALL
 * records: sys_exit (syscalls.bpf.c, modes io and all) and the voluntary
 * switch-out inside a syscall (sched.bpf.c, every mode but none). The
 * syscall is classified by number, its fd resolved in the kernel (kind of
 * file, socket 4-tuple, or the file's device and inode) and one record
 * written.
 *
 * Which syscalls produce a record (syscall_mode, set by user space):
 *   SCM_NONE    none: no SYSCALL record, no syscall program attached
 *   SCM_BLOCKED one record per voluntary switch-out inside a syscall
 *               (SYSCALL_AT_SWITCH), read from the registers the task saved
 *               at syscall entry: what the off-CPU attribution needs, with
 *               no syscall hook at all (default)
 *   SCM_IO      the above, plus a record at the exit of every syscall that
 *               blocked and of every listed syscall (see classify()) on a
 *               socket, regular file, block device or directory, blocked
 *               or not; open/openat/openat2 of files included
 *   SCM_ALL     the above, plus every listed syscall whatever its fd
 */
#ifndef JTRACE_SYSCALL_CTX_BPF_H
#define JTRACE_SYSCALL_CTX_BPF_H

#include <bpf/bpf_endian.h>
#include "jtrace.bpf.h"
#include "syscall_nr.h"

/* SCM_* (jtrace.h); set by user space before load. __weak: every object
 * that includes this header defines it, the linker keeps one (as for the
 * maps of jtrace.bpf.h). */
const volatile __u32 syscall_mode __weak = SCM_BLOCKED;

/* How a syscall's fd and `arg` are found. */
#define C_UNLISTED 0	/* recorded only if it blocked; arg = first argument */
#define C_FD 1		/* first argument is an fd; arg = third argument */
#define C_CLOSE 2	/* fd resolved at entry; arg = 0 */
#define C_POLL 3	/* first pollfd's fd; arg = nfds */
#define C_SELECT 4	/* no fd; arg = nfds */
#define C_OPEN 5	/* the returned fd; arg = flags */
#define C_FUTEX 6	/* no fd; arg = uaddr | op << 48 */
#define C_SLEEP 7	/* no fd; arg = requested ns (absolute if TIMER_ABSTIME) */

static __always_inline int classify(__u32 nr)
{
	switch (nr) {
	case NR_read:
	case NR_write:
	case NR_pread64:
	case NR_pwrite64:
	case NR_readv:
	case NR_writev:
	case NR_preadv:
	case NR_pwritev:
	case NR_preadv2:
	case NR_pwritev2:
	case NR_recvfrom:
	case NR_recvmsg:
	case NR_recvmmsg:
	case NR_sendto:
	case NR_sendmsg:
	case NR_sendmmsg:
	case NR_accept:
	case NR_accept4:
	case NR_connect:
	case NR_epoll_wait:
	case NR_epoll_pwait:
	case NR_epoll_pwait2:
	case NR_fsync:
	case NR_fdatasync:
	case NR_sync_file_range:
		return C_FD;
	case NR_close:
		return C_CLOSE;
	case NR_poll:
	case NR_ppoll:
		return C_POLL;
	case NR_select:
	case NR_pselect6:
		return C_SELECT;
	case NR_open:
	case NR_openat:
	case NR_openat2:
		return C_OPEN;
	case NR_futex:
		return C_FUTEX;
	case NR_nanosleep:
	case NR_clock_nanosleep:
		return C_SLEEP;
	}
	return C_UNLISTED;
}

/* Magic numbers of the pseudo file systems (include/uapi/linux/magic.h). */
#define SOCKFS_MAGIC 0x534F434B
#define PIPEFS_MAGIC 0x50495045
#define ANON_INODE_FS_MAGIC 0x09041934

#define S_IFMT 0170000
#define S_IFSOCK 0140000
#define S_IFREG 0100000
#define S_IFBLK 0060000
#define S_IFDIR 0040000
#define S_IFCHR 0020000
#define S_IFIFO 0010000

#define AF_INET 2
#define AF_INET6 10

/* The socket behind a sockfs file: family, protocol and 4-tuple. */
static __always_inline void resolve_socket(struct file *f, struct fd_info *out)
{
	struct socket *sock = BPF_CORE_READ(f, private_data);
	struct sock *sk = BPF_CORE_READ(sock, sk);
	__u16 family;

	if (!sk)
		return;
	family = BPF_CORE_READ(sk, __sk_common.skc_family);
	out->obj.family = family;
	out->obj.protocol = BPF_CORE_READ(sk, sk_protocol);
	if (family == AF_INET) {
		out->obj.sport = BPF_CORE_READ(sk, __sk_common.skc_num);
		out->obj.dport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
		bpf_core_read(out->obj.saddr, 4, &sk->__sk_common.skc_rcv_saddr);
		bpf_core_read(out->obj.daddr, 4, &sk->__sk_common.skc_daddr);
	} else if (family == AF_INET6) {
		out->obj.sport = BPF_CORE_READ(sk, __sk_common.skc_num);
		out->obj.dport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
		bpf_core_read(out->obj.saddr, 16, &sk->__sk_common.skc_v6_rcv_saddr);
		bpf_core_read(out->obj.daddr, 16, &sk->__sk_common.skc_v6_daddr);
	}
}

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

/*
 * The kernel's BPF feature enum (Linux 6.17+), under a local flavour name
 * so that this builds against any vmlinux.h: libbpf resolves the CO-RE
 * "enum value exists" check at load, 0 on kernels without it.
 */
enum bpf_features___jtrace {
	BPF_FEAT_RDONLY_CAST_TO_VOID___jtrace = 0,
};

/*
 * current->files->fdt->fd[fd]: the kind of file, then the socket or the
 * inode. Leaves `out` zeroed (FDK_NONE) if the fd is not open. Direct
 * (faulting-safe) loads through BTF pointers instead of probe-read helper
 * calls; the fd array slot, which is not a BTF type, too on Linux 6.17+.
 */
static __always_inline void resolve_fd(struct task_struct *t, __s64 fd, struct fd_info *out)
{
	struct fdtable *fdt = t->files->fdt;
	struct file *f = NULL;
	struct inode *ino;
	struct super_block *sb;
	unsigned long magic;
	__u32 mode;

	__builtin_memset(out, 0, sizeof(*out));
	if (fd < 0 || !fdt || fd >= fdt->max_fds)
		return;
	/*
	 * The fd array slot has no BTF type. Where the kernel allows a cast to
	 * void, a direct (exception-guarded) load reads it; elsewhere a
	 * probe-read helper call, which costs ≈65 ns more per record here.
	 */
	if (bpf_core_enum_value_exists(enum bpf_features___jtrace, BPF_FEAT_RDONLY_CAST_TO_VOID___jtrace))
		f = ((struct file **)bpf_rdonly_cast(fdt->fd, 0))[fd];
	else if (bpf_probe_read_kernel(&f, sizeof(f), (void *)fdt->fd + fd * sizeof(f)))
		return;
	if (!f)
		return;
	f = bpf_rdonly_cast(f, bpf_core_type_id_kernel(struct file));
	ino = f->f_inode;
	if (!ino)
		return;
	sb = ino->i_sb;
	mode = ino->i_mode & S_IFMT;
	magic = sb->s_magic;
	if (magic == SOCKFS_MAGIC || mode == S_IFSOCK) {
		out->fd_kind = FDK_SOCKET;
		resolve_socket(f, out);
		return;
	}
	out->obj.dev = sb->s_dev;
	out->obj.ino = ino->i_ino;
	if (magic == ANON_INODE_FS_MAGIC)
		out->fd_kind = FDK_ANON;
	else if (mode == S_IFREG)
		out->fd_kind = FDK_FILE;
	else if (mode == S_IFIFO)
		out->fd_kind = FDK_PIPE;
	else if (mode == S_IFBLK)
		out->fd_kind = FDK_BLOCK;
	else if (mode == S_IFCHR)
		out->fd_kind = FDK_CHAR;
	else if (mode == S_IFDIR)
		out->fd_kind = FDK_DIR;
	else if (mode == 0)
		out->fd_kind = FDK_ANON;
	else
		out->fd_kind = FDK_OTHER;
}

static __always_inline bool is_io_kind(__u32 k)
{
	return k == FDK_SOCKET || k == FDK_FILE || k == FDK_BLOCK || k == FDK_DIR;
}


/* The requested sleep of nanosleep / clock_nanosleep, from user memory. */
static __always_inline __u64 sleep_ns(const void *ts_user)
{
	struct {
		__s64 sec;
		__s64 nsec;
	} ts = {};

	if (!ts_user || bpf_probe_read_user(&ts, sizeof(ts), ts_user))
		return 0;
	return (__u64)ts.sec * 1000000000ULL + (__u64)ts.nsec;
}


/*
 * The fd, `arg` and fd details of syscall `nr` (class `cls`) from its first
 * three arguments. `ret` is the return value when known (at exit: open's fd
 * is the returned one), or -1.
 */
static __always_inline void syscall_detail(struct task_struct *t, __u32 nr, int cls, const __u64 *args,
					   __s64 ret, struct fd_info *fi, __s64 *fd, __u64 *arg)
{
	__builtin_memset(fi, 0, sizeof(*fi));
	*fd = -1;
	*arg = 0;
	switch (cls) {
	case C_FD:
	case C_CLOSE:
		*fd = (int)args[0];
		resolve_fd(t, *fd, fi);
		*arg = cls == C_FD ? args[2] : 0;
		break;
	case C_POLL: {
		struct {
			int fd;
			short events;
			short revents;
		} pfd = {};

		*arg = args[1];
		if (*arg >= 1 && !bpf_probe_read_user(&pfd, sizeof(pfd), (void *)args[0])) {
			*fd = pfd.fd;
			resolve_fd(t, *fd, fi);
		}
		break;
	}
	case C_SELECT:
		*arg = args[0];
		break;
	case C_OPEN:
		/* open(path, flags), openat(dirfd, path, flags), openat2(dirfd, path, how) */
		*arg = nr == NR_open ? args[1] : nr == NR_openat ? args[2] : 0;
		if (ret >= 0) {
			*fd = ret;
			resolve_fd(t, *fd, fi);
		}
		break;
	case C_FUTEX:
		*arg = (args[0] & 0xffffffffffffULL) | (args[1] & 0xffff) << 48;
		break;
	case C_SLEEP:
		*arg = sleep_ns((void *)(nr == NR_nanosleep ? args[0] : args[2]));
		break;
	default:
		*arg = args[0];
		break;
	}
}

struct inode_key {
	__u64 dev;
	__u64 ino;
};

/*
 * Files and directories SYSCALL records have named. The consumer resolves
 * the path of each once, from /proc/<tid>/fd/<fd>, which only works while
 * the fd is open: the first record naming an inode wakes it right away
 * instead of waiting for its poll timer. LRU: bounded, never full.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct inode_key);
	__type(value, __u8);
} named_inodes __weak SEC(".maps");

static __always_inline bool first_sight_of_file(const struct fd_info *fi)
{
	struct inode_key k = { .dev = fi->obj.dev, .ino = fi->obj.ino };
	__u8 one = 1;

	if (fi->fd_kind != FDK_FILE && fi->fd_kind != FDK_DIR)
		return false;
	if (bpf_map_lookup_elem(&named_inodes, &k))
		return false;
	return bpf_map_update_elem(&named_inodes, &k, &one, BPF_NOEXIST) == 0;
}

/*
 * Fills the body of a SYSCALL record (the header is the caller's); returns
 * whether the consumer should be woken for it (first_sight_of_file).
 */
static __always_inline bool fill_syscall(struct syscall_rec *r, __u64 exit_ts, __u32 nr, __s64 ret, __s64 fd,
					 __u32 flags, __u64 arg, const struct fd_info *fi)
{
	r->exit_ts = exit_ts;
	r->nr = nr;
	r->fd_kind = fi->fd_kind;
	r->ret = ret;
	r->fd = fd;
	r->flags = flags;
	r->arg = arg;
	r->obj = fi->obj;
	return first_sight_of_file(fi);
}

/* Writes one SYSCALL record; header ts = `ts`. */
static __always_inline void emit_syscall(__u32 tid, __u64 ts, __u64 exit_ts, __u32 nr, __s64 ret, __s64 fd,
					 __u32 flags, __u64 arg, const struct fd_info *fi)
{
	struct syscall_rec *r = rec_reserve(K_SYSCALL, sizeof(*r), tid, ts);
	bool wake;

	if (!r)
		return;
	wake = fill_syscall(r, exit_ts, nr, ret, fd, flags, arg, fi);
	rec_submit_wake(r, K_SYSCALL, wake);
}

#endif /* JTRACE_SYSCALL_CTX_BPF_H */
