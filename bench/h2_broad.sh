#!/usr/bin/env bash
# Broad instrumentation at bounded cost: the H2 workload of
# bench/h2/H2Load.java (Debian's libh2-java; 8 JDBC threads x 500 rounds of
# insert, commit, update of one shared row, range query; in-memory
# database) untraced, traced with --methods 'org.h2.*' (adaptive demotion,
# the default budget), traced with no method selected (the floor: kernel
# recorder, stacks, agent), traced with --complete (every probe), and, on JDK 25,
# under JFR jdk.MethodTiming filtered to H2's classes; interleaved, REPS
# times. Prints per run the rounds' elapsed ms (H2Load's own clock: JVM
# start-up and H2 set-up excluded) and trace size, then the ratios to the
# untraced run of the same repetition (min / median, and the ratio of the
# medians; elapsed and CPU) and the agreement of
# the top-10 methods by off-CPU time (all of it, and the blocking causes
# alone; then the latter again with --complete's ranking left without the
# methods the default run declares it skipped) between the last default and
# --complete traces. Run as root from the repository (jtrace built).
# Each repetition also runs the default again with the rules `jtrace report
# --exclude-demoted` makes of the previous default trace (label nextrun:
# the demoted methods get no probes from the start).
# BASELINE=<another jtrace binary> adds its default run (label
# budget_base), interleaved (the two take turns at running first), for
# before/after ratios taken in one run. Every run starts after a sync: the
# page cache the previous run's trace dirtied is not written back during it.
# Usage: bench/h2_broad.sh [REPS] [JDK_HOME]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
reps="${1:-3}"
jdk="${2:-/usr/lib/jvm/java-17-openjdk-amd64}"
jdk25=/usr/lib/jvm/temurin-25-jdk-amd64
h2=/usr/share/java/h2.jar
jtrace="$root/target/release/jtrace"
[ -f "$h2" ] || { echo "h2_broad: $h2 missing (apt-get install libh2-java)" >&2; exit 2; }
[ -x "$jtrace" ] || { echo "h2_broad: build jtrace first (cargo build --release --workspace)" >&2; exit 2; }
tmp="$(mktemp -d /tmp/h2_broad.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
"$jdk/bin/javac" --release 11 -cp "$h2" -d "$tmp/cls" "$root/bench/h2/H2Load.java"
cp="$h2:$tmp/cls"
# JFR's filter takes class names, not globs: every class of org.h2 in the jar.
jfr_filter="$(unzip -Z1 "$h2" | grep '^org/h2/.*\.class$' | sed 's/\.class$//; s|/|.|g' | paste -sd';')"
echo "host: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; load: $(uptime | sed 's/.*load average: //')"

# one LABEL CMD...: runs CMD, prints "LABEL rounds_ms size_bytes cpu_s"
# (cpu_s: user + system CPU of CMD and its children, jtrace's recorder
# included: unlike the elapsed time, it does not depend on what else the
# machine runs).
one() {
    local label="$1"; shift
    local ms
    # The previous run's trace (2 GB for --complete) is written back
    # first, not while this run is measured.
    sync
    ms="$(/usr/bin/time -f '%U %S' -o "$tmp/time" "$@" 2>"$tmp/err" | sed -n 's/^rounds_ms \([0-9]*\).*/\1/p')"
    [ -n "$ms" ] || { echo "h2_broad: $label failed:" >&2; cat "$tmp/err" >&2; exit 1; }
    local size=0
    [ -d "$tmp/t.jtrace" ] && size="$(du -sb "$tmp/t.jtrace" | cut -f1)"
    echo "$label $ms $size $(awk '{print $1 + $2}' "$tmp/time")"
}

budget() {
    one budget "$jtrace" run -o "$tmp/t.jtrace" --methods 'org.h2.*' -- "$jdk/bin/java" -cp "$cp" H2Load mem
    rm -rf "$tmp/b.jtrace"; mv "$tmp/t.jtrace" "$tmp/b.jtrace"
}
budget_base() {
    if [ -n "${BASELINE:-}" ]; then
        one budget_base "$BASELINE" run -o "$tmp/t.jtrace" --methods 'org.h2.*' -- "$jdk/bin/java" -cp "$cp" H2Load mem
        rm -rf "$tmp/t.jtrace"
    fi
}
for r in $(seq "$reps"); do
    rm -rf "$tmp/t.jtrace" "$tmp/c.jtrace"
    one untraced "$jdk/bin/java" -cp "$cp" H2Load mem
    # The two builds take turns at coming first after the untraced run.
    if [ $((r % 2)) = 1 ]; then budget; budget_base; else budget_base; budget; fi
    # The next run of the same program, without the demoted methods' probes.
    "$jtrace" report "$tmp/b.jtrace" --exclude-demoted > "$tmp/keep.conf"
    one nextrun "$jtrace" run -o "$tmp/t.jtrace" --config "$tmp/keep.conf" --methods 'org.h2.*' -- "$jdk/bin/java" -cp "$cp" H2Load mem
    rm -rf "$tmp/n.jtrace"; mv "$tmp/t.jtrace" "$tmp/n.jtrace"
    # The floor: kernel recorder, stacks and agent, no method selected.
    one nomethod "$jtrace" run -o "$tmp/t.jtrace" --methods 'nomatch.*' -- "$jdk/bin/java" -cp "$cp" H2Load mem
    rm -rf "$tmp/t.jtrace"
    one complete "$jtrace" run --complete -o "$tmp/t.jtrace" --methods 'org.h2.*' -- "$jdk/bin/java" -cp "$cp" H2Load mem
    rm -rf "$tmp/c.jtrace"; mv "$tmp/t.jtrace" "$tmp/c.jtrace"
    if [ -x "$jdk25/bin/java" ]; then
        one untraced25 "$jdk25/bin/java" -cp "$cp" H2Load mem
        one jfr25 "$jdk25/bin/java" "-XX:StartFlightRecording:jdk.MethodTiming#filter=$jfr_filter,filename=$tmp/h2.jfr" -cp "$cp" H2Load mem
    fi
    echo "sizes budget $(du -sb "$tmp/b.jtrace" | cut -f1) complete $(du -sb "$tmp/c.jtrace" | cut -f1)"
done | tee "$tmp/runs"

"$jtrace" report --json "$tmp/b.jtrace" > "$tmp/b.json"
"$jtrace" report --json "$tmp/c.jtrace" > "$tmp/c.json"
"$jtrace" report --json "$tmp/n.jtrace" > "$tmp/n.json"
python3 - "$tmp/runs" "$tmp/b.json" "$tmp/c.json" "$tmp/n.json" <<'PY'
import json, statistics, sys
runs = [l.split() for l in open(sys.argv[1])]
by = {}
rep = []
for w in runs:
    if w[0] == "untraced":
        rep = {}
        by.setdefault("reps", []).append(rep)
    if w[0] != "sizes":
        rep[w[0]] = (int(w[1]), int(w[2]), float(w[3]))
    else:
        rep["size_budget"], rep["size_complete"] = int(w[2]), int(w[4])
def ratios(label, base):
    both = [r for r in by["reps"] if label in r and base in r]
    v = [r[label][0] / r[base][0] for r in both]
    c = [r[label][2] / r[base][2] for r in both]
    of_medians = v and statistics.median(r[label][0] for r in both) / statistics.median(r[base][0] for r in both)
    return v and (f"{label}/{base}: elapsed min {min(v):.2f}x median {statistics.median(v):.2f}x "
                  f"(ratio of the medians {of_medians:.2f}x); "
                  f"CPU min {min(c):.2f}x median {statistics.median(c):.2f}x ({len(v)} runs)")
for label, base in [("nomethod", "untraced"), ("budget", "untraced"), ("nextrun", "untraced"), ("budget_base", "untraced"), ("budget", "budget_base"),
                    ("complete", "untraced"), ("jfr25", "untraced25")]:
    s = ratios(label, base)
    if s:
        print(s)
sz = [r["size_budget"] / r["size_complete"] for r in by["reps"]]
print(f"trace size budget/complete: min {min(sz):.3f} median {statistics.median(sz):.3f}; "
      f"last {by['reps'][-1]['size_budget'] / 1e6:.1f} MB vs {by['reps'][-1]['size_complete'] / 1e6:.1f} MB")
# All off-CPU time but the tracer's own (cause `tracer`: its writes of the
# records, which --complete's volume makes wait), and the blocking causes
# alone (also without runqueue, gc and safepoint: CPU contention, which
# --complete's own cost inflates, and stops of the whole JVM).
NOT_BLOCKING = {"runqueue", "gc", "safepoint", "tracer"}
# By signature too: overloads (two MVPrimaryIndex.lockRow) are two methods.
sig = lambda x: f'{x["class"]}.{x["name"]}{x["signature"]}'
bj = json.load(open(sys.argv[2]))
# The methods the default run declares it left without probes (trivial
# getters and forwarders: trivial_skipped): --complete traces them, and a
# forwarder's blocking time is also its traced callee's.
skipped = {sig(x) for x in (bj.get("trivial_skipped") or {}).get("methods", [])}
# The report ranks the methods left without probes too, with their
# off-CPU time from the stacks that hold them (stack_only_methods).
def top(path, blocking, leave_out=()):
    j = json.load(open(path))
    m = [x for x in j["methods"] + j.get("stack_only_methods", []) if sig(x) not in leave_out]
    off = lambda x: sum(v for k, v in x["off_cpu_ns"].items() if k != "tracer" and (not blocking or k not in NOT_BLOCKING))
    # Exact ties (a forwarder chain blocks only in its innermost callee)
    # rank by name: the same order in both traces.
    return [sig(x) for x in sorted(m, key=lambda x: (-off(x), sig(x)))[:10]]
for blocking, leave_out in ((False, ()), (True, ()), (True, skipped)):
    b, c = top(sys.argv[2], blocking), top(sys.argv[3], blocking, leave_out)
    what = "blocking off-CPU (no runqueue, gc, safepoint, tracer)" if blocking else "off-CPU (no tracer)"
    if leave_out:
        what += ", --complete's without the methods the default run left without probes"
    print(f"top-10 by {what}: {len(set(b) & set(c))} of 10 shared, same order: {b == c}")
    for i, (x, y) in enumerate(zip(b, c)):
        print(f"  {i + 1:2} {x:60} {'=' if x == y else y}")
n = top(sys.argv[4], True)
c = top(sys.argv[3], True)
print(f"top-10 by blocking off-CPU, the last nextrun against --complete: {len(set(n) & set(c))} of 10 shared, same order: {n == c}")
d = bj.get("demoted", [])
# One METHOD_DEMOTED timestamp per retransformation batch.
print(f"demoted methods (last budget run): {len(d)} in {len({x['demoted_at_ns'] for x in d})} batches; "
      f"recorded calls {sum(x['calls_recorded'] for x in d)}, "
      f"estimated calls after {sum(x['est_calls_after'] for x in d)}")
print(f"trivial methods not instrumented (last budget run): {(bj.get('trivial_skipped') or {}).get('count', 0)}")
PY
