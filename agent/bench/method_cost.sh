#!/usr/bin/env bash
# Per-invocation cost of method tracing (BENCHMARKS.md, "Method tracing cost").
#
# Usage: agent/bench/method_cost.sh [REPEATS]   (default 5)
#
# Runs agent/tests/java/bench/Bench.java (a tiny static method called in a
# loop; each round also measures an untraced call and the two-clock floor,
# 2 x System.nanoTime(), in the same JVM) under every tracer, on JDK 17 and
# 25. JVMs with different tracers are interleaved, REPEATS times; each JVM
# prints 5 rounds. Per tracer it prints min / median over all rounds of: ns
# per traced call, the floor measured in the same JVMs, the ratio of the two
# (min to min, median to median), the ratio to the median floor of the
# untraced JVMs (JVMTI method events slow down System.nanoTime too), and the
# process CPU per traced call (every thread of the JVM, tracer threads
# included).
#
# On JDK 21 and 25 also "untraced-vt" and "jtrace-vt": the same calls on
# a virtual thread (their buffer is the virtual thread's own), with the
# floor measured on that virtual thread.
#
# Tracers: none; jtrace (bytecode rewriting, trace written); JVMTI
# MethodEntry/MethodExit (the agent with bytecode_rewriting off); on JDK 25
# JFR method timing (jdk.MethodTiming) and tracing (jdk.MethodTrace), JEP 520.
# JDK 17 has no JFR method timing.
#
# The jtrace trace goes to $JTRACE_BENCH_OUT (default /dev/shm: the
# benchmark measures the tracer, not the disk).
#
# BASELINE_AGENT=path/libjtrace_agent.so adds a tracer "jtrace-base": that
# agent (e.g. built from an older commit) interleaved with this one, for a
# before/after comparison taken in one run.
set -euo pipefail
cd "$(dirname "$0")/../.."
repeats=${1:-5}
cargo build -q --release -p jtrace-agent
agent=$PWD/target/release/libjtrace_agent.so
base_agent=${BASELINE_AGENT:-}
if [ -n "$base_agent" ] && [ ! -f "$base_agent" ]; then
    echo "BASELINE_AGENT=$base_agent is not a file" >&2
    exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=${JTRACE_BENCH_OUT:-/dev/shm}/jtrace-bench-$$
javac --release 11 -d "$tmp" agent/tests/java/bench/Bench.java
bash scripts/test-jdks.sh >/dev/null
quiet=$'jit off\npark off\nsleep off\n'
printf 'output %s\n%sinclude_method Bench tiny\n' "$out" "$quiet" >"$tmp/jtrace.conf"
printf 'output %s\n%sbytecode_rewriting off\ninclude_method Bench tiny\n' "$out" "$quiet" >"$tmp/jvmti.conf"
calls=2000000

run() { # jdk label calls java-args...
    local jdk=$1 label=$2 n=$3
    shift 3
    rm -rf "$out"
    local virtual=
    case $label in *-vt) virtual=virtual ;; esac
    "$jdk/bin/java" "$@" -cp "$tmp" Bench "$n" 5 $virtual | sed -n "s/^ROUND /$label /p" >>"$tmp/rounds-$(basename "$jdk")"
    rm -rf "$out"
}

for jdk in /usr/lib/jvm/java-17-openjdk-amd64 "$PWD/target/jdks/21" /usr/lib/jvm/temurin-25-jdk-amd64; do
    [ -x "$jdk/bin/java" ] || continue
    for _ in $(seq "$repeats"); do
        run "$jdk" untraced "$calls"
        run "$jdk" jtrace "$calls" "-agentpath:$agent=$tmp/jtrace.conf"
        if "$jdk/bin/java" -version 2>&1 | grep -q '"2[1-9]'; then
            run "$jdk" untraced-vt "$calls"
            run "$jdk" jtrace-vt "$calls" "-agentpath:$agent=$tmp/jtrace.conf"
        fi
        if [ -n "$base_agent" ]; then
            run "$jdk" jtrace-base "$calls" "-agentpath:$base_agent=$tmp/jtrace.conf"
        fi
        run "$jdk" jvmti 200000 "-agentpath:$agent=$tmp/jvmti.conf"
        if "$jdk/bin/java" -version 2>&1 | grep -q '"2[5-9]'; then
            run "$jdk" jfr-timing "$calls" "-XX:StartFlightRecording:jdk.MethodTiming#filter=Bench::tiny,filename=$tmp/t.jfr"
            run "$jdk" jfr-trace 200000 "-XX:StartFlightRecording:jdk.MethodTrace#filter=Bench::tiny,filename=$tmp/t.jfr"
        fi
    done
    echo "== $("$jdk/bin/java" -version 2>&1 | head -1), $repeats JVMs x 5 rounds per tracer"
    python3 - "$tmp/rounds-$(basename "$jdk")" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    label, t, u, floor, cpu = line.split()
    rows.setdefault(label, []).append((float(t), float(floor), float(cpu)))
def mm(xs):
    return f"{min(xs):7.2f} / {statistics.median(xs):7.2f}"
# JVMTI method events slow down every call, System.nanoTime included, so a
# tracer's own floor can be meaningless: also compare with the untraced JVMs'.
base = statistics.median(x[1] for x in rows["untraced"])
print(f"{'tracer':<11} {'ns/call min / median':>21} {'floor min / median':>19} {'ratio min / median':>19} "
      f"{'x untraced floor':>17} {'CPU ns/call':>17}")
for label, r in rows.items():
    t = [x[0] for x in r]
    f = [x[1] for x in r]
    ratio = f"{min(t) / min(f):7.2f} / {statistics.median(t) / statistics.median(f):7.2f}"
    print(f"{label:<11} {mm(t):>21} {mm(f):>19} {ratio:>19} {mm([x / base for x in t]):>17} "
          f"{mm([x[2] for x in r]):>17}")
PY
done
