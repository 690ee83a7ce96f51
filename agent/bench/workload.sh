#!/usr/bin/env bash
# Tracing overhead on a multi-threaded request-processing workload
# (BENCHMARKS.md, "Method tracing cost").
#
# Usage: agent/bench/workload.sh [REPEATS] [THREADS] [REQUESTS] [BODY WORDS...]
#        (default 5 4 300000 200 800; root)
#
# agent/bench/java/{work,infra}: worker threads build, parse, validate, hash
# (SHA-256) and render requests, with a shared LRU cache behind a lock and
# per-user statistics in a concurrent map (package infra, not traced);
# every method of package `work` is traced: 6 calls per request. The body
# size sets the work per call: 200 words (8 bytes each) is about 0.9 us of
# CPU per traced call on average on this machine, 800 about 3.3 us; REQUESTS
# is for 200 words and scaled down for bigger bodies (same run time).
# Five set-ups, interleaved, REPEATS times each, on JDK 17 and 25:
#   plain          java
#   agent          java -agentpath:libjtrace_agent.so, default JVM events, no methods
#   agent+methods  the same tracing work.* (no kernel side)
#   run            jtrace run (kernel recording, the agent without methods)
#   run+methods    jtrace run --methods 'work.*'
# Prints min / median of the workload's measured phase (ELAPSED_MS, after a
# warm-up of a quarter of the requests), of the CPU time of its worker
# threads in that phase (WORKER_CPU_MS: the cost on the application's own
# threads), of the CPU time of the process and its children (user + sys:
# JIT, GC and the tracer's threads included) and of the process wall time; then the overheads
# of method tracing (agent+methods vs agent, run+methods vs run) and of the
# whole agent (agent+methods vs plain), from the minima (on a loaded machine
# noise only adds time) and from the medians.
# Traces go to $JTRACE_BENCH_OUT (default /dev/shm).
set -euo pipefail
cd "$(dirname "$0")/../.."
repeats=${1:-5}
threads=${2:-4}
requests=${3:-300000}
shift $(($# < 3 ? $# : 3))
bodies=("$@")
[ ${#bodies[@]} -gt 0 ] || bodies=(200 800)
cargo build -q --release -p jtrace -p jtrace-agent
jtrace=$PWD/target/release/jtrace
agent=$PWD/target/release/libjtrace_agent.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
base=${JTRACE_BENCH_OUT:-/dev/shm}/jtrace-workload-$$
javac --release 17 -d "$tmp/classes" agent/bench/java/work/*.java agent/bench/java/infra/*.java
printf 'output %s\n' "$base" >"$tmp/events.conf"
printf 'output %s\ninclude_method work.*\n' "$base" >"$tmp/methods.conf"

one() { # jdk label command...
    local jdk=$1 label=$2
    shift 2
    rm -rf "$base"
    local o ms wcpu
    o=$(/usr/bin/time -f '%e %U %S' -o "$tmp/time" "$@" 2>/dev/null)
    ms=$(sed -n 's/^ELAPSED_MS //p' <<<"$o")
    wcpu=$(sed -n 's/^WORKER_CPU_MS //p' <<<"$o")
    [ -n "$ms" ] && [ -n "$wcpu" ] || { echo "no ELAPSED_MS/WORKER_CPU_MS from: $*" >&2; exit 1; }
    echo "$label $ms $wcpu $(tail -1 "$tmp/time")" >>"$tmp/rows-$(basename "$jdk")"
    rm -rf "$base"
}

for words in "${bodies[@]}"; do
for jdk in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64; do
    [ -x "$jdk/bin/java" ] || continue
    n=$((requests * 200 / words))
    rm -f "$tmp/rows-$(basename "$jdk")"
    java=("$jdk/bin/java" -cp "$tmp/classes" work.Workload "$threads" "$n" "$words")
    for _ in $(seq "$repeats"); do
        one "$jdk" plain "${java[@]}"
        one "$jdk" agent "${java[0]}" "-agentpath:$agent=$tmp/events.conf" "${java[@]:1}"
        one "$jdk" agent+methods "${java[0]}" "-agentpath:$agent=$tmp/methods.conf" "${java[@]:1}"
        one "$jdk" run "$jtrace" run -o "$base" -- "${java[@]}"
        one "$jdk" run+methods "$jtrace" run -o "$base" --methods 'work.*' -- "${java[@]}"
    done
    echo "== $("$jdk/bin/java" -version 2>&1 | head -1), $threads threads, $n requests, body $words words, $repeats runs each"
    python3 - "$tmp/rows-$(basename "$jdk")" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    label, ms, wcpu, wall, user, sys_ = line.split()
    rows.setdefault(label, []).append((float(ms), float(user) + float(sys_), float(wall), float(wcpu)))
def mm(xs, f):
    return f"{min(xs):{f}} / {statistics.median(xs):{f}}"
print(f"{'set-up':<14} {'workload ms min / median':>25} {'worker CPU ms':>21} {'CPU s min / median':>19} "
      f"{'wall s min / median':>20}")
for k, v in rows.items():
    print(f"{k:<14} {mm([x[0] for x in v], '9.1f'):>25} {mm([x[3] for x in v], '9.1f'):>21} "
          f"{mm([x[1] for x in v], '6.2f'):>19} {mm([x[2] for x in v], '6.2f'):>20}")
def over(t, u, i, f):
    a = [x[i] for x in rows[t]]
    b = [x[i] for x in rows[u]]
    return f"{100 * (f(a) / f(b) - 1):+.1f}%"
for t, u in (("agent+methods", "agent"), ("run+methods", "run"), ("agent+methods", "plain")):
    print(f"{t} vs {u}: workload {over(t, u, 0, min)} (min) {over(t, u, 0, statistics.median)} (median); "
          f"worker CPU {over(t, u, 3, min)} / {over(t, u, 3, statistics.median)}; "
          f"CPU {over(t, u, 1, min)} / {over(t, u, 1, statistics.median)}; "
          f"wall {over(t, u, 2, min)} / {over(t, u, 2, statistics.median)}")
PY
done
done
