#!/bin/sh
# Cost of jtrace's kernel recording on C workloads, and of perf and
# bpftrace doing the scheduler part of the same job (run as root):
#   sh bpf/bench/run.sh [JTRACE] [REPS] [CONFIGS]
# Workloads (both threads of a ping-pong pinned to CPU 0):
#   pingpong   2 threads, 200k pipe round trips (≈2 switches per round
#              trip), nothing else: the extreme, ≈300k switches/s here
#   pp100k     the same with a fixed amount of work per hop, chosen by a
#              calibration run for ≈100k switches/s untraced (the goal's
#              rate); WORK and the calibrated rate are printed
#   reads      1M one-byte preads of /dev/zero (one syscall each, never
#              blocks)
# Each program measures its own elapsed ms (tool start-up excluded).
# Configurations are interleaved within each repeat. Prints every run, then
# per workload and configuration: min and median ms, the ratio of medians
# to the untraced median of this run and, for the ping-pongs, the median
# switch rate.
#   untraced  the program alone
#   blocked   jtrace run (default: --syscalls blocked, page faults, block I/O)
#   io        jtrace run --syscalls io (sys_enter/sys_exit attached)
#   none      jtrace run --syscalls none (page faults, block I/O still on)
#   perf      perf sched record (system-wide sched events into perf.data)
#   bpftrace  sched_switch of the process's threads and sched_waking by
#             them, printf'ed to a file (the scheduler part of the job)
J=${1:-target/release/jtrace}
R=${2:-5}
CONFIGS=${3:-untraced blocked io none perf bpftrace}
D=$(mktemp -d)
cc -O2 -pthread -o $D/pingpong "$(dirname "$0")/pingpong.c"
cc -O2 -o $D/reads "$(dirname "$0")/reads.c"
TS=$(command -v taskset)
N=200000
N100=100000
# Calibration: ns per work iteration, then the hop time with no work; WORK
# fills the rest of a 10 µs hop (100k switches/s), corrected twice from
# measured rates (the calibration runs are untraced, best of 3).
hop_ns() { # work -> ns per hop (best of 3 runs of 20k round trips)
    for i in 1 2 3; do $TS -c 0 $D/pingpong 20000 $1; done |
        sort -n | head -1 | awk '{ printf "%.0f\n", $1 * 1e6 / 40000 }'
}
C=$($D/pingpong --calibrate)
W=0
for step in 1 2 3; do
    h=$(hop_ns $W)
    W=$(awk -v w=$W -v h=$h -v c=$C 'BEGIN { w += (10000 - h) / c; printf "%d\n", w < 0 ? 0 : w }')
done
echo "calibration: $C ns per work iteration, WORK=$W per hop, $(hop_ns $W) ns per hop (≈$(awk -v h=$(hop_ns $W) 'BEGIN { printf "%.0f", 1e9 / h }') switches/s untraced)"
BT='tracepoint:sched:sched_switch /pid == cpid/ { printf("%llu S %d %d %d\n", nsecs, args->prev_pid, args->prev_state, args->next_pid); }
tracepoint:sched:sched_waking /pid == cpid/ { printf("%llu W %d %d\n", nsecs, tid, args->pid); }'
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
    run pingpong $TS -c 0 $D/pingpong $N
    run pp100k $TS -c 0 $D/pingpong $N100 $W
    run reads $D/reads 1000000
done | tee $D/runs
echo
echo "workload config     min  median  ratio(median/untraced median)  switches/s(median)"
for w in pingpong pp100k reads; do
    case $w in pingpong) trips=$N ;; pp100k) trips=$N100 ;; *) trips=0 ;; esac
    for cfg in $CONFIGS; do
        grep "^$w $cfg " $D/runs | awk '{print $3}' | sort -n | awk -v w=$w -v c=$cfg '
            { v[NR] = $1 }
            END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%s %s %.0f %.0f\n", w, c, v[1], m }'
    done | awk -v trips=$trips '$2 == "untraced" { base = $4 }
        { printf "%-8s %-8s %7s %7s  %.3fx", $1, $2, $3, $4, $4 / base
          if (trips) printf "  %.0fk", 2 * trips / $4; printf "\n" }'
done
rm -rf $D
