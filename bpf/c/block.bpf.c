// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * Block I/O requests issued by traced threads: remembered at insert (into
 * the I/O scheduler) or issue (to the driver) when the current task is
 * traced, written as one BLOCK_IO record at completion with the issue and
 * completion times. Requests the kernel submits on its own (writeback by
 * kworkers, the ext4 journal thread) are not attributed to anyone.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "jtrace.bpf.h"

#define REQ_OP_MASK 0xff
#define REQ_OP_READ 0
#define MINORBITS 20

struct blk_start {
	__u64 issue_ts;		/* 0 until issued */
	__u64 sector;
	__u64 dev;
	__u32 tid;
	__u32 write;
};

/* Requests of traced threads in flight, by request address. LRU: a request
 * freed without completion (merged into another) cannot fill it up. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct blk_start);
} blk_inflight SEC(".maps");

static __always_inline void remember(struct request *rq, __u64 issue_ts)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u64 key = (__u64)rq;
	struct gendisk *disk;
	struct blk_start v = {};

	if (!tgid_traced(pid_tgid >> 32))
		return;
	disk = BPF_CORE_READ(rq, q, disk);
	v.issue_ts = issue_ts;
	v.sector = BPF_CORE_READ(rq, __sector);
	/* As the block tracepoints report it: the whole disk's dev_t. */
	if (disk)
		v.dev = ((__u64)BPF_CORE_READ(disk, major) << MINORBITS) |
			(__u64)BPF_CORE_READ(disk, first_minor);
	v.tid = (__u32)pid_tgid;
	v.write = (BPF_CORE_READ(rq, cmd_flags) & REQ_OP_MASK) != REQ_OP_READ;
	if (bpf_map_update_elem(&blk_inflight, &key, &v, BPF_ANY))
		count(&dropped, K_BLOCK_MAP_FULL);
}

SEC("tp_btf/block_rq_insert")
int BPF_PROG(block_rq_insert, struct request *rq)
{
	remember(rq, 0);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(block_rq_issue, struct request *rq)
{
	__u64 key = (__u64)rq;
	__u64 ts = bpf_ktime_get_ns();
	struct blk_start *v = bpf_map_lookup_elem(&blk_inflight, &key);

	/* Inserted by a traced thread, issued later by whoever ran the queue. */
	if (v) {
		v->issue_ts = ts;
		v->sector = BPF_CORE_READ(rq, __sector);
		return 0;
	}
	remember(rq, ts);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(block_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	__u64 key = (__u64)rq;
	struct blk_start *v = bpf_map_lookup_elem(&blk_inflight, &key);
	struct block_io_rec *r;

	if (!v)
		return 0;
	if (v->issue_ts) {
		r = rec_reserve(K_BLOCK_IO, sizeof(*r), v->tid, v->issue_ts);
		if (r) {
			r->complete_ts = bpf_ktime_get_ns();
			r->dev = v->dev;
			r->sector = v->sector;
			r->bytes = nr_bytes;
			r->write = v->write;
			rec_submit(r, K_BLOCK_IO);
		}
	}
	bpf_map_delete_elem(&blk_inflight, &key);
	return 0;
}
