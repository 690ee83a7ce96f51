/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Bitmaps of ids (tgids or tids, below TRACED_TGID_LIMIT of jtrace.h):
 * the process filter, the threads already named and the threads that may
 * have a page fault pending. A test is one load and a bit test, no helper
 * call; ids beyond the limit are never set.
 */
#ifndef JTRACE_BITS_BPF_H
#define JTRACE_BITS_BPF_H

#include "jtrace.h"

static __always_inline bool bit_test(const __u64 *bits, __u32 id)
{
	return id < TRACED_TGID_LIMIT && (bits[id / 64] & (1ULL << (id % 64)));
}

/* Sets the bit of `id`; false if it does not fit. Atomic: programs on
 * other CPUs set bits of the same word. */
static __always_inline bool bit_set(__u64 *bits, __u32 id)
{
	if (id >= TRACED_TGID_LIMIT)
		return false;
	__sync_fetch_and_or(&bits[id / 64], 1ULL << (id % 64));
	return true;
}

/* Clears the bit of `id`, atomically. */
static __always_inline void bit_clear(__u64 *bits, __u32 id)
{
	if (id < TRACED_TGID_LIMIT)
		__sync_fetch_and_and(&bits[id / 64], ~(1ULL << (id % 64)));
}

#endif /* JTRACE_BITS_BPF_H */
