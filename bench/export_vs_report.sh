#!/usr/bin/env bash
# Time of each streaming export against `jtrace report` on the same trace,
# interleaved (report, then each export, REPEATS rounds), with peak RSS.
# Usage: bench/export_vs_report.sh TRACE [BUDGET]   (BUDGET default 256M)
#   REPEATS=3; FORMATS="perfetto parquet pprof csv collapsed"; JTRACE=target/release/jtrace
#   BASELINE=path/to/older/jtrace: its exports run too, interleaved, as FORMAT@base
# Prints per command: min and median wall and user CPU seconds, max RSS (MB),
# and the median user-CPU ratio to report's.
set -euo pipefail
trace=${1:?trace directory}
budget=${2:-256M}
J=${JTRACE:-target/release/jtrace}
repeats=${REPEATS:-3}
formats=${FORMATS:-perfetto parquet pprof csv collapsed}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "host: $(lscpu | sed -n 's/^Model name: *//p'); load: $(uptime | sed 's/.*load average: //')"
runs="report"
for f in $formats; do
    runs="$runs $f"
    [ -n "${BASELINE:-}" ] && runs="$runs $f@base"
done
for r in $(seq "$repeats"); do
    for run in $runs; do
        f=${run%@base}
        bin=$J
        [ "$f" != "$run" ] && bin=$BASELINE
        case $f in
        report) cmd=("$bin" report --json --memory-budget "$budget" "$trace") dest=$out/report.json ;;
        parquet) rm -rf "$out/pq"; cmd=("$bin" export --format parquet --memory-budget "$budget" -o "$out/pq" "$trace") dest=/dev/null ;;
        *) cmd=("$bin" export --format "$f" --memory-budget "$budget" "$trace") dest=$out/$run ;;
        esac
        /usr/bin/time -f "$run %e %U %M" -a -o "$out/times" "${cmd[@]}" >"$dest" 2>/dev/null
        [ "$f" = parquet ] && du -sb "$out/pq" | sed "s|$out/pq|$run (dir)|" >>"$out/pqsizes"
    done
    ls -l "$out" >"$out/sizes.$r"
done
python3 - "$out/times" <<'PY'
import collections, statistics, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f, wall, user, rss = line.split()
    t[f].append((float(wall), float(user), int(rss)))
base = statistics.median(u for _, u, _ in t["report"])
for f, v in t.items():
    w = [x[0] for x in v]; u = [x[1] for x in v]
    print(f"{f:10} wall min {min(w):6.2f} med {statistics.median(w):6.2f}  user min {min(u):6.2f} "
          f"med {statistics.median(u):6.2f}  rss {max(x[2] for x in v) / 1024:6.0f} MB  "
          f"user/report {statistics.median(u) / base:4.2f}x")
PY
ls -l "$out" | awk 'NR > 1 && !/times|sizes|pq/ {print "size", $5, $9}'
sort -u "$out/pqsizes" 2>/dev/null | sed 's/^/size /'
echo "load after: $(uptime | sed 's/.*load average: //')"
