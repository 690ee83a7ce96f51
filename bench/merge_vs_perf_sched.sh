#!/usr/bin/env bash
# Analysis throughput on the same kernel events: `perf sched timehist` on a
# `perf sched record` of a context-switch-heavy workload vs `jtrace report`
# on a `jtrace run` of the same workload (run as root).
#
# Usage: bench/merge_vs_perf_sched.sh [ROUND_TRIPS] [REPEATS]   (default 200000 5)
#
# Workload: bpf/bench/pingpong.c (2 threads, pipe ping-pong pinned to one
# CPU, ≈2 switches per round trip). perf records the sched tracepoints of the
# whole system (its default), jtrace the traced process tree (scheduler, page
# faults, block I/O; default --syscalls blocked). Both analyses are timed on
# their own recording, interleaved, REPEATS times; events = records in the
# recording (perf: samples in perf.data; jtrace: kernel records in meta.json).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200000}
reps=${2:-5}
cargo build -q --release -p jtrace
J=target/release/jtrace
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
cc -O2 -pthread -o "$D/pingpong" bpf/bench/pingpong.c
perf sched record -q -o "$D/perf.data" -- taskset -c 0 "$D/pingpong" "$n" >/dev/null 2>&1
$J run -o "$D/t.jtrace" -- taskset -c 0 "$D/pingpong" "$n" >/dev/null 2>&1
perf_events=$(perf script -i "$D/perf.data" -F event 2>/dev/null | wc -l)
jt_events=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['kernel_records'])" "$D/t.jtrace/meta.json")
echo "perf.data: $perf_events events ($(du -h "$D/perf.data" | cut -f1)); jtrace: $jt_events kernel records ($(du -sh "$D/t.jtrace" | cut -f1))"
secs() { /usr/bin/time -f %e -o "$D/time" "$@" >/dev/null 2>&1; cat "$D/time"; }
pt=() jt=() jm=()
for ((i = 0; i < reps; i++)); do
    pt+=("$(secs perf sched timehist -i "$D/perf.data")")
    jt+=("$(secs $J report --json "$D/t.jtrace")")
    jm+=("$(secs $J report --json --in-memory "$D/t.jtrace")")
done
summary() { # name events times...
    local name=$1 ev=$2
    shift 2
    local sorted min med
    sorted=$(printf '%s\n' "$@" | sort -g)
    min=$(echo "$sorted" | head -1)
    med=$(echo "$sorted" | sed -n "$((($# + 1) / 2))p")
    python3 -c "print(f'%-28s events=%-9d min=%.2fs median=%.2fs rate=%.2fM events/s' % ('$name', $ev, $min, $med, $ev / max($med, 0.005) / 1e6))"
}
summary "perf sched timehist" "$perf_events" "${pt[@]}"
summary "jtrace report (streaming)" "$jt_events" "${jt[@]}"
summary "jtrace report --in-memory" "$jt_events" "${jm[@]}"
