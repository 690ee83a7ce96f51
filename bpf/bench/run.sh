#!/bin/sh
# Cost of jtrace's kernel recording on two C workloads (run as root):
#   sh bpf/bench/run.sh [JTRACE] [REPS]
# Prints one line per run: workload, configuration, elapsed ms (measured
# inside the program, start-up excluded). Configurations are interleaved.
J=${1:-target/release/jtrace}
R=${2:-5}
D=$(mktemp -d)
cc -O2 -pthread -o $D/pingpong "$(dirname "$0")/pingpong.c"
cc -O2 -o $D/reads "$(dirname "$0")/reads.c"
run() { # name cmd...
    name=$1; shift
    for cfg in untraced default blocked sched; do
        case $cfg in
        untraced) ms=$("$@") ;;
        default) ms=$($J run -o $D/t -- "$@" 2>/dev/null) ;;
        blocked) ms=$($J run --syscalls blocked -o $D/t -- "$@" 2>/dev/null) ;;
        sched) ms=$($J run --syscalls none --no-page-faults --no-block-io -o $D/t -- "$@" 2>/dev/null) ;;
        esac
        echo "$name $cfg $ms"
    done
}
for i in $(seq $R); do
    run pingpong taskset -c 0 $D/pingpong 200000
    run reads $D/reads 1000000
done
rm -rf $D
