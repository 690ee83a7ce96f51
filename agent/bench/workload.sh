#!/usr/bin/env bash
# Tracing overhead on a multi-threaded request-processing workload
# (BENCHMARKS.md, "Method tracing cost", "Multi-threaded workload").
#
# Usage: agent/bench/workload.sh [REPEATS] [THREADS] [REQUESTS] [BODY WORDS...]
#        (default 5 4 300000 200 800; root for the `jtrace run` set-ups)
# Environment:
#   MODES="short steady"  which measured phases (default: both)
#     short   a warm-up of a quarter of REQUESTS, then REQUESTS measured
#             (1-5 s): the JIT compilers are still at work in it, so it
#             includes their one-off cost
#     steady  warm-up until the JIT is done (>= 5 s), then STEADY_REQUESTS
#             measured (>= 15 s): the per-call cost alone
#   STEADY_REQUESTS=4000000  measured requests of a steady run (200 words)
#   SETUPS="plain agent agent+methods run run+methods"  (default: all)
#   BASELINE_AGENT=path/libjtrace_agent.so  also run the set-ups named in
#     BASELINE_SETUPS (default "agent agent+methods run+methods") with this
#     (older) agent, as base:agent etc., interleaved with the others:
#     before/after figures from the same runs
#   JTRACE_BENCH_OUT  where traces go (default /dev/shm)
#
# agent/bench/java/{work,infra}: worker threads build, parse, validate, hash
# (SHA-256) and render requests, with a shared LRU cache behind a lock and
# per-user statistics in a concurrent map (package infra, not traced);
# every method of package `work` is traced: 6 calls per request. The body
# size sets the work per call: 200 words (8 bytes each) is about 0.9 us of
# CPU per traced call on average on this machine, 800 about 3.3 us; the
# request counts are for 200 words and scaled down for bigger bodies.
# Set-ups, interleaved, REPEATS times each, on JDK 17 and 25:
#   plain          java
#   agent          java -agentpath:libjtrace_agent.so, default JVM events, no methods
#   agent+methods  the same tracing work.* (no kernel side)
#   run            jtrace run (kernel recording, the agent without methods)
#   run+methods    jtrace run --methods 'work.*'
# Prints min / median of the measured phase's elapsed time ("workload"),
# of the CPU time of its worker threads (the cost on the application's own
# threads), of the JIT compiler threads and of the whole JVM in that phase,
# of the warm-up's length and JIT CPU, and of the CPU time (user + sys) and
# wall time of the process and its children (JIT, GC, the tracer's threads
# and, for `jtrace run`, the kernel recorder included); then the overheads
# of method tracing (agent+methods vs agent, run+methods vs run) and of the
# whole agent (agent+methods vs plain), from the minima (on a loaded machine
# noise only adds time) and from the medians.
set -euo pipefail
cd "$(dirname "$0")/../.."
repeats=${1:-5}
threads=${2:-4}
requests=${3:-300000}
shift $(($# < 3 ? $# : 3))
bodies=("$@")
[ ${#bodies[@]} -gt 0 ] || bodies=(200 800)
read -r -a modes <<<"${MODES:-short steady}"
read -r -a setups <<<"${SETUPS:-plain agent agent+methods run run+methods}"
steady_requests=${STEADY_REQUESTS:-4000000}
base_agent=${BASELINE_AGENT:-}
read -r -a base_setups <<<"${BASELINE_SETUPS:-agent agent+methods run+methods}"
if [ -n "$base_agent" ] && [ ! -f "$base_agent" ]; then
    echo "BASELINE_AGENT=$base_agent is not a file" >&2
    exit 2
fi
cargo build -q --release -p jtrace -p jtrace-agent
jtrace=$PWD/target/release/jtrace
agent=$PWD/target/release/libjtrace_agent.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
base=${JTRACE_BENCH_OUT:-/dev/shm}/jtrace-workload-$$
javac --release 17 -d "$tmp/classes" agent/bench/java/work/*.java agent/bench/java/infra/*.java
printf 'output %s\n' "$base" >"$tmp/events.conf"
printf 'output %s\ninclude_method work.*\n' "$base" >"$tmp/methods.conf"

one() { # rows-file label command...
    local rows=$1 label=$2
    shift 2
    rm -rf "$base"
    local o v k
    o=$(/usr/bin/time -f '%e %U %S' -o "$tmp/time" "$@" 2>/dev/null)
    local vals=()
    for k in ELAPSED_MS WORKER_CPU_MS JIT_CPU_MS PROCESS_CPU_MS WARMUP_MS WARMUP_JIT_CPU_MS; do
        v=$(sed -n "s/^$k //p" <<<"$o")
        [ -n "$v" ] || { echo "no $k from: $*" >&2; exit 1; }
        vals+=("$v")
    done
    echo "$label ${vals[*]} $(tail -1 "$tmp/time")" >>"$rows"
    rm -rf "$base"
}

run_setup() { # rows-file label agent-so java-command...
    local rows=$1 label=$2 so=$3
    shift 3
    case ${label#base:} in
        plain) one "$rows" "$label" "$@" ;;
        agent) one "$rows" "$label" "$1" "-agentpath:$so=$tmp/events.conf" "${@:2}" ;;
        agent+methods) one "$rows" "$label" "$1" "-agentpath:$so=$tmp/methods.conf" "${@:2}" ;;
        run) JTRACE_AGENT=$so one "$rows" "$label" "$jtrace" run -o "$base" -- "$@" ;;
        run+methods) JTRACE_AGENT=$so one "$rows" "$label" "$jtrace" run -o "$base" --methods 'work.*' -- "$@" ;;
        *) echo "unknown set-up $label" >&2; exit 2 ;;
    esac
}

for mode in "${modes[@]}"; do
for words in "${bodies[@]}"; do
for jdk in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64; do
    [ -x "$jdk/bin/java" ] || continue
    case $mode in
        short) n=$((requests * 200 / words)) ;;
        steady) n=$((steady_requests * 200 / words)) ;;
        *) echo "unknown mode $mode" >&2; exit 2 ;;
    esac
    rows=$tmp/rows-$mode-$words-$(basename "$jdk")
    java=("$jdk/bin/java" -cp "$tmp/classes" work.Workload "$threads" "$n" "$words" "$mode")
    for _ in $(seq "$repeats"); do
        for s in "${setups[@]}"; do
            run_setup "$rows" "$s" "$agent" "${java[@]}"
            if [ -n "$base_agent" ] && [[ " ${base_setups[*]} " == *" $s "* ]]; then
                run_setup "$rows" "base:$s" "$base_agent" "${java[@]}"
            fi
        done
    done
    echo "== $mode: $("$jdk/bin/java" -version 2>&1 | head -1), $threads threads, $n requests measured," \
        "body $words words, $repeats runs each, load before: $(cut -d' ' -f1-3 /proc/loadavg), after: see next"
    python3 - "$rows" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    label, v = f[0], [float(x) for x in f[1:]]
    ms, wcpu, jit, pcpu, wu, wujit, wall, user, sys_ = v
    rows.setdefault(label, []).append((ms, wcpu, jit, pcpu, wu, wujit, user + sys_, wall))
cols = ["workload ms", "worker CPU ms", "JIT CPU ms", "JVM CPU ms", "warm-up ms", "warm-up JIT ms",
        "CPU s", "wall s"]
def mm(xs, f):
    return f"{min(xs):{f}} / {statistics.median(xs):{f}}"
print(f"{'set-up':<19}" + "".join(f"{c + ' min/med':>24}" for c in cols))
for k, v in rows.items():
    print(f"{k:<19}" + "".join(f"{mm([x[i] for x in v], '.1f' if i < 6 else '.2f'):>24}" for i in range(8)))
def over(t, u, i, f):
    a = [x[i] for x in rows[t]]
    b = [x[i] for x in rows[u]]
    return f"{100 * (f(a) / f(b) - 1):+.1f}%"
def diff(t, u, i, f):
    a = [x[i] for x in rows[t]]
    b = [x[i] for x in rows[u]]
    return f"{f(a) - f(b):+.0f}"
pairs = [("agent+methods", "agent"), ("run+methods", "run"), ("agent+methods", "plain"),
         ("base:agent+methods", "base:agent"), ("base:agent+methods", "agent"), ("base:run+methods", "run"),
         ("agent+methods", "base:agent+methods"), ("run+methods", "base:run+methods")]
med = statistics.median
for t, u in pairs:
    if t in rows and u in rows:
        print(f"{t} vs {u}: workload {over(t, u, 0, min)} / {over(t, u, 0, med)} (min / median); "
              f"worker CPU {over(t, u, 1, min)} / {over(t, u, 1, med)}; "
              f"JVM CPU {over(t, u, 3, min)} / {over(t, u, 3, med)}; "
              f"JIT CPU ms {diff(t, u, 2, min)} / {diff(t, u, 2, med)}; "
              f"warm-up JIT ms {diff(t, u, 5, min)} / {diff(t, u, 5, med)}; "
              f"CPU {over(t, u, 6, min)} / {over(t, u, 6, med)}; wall {over(t, u, 7, min)} / {over(t, u, 7, med)}")
PY
    echo "   load after: $(cut -d' ' -f1-3 /proc/loadavg)"
done
done
done
