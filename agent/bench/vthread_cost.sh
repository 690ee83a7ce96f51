#!/usr/bin/env bash
# Cost of following virtual threads (BENCHMARKS.md, "Virtual threads").
#
# Usage: agent/bench/vthread_cost.sh [REPEATS]   (default 5)
#
# Runs agent/bench/java/vthreads/PingPong.java (two virtual threads handing
# a token back and forth with park/unpark: every hand-over unmounts one and
# mounts the other) on JDK 21 and 25, JVMs interleaved REPEATS times, each
# printing 5 rounds: untraced; the agent with its default configuration
# (virtual threads followed from the bytecode: start/end/mount/unmount/
# unpark events, no methods); the agent with `bytecode_rewriting off`
# (followed with JVMTI's virtual thread events instead); the agent with
# `virtual_threads off`; and, untraced, the ping-pong reading the clock 3
# times a hand-over (`clock-floor`: what timestamping each unpark, unmount
# and mount costs by itself). Prints min / median ns per round trip and the
# ratio to untraced.
set -euo pipefail
cd "$(dirname "$0")/../.."
repeats=${1:-5}
cargo build -q --release -p jtrace-agent
bash scripts/test-jdks.sh >/dev/null
agent=$PWD/target/release/libjtrace_agent.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=${JTRACE_BENCH_OUT:-/dev/shm}/jtrace-bench-$$
javac --release 11 -d "$tmp" agent/bench/java/vthreads/PingPong.java
printf 'output %s\n' "$out" >"$tmp/on.conf"
printf 'output %s\nvirtual_threads off\n' "$out" >"$tmp/off.conf"
printf 'output %s\nbytecode_rewriting off\n' "$out" >"$tmp/jvmti.conf"
trips=100000

run() { # jdk label java-args...
    local jdk=$1 label=$2
    shift 2
    rm -rf "$out"
    "$jdk/bin/java" "$@" -cp "$tmp" vthreads.PingPong "$trips" 5 "${clocks:-0}" | sed -n "s/^ROUND /$label /p" >>"$tmp/rounds-$(basename "$jdk")"
    rm -rf "$out"
}

for jdk in "$PWD/target/jdks/21" /usr/lib/jvm/temurin-25-jdk-amd64; do
    [ -x "$jdk/bin/java" ] || continue
    for _ in $(seq "$repeats"); do
        run "$jdk" untraced
        clocks=3 run "$jdk" clock-floor
        run "$jdk" followed "-agentpath:$agent=$tmp/on.conf"
        run "$jdk" jvmti "-agentpath:$agent=$tmp/jvmti.conf"
        run "$jdk" not-followed "-agentpath:$agent=$tmp/off.conf"
    done
    echo "== $("$jdk/bin/java" -version 2>&1 | head -1), $repeats JVMs x 5 rounds"
    python3 - "$tmp/rounds-$(basename "$jdk")" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    label, ns = line.split()
    rows.setdefault(label, []).append(float(ns))
base = statistics.median(rows["untraced"])
print(f"{'agent':<13} {'ns/round trip min / median':>27} {'x untraced (median)':>20}")
for label, r in rows.items():
    print(f"{label:<13} {min(r):12.0f} / {statistics.median(r):8.0f} {statistics.median(r) / base:20.2f}")
PY
done
