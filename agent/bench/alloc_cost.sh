#!/usr/bin/env bash
# Cost of allocation sampling (BENCHMARKS.md, "Allocation samples").
#
# Usage: agent/bench/alloc_cost.sh [REPEATS]   (default 9)
#
# Runs agent/bench/java/alloc/AllocBench (20 M iterations, ≈ 6.2 GB
# allocated in the measured phase, -Xms2g -Xmx2g) under the agent with its
# default events and with `object_allocation on` (JVMTI SampledObjectAlloc
# every ≈ 512 KiB, each sample with its site: a 16-frame stack walk and a
# line-table lookup), interleaved, on JDK 17 and 25. Prints min / median of
# the measured phase per set-up, the samples of one run, and the cost per
# sample.
set -euo pipefail
cd "$(dirname "$0")/../.."
repeats=${1:-9}
cargo build -q --release -p jtrace-agent
agent=$PWD/target/release/libjtrace_agent.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
javac --release 17 -d "$tmp" agent/bench/java/alloc/AllocBench.java
printf 'output %s/out\n' "$tmp" >"$tmp/off.conf"
printf 'output %s/out\nobject_allocation on\n' "$tmp" >"$tmp/on.conf"
for jdk in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64; do
    [ -x "$jdk/bin/java" ] || continue
    : >"$tmp/rows"
    for _ in $(seq "$repeats"); do
        for c in off on; do
            rm -rf "$tmp/out"
            ms=$("$jdk/bin/java" -Xms2g -Xmx2g "-agentpath:$agent=$tmp/$c.conf" -cp "$tmp" AllocBench 20000000 | sed -n 's/^MS //p')
            samples=$(python3 - "$tmp/out" <<'PY'
import glob, struct, sys
n = 0
for f in glob.glob(sys.argv[1] + "/jvm-*.bin"):
    b = open(f, "rb").read()
    p = 16
    while p + 16 <= len(b):
        k, l = struct.unpack_from("<HH", b, p)
        if l == 0:
            break
        n += k == 122
        p += l
print(n)
PY
)
            echo "$c $ms $samples" >>"$tmp/rows"
        done
    done
    echo "== $("$jdk/bin/java" -version 2>&1 | head -1), $repeats runs per set-up"
    python3 - "$tmp/rows" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    c, ms, n = line.split()
    rows.setdefault(c, []).append((float(ms), int(n)))
for c, v in rows.items():
    ms = [x[0] for x in v]
    print(f"{c:4} measured phase ms min {min(ms):8.1f} median {statistics.median(ms):8.1f}  samples per run (whole run) {statistics.median([x[1] for x in v]):.0f}")
off = [x[0] for x in rows["off"]]
on = [x[0] for x in rows["on"]]
n = statistics.median([x[1] for x in rows["on"]])
# The measured phase is 2/3 of the allocation of a run (two warm-ups of 1/4).
d_min, d_med = min(on) - min(off), statistics.median(on) - statistics.median(off)
print(f"sampling: {d_min / min(off) * 100:+.1f} % / {d_med / statistics.median(off) * 100:+.1f} % (min / median), "
      f"≈ {d_med * 1e3 / (n * 2 / 3):.1f} µs per sample (median)")
PY
done
