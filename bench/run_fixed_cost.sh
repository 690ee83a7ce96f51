#!/bin/sh
# Fixed cost of a recording: wall time of `jtrace run` around a JVM that
# sleeps 200 ms (bench/startstop/Nop.java) against the plain JVM, with the
# library-call uprobes attached as uprobe.multi links (default, Linux 6.6+)
# and as one perf uprobe per function (JTRACE_NO_UPROBE_MULTI=1, the path
# of older kernels), without and with two extra --lib-calls. Set-ups are
# interleaved; prints min / median seconds over RUNS.
# Usage: sudo sh bench/run_fixed_cost.sh [RUNS]   (needs target/release/jtrace and the agent)
set -eu
RUNS=${1:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
J=$ROOT/target/release/jtrace
W=$(mktemp -d /tmp/jtrace-fixed-bench.XXXXXX)
trap 'rm -rf "$W"' EXIT
javac -d "$W/cls" "$ROOT/bench/startstop/Nop.java"
LIBS=libz.so.1:inflate,libz.so.1:deflate
t() { # label command...: appends "label seconds"
    label=$1
    shift
    /usr/bin/time -f "$label %e" -a -o "$W/times" "$@" >/dev/null 2>&1
    rm -rf "$W/t"
}
for r in $(seq "$RUNS"); do
    t plain java -cp "$W/cls" Nop
    t run "$J" run -o "$W/t" -- java -cp "$W/cls" Nop
    t run-perf-uprobes env JTRACE_NO_UPROBE_MULTI=1 "$J" run -o "$W/t" -- java -cp "$W/cls" Nop
    t run+2libcalls "$J" run -o "$W/t" --lib-calls $LIBS -- java -cp "$W/cls" Nop
    t run+2libcalls-perf-uprobes env JTRACE_NO_UPROBE_MULTI=1 "$J" run -o "$W/t" --lib-calls $LIBS -- java -cp "$W/cls" Nop
done
echo "set-up min median (s, $RUNS runs)"
for label in plain run run-perf-uprobes run+2libcalls run+2libcalls-perf-uprobes; do
    awk -v l="$label" '$1 == l { print $2 }' "$W/times" | sort -n |
        awk -v l="$label" '{ v[NR] = $1 } END { printf "%-28s %.2f %.2f\n", l, v[1], v[int((NR + 1) / 2)] }'
done
