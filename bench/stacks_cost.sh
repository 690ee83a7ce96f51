#!/usr/bin/env bash
# Cost of stacks, ratios taken in one run, configurations
# interleaved in each repeat (run as root):
#   bench/stacks_cost.sh [REPEATS] [WORK] [TRIPS]   (defaults 5, 0, 200000)
#   JTRACE=target/release/jtrace; JAVA=java
# 1. Java ping-pong (bench/stacks/StackCost.java) on CPU 0: two platform
#    threads, park/unpark, WORK multiply-adds per hop (0: as many switches
#    as the CPU allows, ≈ 600 k/s here; 45000 ≈ 60 µs on an AMD EPYC:
#    ≈ 15k switches/s), -XX:+PreserveFramePointer in every row (what jtrace
#    run adds). untraced; jtrace run --no-stacks; jtrace run (the default:
#    deferred stacks, blocks ≥ 500 µs and ≤ 100 short ones/s per CPU, 99 Hz
#    CPU samples); jtrace run --stack-min-block 0 (stacks at every
#    switch-out); bpftrace @[kstack, ustack] = count() on sched_switch of
#    the process. Prints min/median ms, the ratio to untraced and to
#    --no-stacks, the ns stacks add per switch, and kernel.bin bytes per
#    switch.
# 2. -XX:+PreserveFramePointer on a CPU-bound call tree, untraced: min/median
#    ms with and without the flag.
# 3. CPU samples: the CPU-bound call tree (StackCost compute 3000, few
#    switches) under jtrace run --cpu-samples 0 and --cpu-samples 99.
set -euo pipefail
# bpftrace's sched_switch tracepoint needs tracefs (jtrace mounts its own).
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
reps=${1:-5}
work=${2:-0}
trips=${3:-200000}
J=${JTRACE:-target/release/jtrace}
java=${JAVA:-java}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
javac -d "$d" "$(dirname "$0")/stacks/StackCost.java"
echo "host: $(lscpu | sed -n 's/^Model name: *//p'); load: $(uptime | sed 's/.*load average: //')"
ms() { sed -n 's/^MS //p'; }
# Full paths: bpftrace -c wants one binary.
app=("$(realpath "$(command -v taskset)")" -c 0 "$(realpath "$(command -v "$java")")" -XX:+PreserveFramePointer
    -cp "$d" StackCost pingpong "$trips" "$work")
for r in $(seq "$reps"); do
    echo "untraced $("${app[@]}" | ms)"
    for cfg in nostacks stacks every; do
        rm -rf "$d/t"
        flag=()
        [ $cfg = nostacks ] && flag=(--no-stacks)
        [ $cfg = every ] && flag=(--stack-min-block 0)
        m=$("$J" run "${flag[@]}" -o "$d/t" -- "${app[@]}" 2>/dev/null | ms)
        bytes=$(stat -c %s "$d/t/kernel.bin")
        echo "$cfg $m $bytes"
    done
    echo "bpftrace $(bpftrace -q -c "${app[*]}" -e \
        'tracepoint:sched:sched_switch /pid == cpid/ { @[kstack, ustack] = count(); } END { clear(@); }' \
        2>/dev/null | ms)"
    for fp in -XX:-PreserveFramePointer -XX:+PreserveFramePointer; do
        echo "compute$fp $("$java" "$fp" -cp "$d" StackCost compute 400 | ms)"
    done
    for hz in 0 99; do
        rm -rf "$d/t"
        echo "samples$hz $("$J" run --cpu-samples $hz -o "$d/t" -- "$java" -cp "$d" StackCost compute 3000 2>/dev/null | ms)"
    done
done >"$d/runs"
cat "$d/runs"
python3 - "$d/runs" "$trips" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = line.split()
    runs.setdefault(f[0], []).append([float(x) for x in f[1:]])
trips = int(sys.argv[2])
switches = 2 * trips
med = {k: statistics.median(v[0] for v in vs) for k, vs in runs.items()}
for k, vs in runs.items():
    ms = [v[0] for v in vs]
    extra = ""
    if k in ("stacks", "nostacks", "every"):
        b = statistics.median(v[1] for v in vs)
        extra = f"  kernel.bin {b / switches:5.1f} B/switch"
    if k in ("stacks", "nostacks", "every", "bpftrace"):
        extra += f"  x{med[k] / med['untraced']:.3f} untraced"
    print(f"{k:28} min {min(ms):8.1f}  median {med[k]:8.1f} ms{extra}")
print(f"switch rate untraced: {switches / med['untraced'] * 1e3:,.0f}/s")
for k in ("stacks", "every", "bpftrace"):
    print(f"{k} vs --no-stacks: x{med[k] / med['nostacks']:.3f}, "
          f"{(med[k] - med['nostacks']) * 1e6 / switches:+.0f} ns per switch")
print(f"PreserveFramePointer: x{med['compute-XX:+PreserveFramePointer'] / med['compute-XX:-PreserveFramePointer']:.3f}")
print(f"99 Hz CPU samples vs none (CPU-bound): x{med['samples99'] / med['samples0']:.4f}")
PY
echo "load after: $(uptime | sed 's/.*load average: //')"
