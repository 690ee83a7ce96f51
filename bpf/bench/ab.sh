#!/bin/sh
# Wall-clock A/B of kernel recorders on the ping-pong pinned to CPU 0 (run
# as root), to tell builds of the BPF programs apart:
#   sh bpf/bench/ab.sh REPS WORK ROUND_TRIPS RECORDER...
# RECORDER: a `krec` example binary (cargo build --release -p jtrace-bpf
# --example krec; copy it to a directory per build, keeping the name krec)
# or a jtrace binary. WORK per hop as in pingpong.c (0: pure switching).
# Interleaves untraced and every recorder in each repeat; prints min and
# median ms and the ns each recorder adds per context switch (medians).
R=$1; W=$2; N=$3; shift 3
D=$(mktemp -d)
cc -O2 -pthread -o $D/pingpong "$(dirname "$0")/pingpong.c"
for i in $(seq $R); do
    echo "untraced $(taskset -c 0 $D/pingpong $N $W)"
    for J in "$@"; do
        case $J in
        *krec) ms=$($J $D/t.bin -- taskset -c 0 $D/pingpong $N $W 2>/dev/null) ;;
        *) ms=$($J run -o $D/t -- taskset -c 0 $D/pingpong $N $W 2>/dev/null); rm -rf $D/t ;;
        esac
        echo "$J $ms"
    done
done >$D/runs
for J in untraced "$@"; do
    grep "^$J " $D/runs | awk '{print $2}' | sort -n | awk -v j=$J '{ v[NR] = $1 }
        END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print j, v[1], m }'
done | awk -v n=$N '$1 == "untraced" { base = $3 }
    { printf "%-40s min %7.1f  median %7.1f  %+5.0f ns/switch  %.3fx\n", $1, $2, $3, ($3 - base) * 1e6 / (2 * n), $3 / base }'
rm -rf $D
