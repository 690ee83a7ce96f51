#!/usr/bin/env bash
# Peak memory (and wall time) of `jtrace text` on synthetic traces of growing
# length: streamed, memory must stay flat (set by --memory-budget, not by the
# number of events); the in-memory path grows with the trace.
#
# Usage: bench/text_memory.sh [EVENTS...]     (default: 10000000 100000000)
#   REPEATS=3    runs per mode and size (modes interleaved within a repeat)
#   MODES="stream stream-64M"   streamed modes (stream = default 256M budget)
#   IN_MEMORY_MAX=10000000      also time `--in-memory` up to this many events
#                               (100 M events in memory need > 6 GB)
#   TRACE_DIR=…  where the synthetic traces go (default a temp dir; deleted
#                after use; 100 M events take ~4.2 GB, plus ~1 GB of sorted
#                runs and syscall table in $TMPDIR while a run lasts)
#   JTRACE=…     the jtrace binary (default target/release/jtrace)
#
# The trace: merge/examples/synth.rs, 16 threads (syscalls at switch and at
# exit, monitors, park, sleep, GC windows, wakers, recursion). The output
# (~6.5 GB of text for 100 M events) goes to /dev/null; its size is printed
# once per size. Per size and mode: min / median wall seconds, min / max peak
# RSS over the repeats (/usr/bin/time -v, "Maximum resident set size").
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release -p jtrace -p jtrace-merge --examples --bins
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10000000 100000000)
repeats=${REPEATS:-3}
jtrace=${JTRACE:-target/release/jtrace}
in_memory_max=${IN_MEMORY_MAX:-10000000}
tmp=$(mktemp -d "${TRACE_DIR:-${TMPDIR:-/tmp}}/jtrace-text-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mode_args() {
    case $1 in
        in-memory) echo "--in-memory" ;;
        stream) echo "" ;;
        stream-*) echo "--memory-budget ${1#stream-}" ;;
    esac
}
echo "# $(date -u +%FT%TZ)  load: $(cut -d' ' -f1-3 /proc/loadavg)  jtrace $(git rev-parse --short HEAD)"
for n in "${sizes[@]}"; do
    modes=(${MODES:-stream stream-64M})
    [ "$n" -gt "$in_memory_max" ] || modes+=(in-memory)
    target/release/examples/synth "$tmp/t$n" "$n" 16 >/dev/null
    echo "events=$n  trace size $(du -sh "$tmp/t$n" | cut -f1)  text size $("$jtrace" text "$tmp/t$n" | wc -c) bytes"
    declare -A times=() rss=()
    for ((r = 0; r < repeats; r++)); do
        for m in "${modes[@]}"; do
            # shellcheck disable=SC2046
            /usr/bin/time -v -o "$tmp/time" "$jtrace" text $(mode_args "$m") "$tmp/t$n" >/dev/null
            w=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, a, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + a[i]; print s}' "$tmp/time")
            k=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/time")
            times[$m]="${times[$m]:-} $w"
            rss[$m]="${rss[$m]:-} $k"
            echo "  run $r $m: ${w}s $((k / 1024))MiB  (load $(cut -d' ' -f1 /proc/loadavg))"
        done
    done
    for m in "${modes[@]}"; do
        sorted=$(printf '%s\n' ${times[$m]} | sort -g)
        min=$(echo "$sorted" | head -1)
        med=$(echo "$sorted" | sed -n "$(((repeats + 1) / 2))p")
        rsorted=$(printf '%s\n' ${rss[$m]} | sort -g)
        rmin=$(echo "$rsorted" | head -1)
        rmax=$(echo "$rsorted" | tail -1)
        printf 'events=%s  %-12s wall min=%ss median=%ss  peak_rss min=%sMiB max=%sMiB\n' \
            "$n" "$m" "$min" "$med" "$((rmin / 1024))" "$((rmax / 1024))"
    done
    unset times rss
    rm -rf "$tmp/t$n"
done
