#!/usr/bin/env bash
# `jtrace why` against `jtrace report` on one synthetic trace written by the
# real encoder (merge/examples/synth.rs, 16 threads; every wakeup names
# another worker, so critical paths hop from thread to thread).
#
# Usage: bench/why_vs_report.sh [EVENTS]        (default 10000000)
#   REPEATS=3     runs per command (interleaved)
#   BUDGET=256M   --memory-budget of both
#   TRACE_DIR=…   where the synthetic trace goes (default a temp dir)
#   JTRACE=…      the jtrace binary (default target/release/jtrace)
#
# Times, per command: min / median wall and user CPU seconds, peak RSS
# (/usr/bin/time -v); then the ratio why / report of the medians. The
# `why` commands: the slowest call of one method; the 10 slowest calls of
# every method; every call at or above p99 (`--percentile 99`, at most
# 1000, hopping up to 4 threads deep); the latter with `--compare`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release -p jtrace -p jtrace-merge --examples --bins
n=${1:-10000000}
repeats=${REPEATS:-3}
budget=${BUDGET:-256M}
jtrace=${JTRACE:-target/release/jtrace}
tmp=$(mktemp -d "${TRACE_DIR:-${TMPDIR:-/tmp}}/jtrace-why-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
target/release/examples/synth "$tmp/t" "$n" 16 >/dev/null
echo "events=$n  trace size $(du -sh "$tmp/t" | cut -f1)  budget $budget  load $(cut -d' ' -f1-3 /proc/loadavg)"
cmds=(
    "report --json"
    "why --json --method com.example.C3.m11"
    "why --json --method com.example.* --slowest 10"
    "why --json --method com.example.* --percentile 99"
    "why --json --method com.example.* --percentile 99 --compare"
)
declare -A walls=() users=() rss=()
for ((r = 0; r < repeats; r++)); do
    for c in "${cmds[@]}"; do
        # shellcheck disable=SC2086
        /usr/bin/time -v -o "$tmp/time" "$jtrace" $c --memory-budget "$budget" "$tmp/t" >"$tmp/out"
        w=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, a, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + a[i]; print s}' "$tmp/time")
        u=$(awk -F': ' '/User time \(seconds\)/ {print $2}' "$tmp/time")
        k=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/time")
        walls[$c]="${walls[$c]:-} $w"
        users[$c]="${users[$c]:-} $u"
        [ "$k" -gt "${rss[$c]:-0}" ] && rss[$c]=$k
    done
done
med() { printf '%s\n' $1 | sort -g | sed -n "$(((repeats + 1) / 2))p"; }
min() { printf '%s\n' $1 | sort -g | head -1; }
base_w=$(med "${walls[report --json]}")
base_u=$(med "${users[report --json]}")
for c in "${cmds[@]}"; do
    mw=$(med "${walls[$c]}")
    mu=$(med "${users[$c]}")
    printf '%-62s wall min=%ss median=%ss (x%s)  user min=%ss median=%ss (x%s)  peak_rss=%sMiB\n' \
        "$c" "$(min "${walls[$c]}")" "$mw" "$(python3 -c "print(f'{$mw/$base_w:.2f}')")" \
        "$(min "${users[$c]}")" "$mu" "$(python3 -c "print(f'{$mu/$base_u:.2f}')")" "$((rss[$c] / 1024))"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
