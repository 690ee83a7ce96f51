#!/usr/bin/env bash
# Merge + report throughput on synthetic traces written by the real encoder
# (merge/examples/synth.rs: 16 threads; syscalls, monitors, park, sleep, GC
# windows, safepoint probes, out-of-order span records, per-thread JVM chunks).
#
# Usage: bench/merge_throughput.sh [EVENTS...]     (default: 1000000 10000000)
#   REPEATS=5   runs per mode and size (interleaved across modes)
#   MODES="in-memory stream stream-64M"           which paths to time
#   SIMPLE=1    the older, simpler step shape (enter, switch, wake, exit)
#   BATCHED=1   method events as METHOD_BATCH records, as the bytecode-
#               rewriting agent writes them (default: one record each, as
#               under JVMTI method events)
#   TRACE_DIR=… where the synthetic traces go (default a temp dir; each is
#               deleted after its size is measured; 100M events take ~5 GB)
#   JTRACE=…    the jtrace binary to time (default target/release/jtrace),
#               e.g. a copy of an older build for a before/after comparison
#   BEFORE=…    a second jtrace binary (an older build): each mode is also
#               timed with it, as "before:MODE", interleaved with the others
#
# Also prints min / median user CPU seconds and events per user-CPU second
# at that median: on a shared, loaded machine the CPU time is a steadier
# measure of the per-core rate than the wall time; and the median system
# CPU seconds (reading the trace, writing and reading back the runs, page
# faults), and the load average before and after each size.
#
# Per size and mode: min and median wall seconds of `jtrace report --json`,
# events/s at the median, peak RSS (max over runs, /usr/bin/time -v), and the
# number of sorted runs the streaming path spilled. `in-memory` is the
# pre-streaming path (hidden flag --in-memory: the whole trace in memory);
# `stream` is the default (256 MiB budget); `stream-64M` forces runs on disk
# from ~2.5 M events on.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release -p jtrace -p jtrace-merge --examples --bins
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000000 10000000)
repeats=${REPEATS:-5}
jtrace=${JTRACE:-target/release/jtrace}
modes=(${MODES:-in-memory stream stream-64M})
if [ -n "${BEFORE:-}" ]; then
    for m in "${modes[@]}"; do modes+=("before:$m"); done
fi
tmp=$(mktemp -d "${TRACE_DIR:-${TMPDIR:-/tmp}}/jtrace-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mode_args() {
    local m=${1#before:}
    case $m in
        in-memory) echo "--in-memory" ;;
        stream) echo "" ;;
        stream-*) echo "--memory-budget ${m#stream-}" ;;
    esac
}
for n in "${sizes[@]}"; do
    df -h "$tmp" | tail -1 | awk '{print "disk free before writing: " $4}'
    target/release/examples/synth "$tmp/t$n" "$n" 16 ${SIMPLE:+simple} ${BATCHED:+batched} >/dev/null
    echo "events=$n  trace size $(du -sh "$tmp/t$n" | cut -f1)"
    echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    declare -A times=() users=() syss=() rss=()
    for ((r = 0; r < repeats; r++)); do
        for m in "${modes[@]}"; do
            # shellcheck disable=SC2046
            bin=$jtrace
            [ "${m#before:}" = "$m" ] || bin=$BEFORE
            /usr/bin/time -v -o "$tmp/time" "$bin" report --json $(mode_args "$m") "$tmp/t$n" >/dev/null
            w=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, a, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + a[i]; print s}' "$tmp/time")
            k=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/time")
            u=$(awk -F': ' '/User time \(seconds\)/ {print $2}' "$tmp/time")
            y=$(awk -F': ' '/System time \(seconds\)/ {print $2}' "$tmp/time")
            times[$m]="${times[$m]:-} $w"
            users[$m]="${users[$m]:-} $u"
            syss[$m]="${syss[$m]:-} $y"
            [ "$k" -gt "${rss[$m]:-0}" ] && rss[$m]=$k
        done
    done
    for m in "${modes[@]}"; do
        sorted=$(printf '%s\n' ${times[$m]} | sort -g)
        min=$(echo "$sorted" | head -1)
        med=$(echo "$sorted" | sed -n "$(((repeats + 1) / 2))p")
        rate=$(python3 -c "print(f'{$n/$med/1e6:.2f}')")
        usorted=$(printf '%s\n' ${users[$m]} | sort -g)
        umin=$(echo "$usorted" | head -1)
        umed=$(echo "$usorted" | sed -n "$(((repeats + 1) / 2))p")
        urate=$(python3 -c "print(f'{$n/$umed/1e6:.2f}')")
        smed=$(printf '%s\n' ${syss[$m]} | sort -g | sed -n "$(((repeats + 1) / 2))p")
        runs=""
        if [ "${m#before:}" != in-memory ]; then
            budget=$(mode_args "$m" | awk '{print $2}')
            runs="  runs=$(target/release/examples/phases "$tmp/t$n" ${budget:-256M} --stream-only | sed -n 's/.*(\([0-9]*\) runs).*/\1/p')"
        fi
        printf 'events=%s  %-18s min=%ss  median=%ss  rate=%sM events/s  user min=%ss median=%ss  user rate=%sM events/s  sys median=%ss  peak_rss=%sMiB%s\n' \
            "$n" "$m" "$min" "$med" "$rate" "$umin" "$umed" "$urate" "$smed" "$((rss[$m] / 1024))" "$runs"
    done
    echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    unset times users syss rss
    rm -rf "$tmp/t$n"
done
