#!/usr/bin/env bash
# Cost of stacks, ratios taken in one run, configurations
# interleaved in each repeat (run as root):
#   bench/stacks_cost.sh [REPEATS] [WORK]       (defaults 5, 45000)
#   JTRACE=target/release/jtrace; JAVA=java
# 1. Java ping-pong (bench/stacks/StackCost.java) on CPU 0: two platform
#    threads, park/unpark, WORK multiply-adds per hop (45000 ≈ 60 µs on an AMD EPYC:
#    ≈15k switches/s). untraced; jtrace run --no-stacks; jtrace run (stacks
#    at every switch-out + 99 Hz CPU samples). Prints min/median ms, the
#    ratio to untraced and to --no-stacks, the ns stacks add per switch,
#    and kernel.bin bytes per switch with and without stacks.
# 2. -XX:+PreserveFramePointer (what `run` adds) on a CPU-bound call tree,
#    untraced: min/median ms with and without the flag.
# 3. CPU samples: the CPU-bound call tree (StackCost compute 3000, few
#    switches) under jtrace run --cpu-samples 0 and --cpu-samples 99.
set -euo pipefail
reps=${1:-5}
work=${2:-45000}
J=${JTRACE:-target/release/jtrace}
java=${JAVA:-java}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
javac -d "$d" "$(dirname "$0")/stacks/StackCost.java"
trips=20000
echo "host: $(lscpu | sed -n 's/^Model name: *//p'); load: $(uptime | sed 's/.*load average: //')"
ms() { sed -n 's/^MS //p'; }
for r in $(seq "$reps"); do
    echo "untraced $(taskset -c 0 "$java" -cp "$d" StackCost pingpong $trips "$work" | ms)"
    for cfg in nostacks stacks; do
        rm -rf "$d/t"
        flag=(); [ $cfg = nostacks ] && flag=(--no-stacks)
        m=$("$J" run "${flag[@]}" -o "$d/t" -- taskset -c 0 "$java" -cp "$d" StackCost pingpong $trips "$work" 2>/dev/null | ms)
        bytes=$(stat -c %s "$d/t/kernel.bin")
        echo "$cfg $m $bytes"
    done
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
    if k in ("stacks", "nostacks"):
        b = statistics.median(v[1] for v in vs)
        extra = f"  kernel.bin {b / switches:5.1f} B/switch  x{med[k] / med['untraced']:.3f} untraced"
    print(f"{k:28} min {min(ms):8.1f}  median {med[k]:8.1f} ms{extra}")
print(f"switch rate untraced: {switches / med['untraced'] * 1e3:,.0f}/s")
print(f"stacks vs --no-stacks: x{med['stacks'] / med['nostacks']:.3f}, "
      f"{(med['stacks'] - med['nostacks']) * 1e6 / switches:+.0f} ns per switch")
print(f"PreserveFramePointer: x{med['compute-XX:+PreserveFramePointer'] / med['compute-XX:-PreserveFramePointer']:.3f}")
print(f"99 Hz CPU samples vs none (CPU-bound): x{med['samples99'] / med['samples0']:.4f}")
PY
echo "load after: $(uptime | sed 's/.*load average: //')"
