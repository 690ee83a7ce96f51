#!/usr/bin/env bash
# Where a traced run's extra wall time goes: the H2 workload of
# bench/h2/H2Load.java (as in bench/h2_broad.sh) run through
# bench/h2/Phases.java, whose wall-clock stamps split each command's
# elapsed time into start-up (command start to main: jtrace's set-up and
# the JVM's start with the agent), main (H2's set-up, then the rounds,
# which H2Load times itself) and exit (main's end to the command's end: the JVM's shutdown, the agent's
# and jtrace's stop). Untraced, jtrace with no method selected, and the
# default `--methods 'org.h2.*'`; BASELINE=<another jtrace binary> adds
# the last two with it (labels base_*), for before/after ratios in one
# run. Interleaved, REPS times, a sync before each run; prints per run the
# phases in ms, then per label the median of each phase and its excess
# over the untraced run's.
# Usage: bench/h2_phases.sh [REPS] [JDK_HOME]   (root, from the repository, jtrace built)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
reps="${1:-5}"
jdk="${2:-/usr/lib/jvm/java-17-openjdk-amd64}"
h2=/usr/share/java/h2.jar
jtrace="$root/target/release/jtrace"
[ -f "$h2" ] || { echo "h2_phases: $h2 missing (apt-get install libh2-java)" >&2; exit 2; }
[ -x "$jtrace" ] || { echo "h2_phases: build jtrace first (cargo build --release --workspace)" >&2; exit 2; }
tmp="$(mktemp -d /tmp/h2_phases.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
"$jdk/bin/javac" --release 11 -cp "$h2" -d "$tmp/cls" "$root/bench/h2/H2Load.java" "$root/bench/h2/Phases.java"
cp="$h2:$tmp/cls"
echo "host: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; load: $(uptime | sed 's/.*load average: //')"

# one LABEL CMD...: prints "LABEL startup_ms setup_ms rounds_ms exit_ms"
one() {
    local label="$1"; shift
    sync
    rm -rf "$tmp/t.jtrace"
    local start end out
    start="$(date +%s%3N)"
    out="$("$@" 2>"$tmp/err")" || { echo "h2_phases: $label failed:" >&2; cat "$tmp/err" >&2; exit 1; }
    end="$(date +%s%3N)"
    local ms me rounds
    ms="$(sed -n 's/^main_start_ms //p' <<<"$out")"
    me="$(sed -n 's/^main_end_ms //p' <<<"$out")"
    rounds="$(sed -n 's/^rounds_ms \([0-9]*\).*/\1/p' <<<"$out")"
    echo "$label $((ms - start)) $((me - ms - rounds)) $rounds $((end - me))"
}

java_cmd=("$jdk/bin/java" -cp "$cp" Phases H2Load mem)
labels=(untraced nomethod default)
[ -n "${BASELINE:-}" ] && labels+=(base_nomethod base_default)
for r in $(seq "$reps"); do
    # The set-ups take turns at running first.
    n=${#labels[@]}
    for i in $(seq 0 $((n - 1))); do
        label="${labels[$(((i + r) % n))]}"
        case "$label" in
            untraced) one "$label" "${java_cmd[@]}" ;;
            nomethod) one "$label" "$jtrace" run -o "$tmp/t.jtrace" --methods 'nomatch.*' -- "${java_cmd[@]}" ;;
            default) one "$label" "$jtrace" run -o "$tmp/t.jtrace" --methods 'org.h2.*' -- "${java_cmd[@]}" ;;
            base_nomethod) one "$label" "$BASELINE" run -o "$tmp/t.jtrace" --methods 'nomatch.*' -- "${java_cmd[@]}" ;;
            base_default) one "$label" "$BASELINE" run -o "$tmp/t.jtrace" --methods 'org.h2.*' -- "${java_cmd[@]}" ;;
        esac
    done
done | tee "$tmp/runs"
python3 - "$tmp/runs" <<'PY'
import sys, statistics as st, collections
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    w = line.split()
    runs[w[0]].append(tuple(int(x) for x in w[1:5]))
med = {l: [st.median(r[i] for r in v) for i in range(4)] for l, v in runs.items()}
u = med["untraced"]
print("label          start-up  set-up rounds   exit  total (ms, medians; + over untraced)")
for l, m in med.items():
    over = " ".join(f"+{m[i] - u[i]:.0f}" for i in range(4))
    print(f"{l:14s} {m[0]:7.0f} {m[1]:7.0f} {m[2]:6.0f} {m[3]:6.0f} {sum(m):6.0f}   {over} = +{sum(m) - sum(u):.0f}")
PY
