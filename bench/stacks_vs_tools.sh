#!/usr/bin/env bash
# Stacks side by side with other tools, as root:
#   bench/stacks_vs_tools.sh [REPEATS]        (default 5)
#   JTRACE=target/release/jtrace; JAVA=java; JFR=jfr (of the same JDK)
# 1. Cost, interleaved in each repeat, on bench/stacks/StackCost.java's
#    ping-pong (CPU 0, park/unpark, ~15k switches/s): untraced; jtrace run
#    (stacks at every switch-out + 99 Hz samples); perf record -g on
#    sched:sched_switch (a kernel + user stack at every switch, the same
#    rate); bpftrace @[kstack, ustack] = count() on sched_switch for the
#    process. Java runs with -XX:+PreserveFramePointer in all of them (what
#    jtrace run adds), so each tool's frame-pointer walk sees Java frames.
#    Prints min/median ms and the ratio to untraced.
# 2. Explained off-CPU time, one run: tests/java/StackScenarios.java (a
#    thread each blocked in sleep, a monitor, wait, park, a socket, a file;
#    plus its jit thread) under jtrace run with JFR recording at the same
#    time (-XX:StartFlightRecording settings=profile). For each thread: its
#    off-CPU time (jtrace, from the scheduler), the share jtrace gives a
#    cause and a stack, and the share JFR's events with a stack trace cover
#    (ThreadPark, ThreadSleep, JavaMonitorEnter/Wait, Socket*/File* I/O).
# Needs tracefs mounted (/sys/kernel/tracing) for perf's and bpftrace's
# sched_switch tracepoint; jtrace itself does not.
set -euo pipefail
reps=${1:-5}
J=$(realpath "${JTRACE:-target/release/jtrace}")
java=${JAVA:-java}
jfr=${JFR:-jfr}
here=$(cd "$(dirname "$0")" && pwd)
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
javac -d "$d" "$here/stacks/StackCost.java"
javac --release 11 -nowarn -d "$d" "$here/../tests/java/StackScenarios.java"
trips=20000
work=45000
echo "host: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); load: $(uptime | sed 's/.*load average: //')"
ms() { sed -n 's/^MS //p'; }
# Full paths: bpftrace -c wants one binary (/bin and /usr/bin are one here).
app=("$(realpath "$(command -v taskset)")" -c 0 "$(realpath "$(command -v "$java")")" -XX:+PreserveFramePointer
    -cp "$d" StackCost pingpong $trips $work)
for r in $(seq "$reps"); do
    echo "untraced $("${app[@]}" | ms)"
    rm -rf "$d/t"
    echo "jtrace $("$J" run -o "$d/t" -- "${app[@]}" 2>/dev/null | ms)"
    echo "perf $(perf record -q -e sched:sched_switch -g -o "$d/perf.data" -- "${app[@]}" 2>/dev/null | ms)"
    echo "bpftrace $(bpftrace -q -c "${app[*]}" -e \
        'tracepoint:sched:sched_switch /pid == cpid/ { @[kstack, ustack] = count(); } END { clear(@); }' \
        2>/dev/null | ms)"
done >"$d/runs"
cat "$d/runs"
python3 - "$d/runs" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 2:
        runs.setdefault(f[0], []).append(float(f[1]))
base = statistics.median(runs["untraced"])
for k, v in runs.items():
    print(f"{k:9} min {min(v):8.1f}  median {statistics.median(v):8.1f} ms  x{statistics.median(v) / base:.3f} untraced")
PY

# 2. Explained off-CPU time: jtrace and JFR on the same run.
explain() { # explain THREADS ARGS... (the Java program's class and arguments)
    local threads=$1
    shift
    rm -rf "$d/s"
    "$J" run -o "$d/s" -- "$java" -XX:StartFlightRecording=settings=profile,filename="$d/s.jfr" \
        -cp "$d" "$@" >/dev/null 2>&1
    "$J" report "$d/s" --json >"$d/report.json"
    "$jfr" print --json "$d/s.jfr" >"$d/jfr.json"
    echo "$*:"
python3 - "$d/report.json" "$d/jfr.json" "$threads" <<'PY'
import json, re, sys
rep = json.load(open(sys.argv[1]))
jfr = json.load(open(sys.argv[2]))

def dur_ns(s):
    # ISO 8601 durations as jfr prints them: PT1M2.5S, PT0.0201S, PT5H...
    m = re.fullmatch(r"-?PT(?:(\d+)H)?(?:(\d+)M)?(?:([\d.]+)S)?", s or "")
    if not m:
        return 0
    h, mi, se = m.groups()
    return int(((int(h or 0) * 60 + int(mi or 0)) * 60 + float(se or 0)) * 1e9)

kinds = {"jdk.ThreadPark", "jdk.ThreadSleep", "jdk.JavaMonitorEnter", "jdk.JavaMonitorWait",
         "jdk.SocketRead", "jdk.SocketWrite", "jdk.FileRead", "jdk.FileWrite", "jdk.FileForce"}
jfr_ns = {}
for e in jfr["recording"]["events"]:
    if e["type"] not in kinds:
        continue
    v = e["values"]
    t = (v.get("eventThread") or {}).get("osThreadId")
    if t is None or not v.get("stackTrace"):
        continue
    jfr_ns[t] = jfr_ns.get(t, 0) + dur_ns(v.get("duration"))
with_stack = {}
for g in rep.get("stacks", {}).get("by_thread", []):
    with_stack[int(g["key"].split()[0])] = g["ns"]
scen = sys.argv[3].split(",")
print(f"{'thread':10} {'off-CPU ms':>11} {'runqueue':>9} {'jtrace: cause+stack':>20} {'JFR: event+stack':>17}")
tot = [0, 0, 0]
for t in rep["threads"]:
    if t["name"] not in scen:
        continue
    off = sum(t["off_cpu_ns"].values())
    unk = t["off_cpu_ns"].get("unknown", 0) + t["off_cpu_ns"].get("not_covered", 0)
    jt = max(0, min(with_stack.get(t["tid"], 0), off) - unk)
    jf = min(jfr_ns.get(t["tid"], 0), off)
    tot[0] += off; tot[1] += jt; tot[2] += jf
    rq = t["off_cpu_ns"].get("runqueue", 0)
    print(f"{t['name']:10} {off / 1e6:11.1f} {rq / max(off, 1):9.1%} {jt / max(off, 1):20.1%} {jf / max(off, 1):17.1%}")
print(f"{'all':10} {tot[0] / 1e6:11.1f} {'':9} {tot[1] / max(tot[0], 1):20.1%} {tot[2] / max(tot[0], 1):17.1%}")
PY
}
explain sleep,monitor,wait,park,socket,file,jit StackScenarios 3000
explain ping,pong StackCost pingpong $trips $work
echo "load after: $(uptime | sed 's/.*load average: //')"
