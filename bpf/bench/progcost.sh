#!/bin/sh
# Cost per run of each jtrace BPF program (kernel bpf_stats), during the
# pure-switching ping-pong pinned to one CPU (run as root):
#   sh bpf/bench/progcost.sh [JTRACE] [ROUND_TRIPS] [JTRACE_RUN_ARGS...]
# WORK=n in the environment: work per hop (pingpong.c), e.g. the WORK
# bench/run.sh calibrates for 100k switches/s.
# JTRACE may also be the kernel-recorder-only example
# (cargo build --release -p jtrace-bpf --example krec; target/release/examples/krec).
# Enables kernel.bpf_stats_enabled for the run (restored after), samples
# run_time_ns / run_cnt of every loaded program twice while the workload
# runs and prints the delta: runs and ns per run, per program (other
# tracers running at the same time are not counted: only the programs
# whose fds this jtrace holds).
J=${1:-target/release/jtrace}
N=${2:-1000000}
shift 2 2>/dev/null
D=$(mktemp -d)
cc -O2 -pthread -o $D/pingpong "$(dirname "$0")/pingpong.c"
old=$(sysctl -n kernel.bpf_stats_enabled)
sysctl -q kernel.bpf_stats_enabled=1
snap() { # "name run_cnt run_time_ns" of the programs jtrace (pid $JP) holds
    ids=$(cat /proc/$JP/fdinfo/* 2>/dev/null | awk '$1 == "prog_id:" { print $2 }' | sort -u)
    bpftool -j prog show | python3 -c '
import json, sys
ids = set(int(i) for i in sys.argv[1:])
for p in json.load(sys.stdin):
    if p["id"] in ids:
        print(p.get("name", "?"), p.get("run_cnt", 0), p.get("run_time_ns", 0))' $ids | sort
}
case $J in
*krec) $J "$@" $D/t.bin -- taskset -c 0 $D/pingpong $N ${WORK:-0} >/dev/null 2>&1 & ;;
*) $J run "$@" -o $D/t -- taskset -c 0 $D/pingpong $N ${WORK:-0} >/dev/null 2>&1 & ;;
esac
JP=$!
sleep 1.5
snap >$D/a
sleep 3
snap >$D/b
wait
sysctl -q kernel.bpf_stats_enabled=$old
echo "program runs ns/run"
join $D/a $D/b | awk '{ r = $4 - $2; t = $5 - $3; if (r > 0) printf "%-18s %9d %6.0f\n", $1, r, t / r }'
rm -rf $D
