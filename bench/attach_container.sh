#!/bin/sh
# Start-up cost of `jtrace attach` into a JVM in a container, against the
# same attach on the host. Each round starts two fresh JVMs running
# GroundTruthLoop (tests/java: sleeps, a contended monitor, a loopback
# socket; mostly asleep), one on the host and one in a rootful podman
# container (an image made from nothing, the host's /usr mounted
# read-only), waits 3 s, then times `jtrace attach PID --duration 1s
# --methods 'GroundTruth.*'` from its start to its "recording" line: host
# and container interleaved, the order swapped every round. A cold attach
# each time (the JVM's first: listener, agent load; in the container also
# the session's directory, the agent's copy and its check). Prints min /
# median per side and the container / host ratio of the medians.
# Usage: sudo sh bench/attach_container.sh [ROUNDS]   (needs podman, crun,
# target/release/jtrace and the agent)
set -eu
ROUNDS=${1:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
J=$ROOT/target/release/jtrace
JDK=/usr/lib/jvm/java-17-openjdk-amd64
IMAGE=localhost/jtrace-bench-base:1
W=$(mktemp -d /tmp/jtrace-attach-ctr-bench.XXXXXX)
CTR=jtrace-bench-$$
HOSTJVM=
cleanup() {
    podman rm -f -t 0 "$CTR" >/dev/null 2>&1 || true
    [ -z "$HOSTJVM" ] || kill "$HOSTJVM" 2>/dev/null || true
    rm -rf "$W"
}
trap cleanup EXIT
"$JDK/bin/javac" --release 11 -nowarn -d "$W/cls" "$ROOT/tests/java/GroundTruth.java" "$ROOT/tests/java/GroundTruthLoop.java"
chmod -R a+rX "$W"
mkdir -p "$W/root/usr" "$W/root/proc" "$W/root/sys" "$W/root/dev" "$W/root/etc" "$W/root/tmp"
chmod 1777 "$W/root/tmp"
for l in lib lib64 bin sbin; do ln -s "usr/$l" "$W/root/$l"; done
tar -C "$W/root" -cf "$W/base.tar" .
podman image exists "$IMAGE" || podman import "$W/base.tar" "$IMAGE" >/dev/null 2>&1
ms() { echo $(( $(date +%s%N) / 1000000 )); }
# Attach to $1; prints the milliseconds from jtrace's start to "recording".
attach_ms() {
    : > "$W/log"
    a0=$(ms)
    "$J" attach "$1" --duration 1s --methods 'GroundTruth.*' -o "$W/t.jtrace" 2> "$W/log" &
    ap=$!
    while ! grep -q recording "$W/log"; do
        kill -0 "$ap" 2>/dev/null || { cat "$W/log" >&2; exit 1; }
        sleep 0.002
    done
    a1=$(ms)
    wait "$ap"
    rm -rf "$W/t.jtrace"
    echo $((a1 - a0))
}
: > "$W/host"
: > "$W/ctr"
for r in $(seq "$ROUNDS"); do
    "$JDK/bin/java" -cp "$W/cls" GroundTruthLoop 100 60 > /dev/null &
    HOSTJVM=$!
    podman run --rm -d --name "$CTR" --network none --ulimit nofile=20000:20000 --ulimit nproc=4096:4096 \
        -v /usr:/usr:ro -v /etc/java-17-openjdk:/etc/java-17-openjdk:ro -v "$W/cls:/classes:ro" \
        "$IMAGE" "$JDK/bin/java" -cp /classes GroundTruthLoop 100 60 > /dev/null
    CPID=$(podman inspect -f '{{.State.Pid}}' "$CTR")
    sleep 3
    if [ $((r % 2)) = 1 ]; then
        attach_ms "$HOSTJVM" >> "$W/host"
        attach_ms "$CPID" >> "$W/ctr"
    else
        attach_ms "$CPID" >> "$W/ctr"
        attach_ms "$HOSTJVM" >> "$W/host"
    fi
    kill "$HOSTJVM"
    wait "$HOSTJVM" 2>/dev/null || true
    HOSTJVM=
    podman rm -f -t 0 "$CTR" > /dev/null
done
mm() { sort -n "$1" | awk '{ a[NR] = $1 } END { printf "%d / %d", a[1], a[int((NR + 1) / 2)] }'; }
med() { sort -n "$1" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo "== attach start-up, ms to \"recording\" (min / median over $ROUNDS cold attaches, JDK 17)"
echo "host JVM:      $(mm "$W/host")   ($(tr '\n' ' ' < "$W/host"))"
echo "container JVM: $(mm "$W/ctr")   ($(tr '\n' ' ' < "$W/ctr"))"
echo "container / host (medians): $(awk -v c="$(med "$W/ctr")" -v h="$(med "$W/host")" 'BEGIN { printf "%.2f", c / h }')"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
