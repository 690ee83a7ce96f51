#!/usr/bin/env bash
# Tracing overhead on a multi-threaded request-processing workload
# (BENCHMARKS.md, "Method tracing cost").
#
# Usage: agent/bench/workload.sh [REPEATS] [THREADS] [REQUESTS]   (default 5 4 80000; root)
#
# agent/bench/java/work/*.java: worker threads parse, validate, hash
# (SHA-256), cache (a locked LRU) and render requests; every method of
# package `work` (about 1 to 10 us each, 9 calls per request) is traced.
# Four set-ups, interleaved, REPEATS times each, on JDK 17 and 25:
#   plain        java
#   agent        java -agentpath:libjtrace_agent.so tracing work.* (no kernel side)
#   run          jtrace run (kernel recording, the agent without methods)
#   run+methods  jtrace run --methods 'work.*'
# Prints min / median of the workload's measured phase (ELAPSED_MS, after a
# warm-up of a quarter of the requests) and of the process wall time, and
# the overheads agent vs plain and run+methods vs run (medians).
# Traces go to $JTRACE_BENCH_OUT (default /dev/shm).
set -euo pipefail
cd "$(dirname "$0")/../.."
repeats=${1:-5}
threads=${2:-4}
requests=${3:-80000}
cargo build -q --release -p jtrace -p jtrace-agent
jtrace=$PWD/target/release/jtrace
agent=$PWD/target/release/libjtrace_agent.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
base=${JTRACE_BENCH_OUT:-/dev/shm}/jtrace-workload-$$
javac --release 17 -d "$tmp/classes" agent/bench/java/work/*.java
printf 'output %s\ninclude_method work.*\n' "$base" >"$tmp/agent.conf"

one() { # jdk label command...
    local jdk=$1 label=$2
    shift 2
    rm -rf "$base"
    local t0 t1 ms
    t0=$(date +%s%N)
    ms=$("$@" | sed -n 's/^ELAPSED_MS //p')
    t1=$(date +%s%N)
    [ -n "$ms" ] || { echo "no ELAPSED_MS from: $*" >&2; exit 1; }
    echo "$label $ms $(((t1 - t0) / 1000000))" >>"$tmp/rows-$(basename "$jdk")"
    rm -rf "$base"
}

for jdk in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64; do
    [ -x "$jdk/bin/java" ] || continue
    java=("$jdk/bin/java" -cp "$tmp/classes" work.Workload "$threads" "$requests")
    for _ in $(seq "$repeats"); do
        one "$jdk" plain "${java[@]}"
        one "$jdk" agent "${java[0]}" "-agentpath:$agent=$tmp/agent.conf" "${java[@]:1}"
        one "$jdk" run "$jtrace" run -o "$base" -- "${java[@]}"
        one "$jdk" run+methods "$jtrace" run -o "$base" --methods 'work.*' -- "${java[@]}"
    done
    echo "== $("$jdk/bin/java" -version 2>&1 | head -1), $threads threads, $requests requests, $repeats runs each"
    python3 - "$tmp/rows-$(basename "$jdk")" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    label, ms, wall = line.split()
    rows.setdefault(label, []).append((float(ms), float(wall)))
med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for k, v in rows.items()}
print(f"{'set-up':<12} {'workload ms (min / median)':>27} {'process wall ms (min / median)':>31}")
for k, v in rows.items():
    a = [x[0] for x in v]
    b = [x[1] for x in v]
    print(f"{k:<12} {min(a):12.1f} / {statistics.median(a):8.1f} {min(b):16.0f} / {statistics.median(b):8.0f}")
for t, u in (("agent", "plain"), ("run+methods", "run")):
    if t in med and u in med:
        print(f"overhead {t} vs {u}: workload {100 * (med[t][0] / med[u][0] - 1):+.1f}%, "
              f"process wall {100 * (med[t][1] / med[u][1] - 1):+.1f}%")
PY
done
