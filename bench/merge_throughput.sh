#!/usr/bin/env bash
# Merge + report throughput on synthetic traces written by the real encoder.
# Usage: bench/merge_throughput.sh [EVENTS...]   (default: 1000000 10000000)
# Prints, per size, min and median wall seconds of `jtrace report` over 5 runs,
# events/s at the median, and peak RSS.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release -p jtrace -p jtrace-merge --examples --bins
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000000 10000000)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in "${sizes[@]}"; do
    target/release/examples/synth "$tmp/t$n" "$n" 16 >/dev/null
    times=()
    rss=0
    for _ in 1 2 3 4 5; do
        out=$( { /usr/bin/time -f "%e %M" target/release/jtrace report "$tmp/t$n" >/dev/null; } 2>&1 | tail -1)
        times+=("${out% *}")
        r=${out#* }
        [ "$r" -gt "$rss" ] && rss=$r
    done
    sorted=$(printf '%s\n' "${times[@]}" | sort -g)
    min=$(echo "$sorted" | head -1)
    med=$(echo "$sorted" | sed -n 3p)
    rate=$(python3 -c "print(f'{$n/$med/1e6:.2f}')")
    echo "events=$n  min=${min}s  median=${med}s  rate=${rate}M events/s  peak_rss=$((rss/1024))MiB"
    rm -rf "$tmp/t$n"
done
