#!/bin/sh
# Cost of jtrace's kernel recording on two C workloads, and of perf and
# bpftrace doing the scheduler part of the same job (run as root):
#   sh bpf/bench/run.sh [JTRACE] [REPS]
# Workloads: pingpong (2 threads, 200k pipe round trips on one CPU, ≈2
# switches per round trip) and reads (1M one-byte preads of /dev/zero: one
# syscall each, never blocks). Each program measures its own elapsed ms
# (tool start-up excluded). Configurations are interleaved within each
# repeat. Prints every run, then per workload and configuration: min and
# median ms and the ratio of medians to the untraced median of this run.
#   untraced  the program alone
#   blocked   jtrace run (default: --syscalls blocked, page faults, block I/O)
#   io        jtrace run --syscalls io (sys_enter/sys_exit attached)
#   none      jtrace run --syscalls none (page faults, block I/O still on)
#   perf      perf sched record (system-wide sched events into perf.data)
#   bpftrace  sched_switch of the process's threads and sched_waking by
#             them, printf'ed to a file (the scheduler part of the job)
J=${1:-target/release/jtrace}
R=${2:-5}
D=$(mktemp -d)
cc -O2 -pthread -o $D/pingpong "$(dirname "$0")/pingpong.c"
cc -O2 -o $D/reads "$(dirname "$0")/reads.c"
BT='tracepoint:sched:sched_switch /pid == cpid/ { printf("%llu S %d %d %d\n", nsecs, args->prev_pid, args->prev_state, args->next_pid); }
tracepoint:sched:sched_waking /pid == cpid/ { printf("%llu W %d %d\n", nsecs, tid, args->pid); }'
CONFIGS="untraced blocked io none perf bpftrace"
run() { # name cmd...
    name=$1; shift
    for cfg in $CONFIGS; do
        rm -rf $D/t $D/perf.data $D/bt.txt
        case $cfg in
        untraced) ms=$("$@") ;;
        blocked) ms=$($J run -o $D/t -- "$@" 2>/dev/null) ;;
        io) ms=$($J run --syscalls io -o $D/t -- "$@" 2>/dev/null) ;;
        none) ms=$($J run --syscalls none -o $D/t -- "$@" 2>/dev/null) ;;
        perf) ms=$(perf sched record -o $D/perf.data -- "$@" 2>/dev/null) ;;
        bpftrace) BENCH_OUT=$D/ms bpftrace -o $D/bt.txt -c "$*" -e "$BT" >/dev/null 2>&1; ms=$(cat $D/ms) ;;
        esac
        echo "$name $cfg $ms"
    done
}
for i in $(seq $R); do
    run pingpong "$(command -v taskset)" -c 0 $D/pingpong 200000
    run reads $D/reads 1000000
done | tee $D/runs
echo
echo "workload config min median ratio(median/untraced median)"
for w in pingpong reads; do
    for cfg in $CONFIGS; do
        grep "^$w $cfg " $D/runs | awk '{print $3}' | sort -n | awk -v w=$w -v c=$cfg '
            { v[NR] = $1 }
            END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%s %s %.0f %.0f\n", w, c, v[1], m }'
    done | awk '$2 == "untraced" { base = $4 } { printf "%-8s %-8s %7s %7s  %.2fx\n", $1, $2, $3, $4, $4 / base }'
done
rm -rf $D
