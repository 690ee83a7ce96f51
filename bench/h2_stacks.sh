#!/usr/bin/env bash
# Stacks on the H2 JDBC load (bench/h2/H2Load.java: Debian's libh2-java,
# 8 JDBC threads x 500 rounds, in-memory), no --methods (stacks are what
# the default run shows then), interleaved REPS times: untraced; jtrace
# run --no-stacks; jtrace run (the default: deferred stacks); jtrace run
# --stack-min-block 0 (stacks at every switch-out); bpftrace
# @[kstack, ustack] = count() on sched_switch of the JVM. Prints the
# rounds' ms (H2Load's own clock) per run, then min / median and the
# ratio of the medians to untraced. Run as root from the repository.
# Usage: bench/h2_stacks.sh [REPS] [JDK_HOME]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
reps="${1:-5}"
jdk="${2:-/usr/lib/jvm/java-17-openjdk-amd64}"
h2=/usr/share/java/h2.jar
jtrace="$root/target/release/jtrace"
[ -f "$h2" ] || { echo "h2_stacks: $h2 missing (apt-get install libh2-java)" >&2; exit 2; }
[ -x "$jtrace" ] || { echo "h2_stacks: build jtrace first (cargo build --release --workspace)" >&2; exit 2; }
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
tmp="$(mktemp -d /tmp/h2_stacks.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
"$jdk/bin/javac" --release 11 -cp "$h2" -d "$tmp/cls" "$root/bench/h2/H2Load.java"
app=("$jdk/bin/java" -XX:+PreserveFramePointer -cp "$h2:$tmp/cls" H2Load mem)
echo "host: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; load: $(uptime | sed 's/.*load average: //')"
ms() { sed -n 's/^rounds_ms \([0-9]*\).*/\1/p'; }
for r in $(seq "$reps"); do
    echo "untraced $("${app[@]}" | ms)"
    rm -rf "$tmp/t"; echo "nostacks $("$jtrace" run --no-stacks -o "$tmp/t" -- "${app[@]}" 2>/dev/null | ms)"
    rm -rf "$tmp/t"; echo "default $("$jtrace" run -o "$tmp/t" -- "${app[@]}" 2>/dev/null | ms)"
    rm -rf "$tmp/t"; echo "every $("$jtrace" run --stack-min-block 0 -o "$tmp/t" -- "${app[@]}" 2>/dev/null | ms)"
    echo "bpftrace $(bpftrace -q -c "${app[*]}" -e \
        'tracepoint:sched:sched_switch /pid == cpid/ { @[kstack, ustack] = count(); } END { clear(@); }' \
        2>/dev/null | ms)"
done | tee "$tmp/runs"
python3 - "$tmp/runs" <<'PY'
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
echo "load after: $(uptime | sed 's/.*load average: //')"
