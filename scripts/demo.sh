#!/usr/bin/env bash
# The whole demo on a fresh machine: install deps, build, trace the bundled
# demo workload, print the merged text trace and the gap-attribution report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --release --workspace
mkdir -p target/demo
javac -d target/demo examples/demo/Demo.java
jtrace=target/release/jtrace
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
$sudo "$jtrace" run --methods 'Demo.*' -o target/demo/demo.jtrace -- java -cp target/demo Demo
"$jtrace" text target/demo/demo.jtrace
"$jtrace" report target/demo/demo.jtrace
"$jtrace" timeline target/demo/demo.jtrace -o target/demo/timeline.html
"$jtrace" flame target/demo/demo.jtrace -o target/demo/flame.html
echo
echo "trace: target/demo/demo.jtrace  (jtrace info | text | report [--json] | export --format chrome|collapsed|csv)"
echo "timeline: target/demo/timeline.html, flame graph: target/demo/flame.html (open them in a browser)"
