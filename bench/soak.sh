#!/usr/bin/env bash
# Soak: a busy JVM (tests/java/Busy.java, THREADS threads calling two
# small traced methods at full rate) traced for SECS seconds with every probe
# kept (--complete); samples jtrace's and the JVM's peak RSS and the JVM's
# resident part of its stream mapping, then the trace MB/s and the peak RSS
# of info, report and timeline (a 1 s window) on the result.
# Usage: sudo bench/soak.sh [SECS] [THREADS] [OUT_DIR]   (as root; needs GNU time)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-180}
threads=${2:-1}
out=${3:-/tmp/jtrace-soak}
J=target/release/jtrace
rm -rf "$out" && mkdir -p "$out/classes"
javac --release 11 -nowarn -d "$out/classes" tests/java/Busy.java
t=$out/t.jtrace
"$J" run --complete --methods 'Busy.*' --syscalls none -o "$t" -- \
    java -cp "$out/classes" Busy $((secs * 1000)) "$threads" >"$out/run.out" 2>"$out/run.err" &
jt=$!
sleep 2
jvm=$(sed -n 's/^pid //p' "$out/run.out" | head -1)
max_map=0
while kill -0 "$jvm" 2>/dev/null; do
    m=$(awk -v f="jvm-$jvm.bin" '$0 ~ /^[0-9a-f]+-[0-9a-f]+ / {in_=($NF ~ f)} in_ && /^Rss:/ {s+=$2} END {print s+0}' /proc/"$jvm"/smaps 2>/dev/null || echo 0)
    [ "$m" -gt "$max_map" ] && max_map=$m
    jhwm=$(awk '/VmHWM/ {print $2}' /proc/"$jvm"/status 2>/dev/null || true)
    thwm=$(awk '/VmHWM/ {print $2}' /proc/"$jt"/status 2>/dev/null || true)
    [ -n "$jhwm" ] && jvm_hwm=$jhwm
    [ -n "$thwm" ] && jtrace_hwm=$thwm
    sleep 1
done
wait "$jt"
size=$(du -sb "$t" | cut -f1)
echo "jtrace peak RSS ${jtrace_hwm} KiB; JVM peak RSS ${jvm_hwm} KiB; stream mapping resident max ${max_map} KiB"
echo "trace $((size >> 20)) MiB in ${secs} s: $((size / secs >> 20)) MiB/s"
for cmd in "info $t" "report $t" "timeline $t -o $out/w.html --window 10s..11s"; do
    /usr/bin/time -f "%M KiB peak, %e s, %U s user" "$J" $cmd >/dev/null 2>"$out/time.err" || true
    echo "jtrace ${cmd%% *}: $(tail -1 "$out/time.err")"
done
