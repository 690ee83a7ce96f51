#!/usr/bin/env bash
# Records a Tomcat-like trace: embedded Tomcat 10 serving a servlet
# backed by in-memory H2 (bench/tomcat/TomcatH2.java), driven by wrk with 16
# connections for SECONDS, traced with METHODS. Prints requests/s, the
# trace's size and event counts. Then measure the exports on it with
#   FORMATS="perfetto chrome parquet" bench/export_vs_report.sh DIR
# Usage: sudo bench/tomcat_trace.sh DIR [SECONDS]   (default 14)
#   METHODS='org.apache.catalina.core.*,org.h2.command.dml.*,TomcatH2*'
#   JAVA=java; JTRACE=target/release/jtrace; JTRACE_RUN_ARGS="--max-size 32M" (a ring recording)
# Needs: apt install libtomcat10-embed-java libjakarta-annotation-api-java libh2-java wrk
set -euo pipefail
dir=${1:?trace directory to write}
secs=${2:-14}
J=${JTRACE:-target/release/jtrace}
java=${JAVA:-java}
methods=${METHODS:-'org.apache.catalina.core.*,org.h2.command.dml.*,TomcatH2*'}
jars=/usr/share/java/tomcat10-embed-core.jar:/usr/share/java/jakarta-annotation-api.jar:/usr/share/java/h2.jar
for j in ${jars//:/ }; do
    [ -r "$j" ] || { echo "missing $j: apt install libtomcat10-embed-java libjakarta-annotation-api-java libh2-java" >&2; exit 1; }
done
command -v wrk >/dev/null || { echo "missing wrk: apt install wrk" >&2; exit 1; }
classes=$(mktemp -d)
trap 'rm -rf "$classes"' EXIT
javac -nowarn -d "$classes" -cp "$jars" "$(dirname "$0")/tomcat/TomcatH2.java"
port=$((20000 + RANDOM % 20000))
rm -rf "$dir"
echo "host: $(lscpu | sed -n 's/^Model name: *//p'); load: $(uptime | sed 's/.*load average: //')"
# The server lives 6 s longer than the load: start-up and a quiet end.
"$J" run ${JTRACE_RUN_ARGS:-} --methods "$methods" -o "$dir" -- \
    "$java" -cp "$jars:$classes" TomcatH2 "$port" $((secs + 6)) >"$classes/server.out" 2>&1 &
run=$!
for _ in $(seq 100); do grep -q READY "$classes/server.out" 2>/dev/null && break; sleep 0.1; done
grep -q READY "$classes/server.out" || { cat "$classes/server.out" >&2; exit 1; }
wrk -t2 -c16 -d"${secs}s" "http://127.0.0.1:$port/lookup" | grep -E 'Requests/sec|requests in'
wait "$run"
grep REQUESTS "$classes/server.out"
du -sh "$dir"
"$J" info "$dir" | grep -E -i 'events|records|lost' | head -8
