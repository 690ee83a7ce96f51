#!/bin/sh
# Cost of `jtrace attach` on a running JVM, and whether the JVM is as before
# after the detach. AttachLoad calls a 10 µs method in a loop and prints its
# call rate every 100 ms; 3 s after it starts, `jtrace attach --duration 3s
# --methods AttachLoad.batch` traces that method; the JVM runs 14 s in all.
# Per JDK and run: attach latency (jtrace start -> "recording": BPF load,
# agent load, retransformation), stop latency (end of the duration -> jtrace
# exit: retransform back, drain, finish), and the median call rate before,
# during and after the session (middle of each phase). Prints min / median
# over the runs and the after/before ratio.
# Usage: sudo sh bench/attach.sh [RUNS]   (needs target/release/jtrace and the agent)
set -eu
RUNS=${1:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
J=$ROOT/target/release/jtrace
W=$(mktemp -d /tmp/jtrace-attach-bench.XXXXXX)
trap 'rm -rf "$W"' EXIT
javac -d "$W/cls" "$ROOT/bench/attach/AttachLoad.java"
ms() { echo $(( $(date +%s%N) / 1000000 )); }
for JDK in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64; do
  : > "$W/results"
  for r in $(seq "$RUNS"); do
    t0=$(ms)
    "$JDK/bin/java" -cp "$W/cls" AttachLoad 14 > "$W/rates" &
    JP=$!
    sleep 3
    : > "$W/log"
    a0=$(ms)
    "$J" attach "$JP" --duration 3s --methods AttachLoad.batch -o "$W/t.jtrace" 2> "$W/log" &
    AP=$!
    # the moment jtrace says it is recording
    while ! grep -q recording "$W/log"; do sleep 0.01; done
    a1=$(ms)
    wait "$AP"
    a2=$(ms)
    wait "$JP"
    # phases in ms since the JVM started (t0 is a few ms before its start)
    awk -v s=$((a0 - t0)) -v r=$((a1 - t0)) -v e=$((a2 - t0)) \
        -v lat=$((a1 - a0)) -v stop=$((a2 - a1 - 3000)) '
      function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }; return a[int((n + 1) / 2)] }
      NF == 2 && $1 ~ /^[0-9]+$/ {
        if ($1 > 1500 && $1 < s - 200) b[++nb] = $2
        if ($1 > r + 1000 && $1 < r + 2500) d[++nd] = $2
        if ($1 > e + 1000 && $1 < e + 2800) f[++nf] = $2
      }
      END {
        if (nb == 0 || nd == 0 || nf == 0) { print "a phase has no samples (the JVM ended too early); run skipped" > "/dev/stderr"; exit }
        printf "%d %d %.1f %.1f %.1f\n", lat, stop, med(b, nb) / 100, med(d, nd) / 100, med(f, nf) / 100
      }' "$W/rates" >> "$W/results"
    rm -rf "$W/t.jtrace"
  done
  echo "== $JDK ($RUNS runs; rates in k calls/s)"
  awk '
    function mm(col,   i, j, t, n, a) { n = 0; for (i = 1; i <= NR; i++) a[++n] = v[i, col]; for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }; return sprintf("%s / %s", a[1], a[int((n + 1) / 2)]) }
    { for (c = 1; c <= 5; c++) v[NR, c] = $c; ratio[NR] = $3 > 0 ? $5 / $3 : 0 }
    END {
      print "attach latency ms (min / median): " mm(1)
      print "stop latency ms   (min / median): " mm(2)
      print "rate before        (min / median): " mm(3)
      print "rate while traced  (min / median): " mm(4)
      print "rate after detach  (min / median): " mm(5)
      for (i = 1; i <= NR; i++) s = s sprintf(" %.2f", ratio[i]); print "after/before per run:" s
    }' "$W/results"
done
