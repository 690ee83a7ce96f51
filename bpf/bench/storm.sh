#!/bin/sh
# Throughput of the kernel recorder (run as root):
#   sh bpf/bench/storm.sh [JTRACE] [SECONDS]
# storm.c runs P pairs of threads ping-ponging over pipes for SECONDS; each
# round trip is ≈2 switches, 2 wakeups and 2 blocked reads, i.e. ≈8 records
# with the default event set. For each P and ring buffer size, prints the
# records written, the rate over the storm, and what the drop counters
# (meta.json, `jtrace info`) show.
J=${1:-target/release/jtrace}
S=${2:-2}
D=$(mktemp -d)
cc -O2 -pthread -o $D/storm "$(dirname "$0")/storm.c"
echo "pairs ring_mb records records/s lost lost_by_kind"
for rb in 16 1; do
    for p in 1 2 4 16; do
        rm -rf $D/t
        $J run --ringbuf-mb $rb -o $D/t -- $D/storm $p $S >/dev/null 2>&1
        n=$($J info $D/t | awk '$1 == "events" { print $3 }')
        lost=$($J info $D/t | awk '$1 == "lost" { print $3 }')
        kinds=$($J info $D/t | awk '/kernel lost/ { printf "%s%s", sep, $3 $4; sep = "," }')
        echo "$p $rb $n $(( (n + lost) / S )) $lost ${kinds:--}"
    done
done
rm -rf $D
