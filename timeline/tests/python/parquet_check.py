"""Recomputes `jtrace report --json`'s per-thread and per-method totals from
a Parquet export with DuckDB (PyPI `duckdb`) and compares them field by
field. Prints JSON: how many rows were compared and every mismatch.
Usage: parquet_check.py PARQUET_DIR REPORT_JSON"""
import json
import sys

import duckdb

pq, report = sys.argv[1], json.load(open(sys.argv[2]))
con = duckdb.connect()
for t in ["threads", "methods", "invocations", "off_cpu_intervals", "wakeups", "windows"]:
    con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{pq}/{t}.parquet')")
causes = [c for c in (r[0] for r in con.execute("DESCRIBE threads").fetchall()) if c.endswith("_ns")
          and c not in ("wall_ns", "cpu_ns", "off_cpu_ns", "not_covered_ns", "first_ns", "last_ns")]
mismatches = []


def off(row):
    return {c[: -len("_ns")]: row[c] for c in causes if row[c]}


def rows(sql):
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def compare(where, want, got):
    for k, v in want.items():
        if got.get(k) != v:
            mismatches.append(f"{where} {k}: report {v!r}, parquet {got.get(k)!r}")


# Per thread.
threads = {r["tid"]: r for r in rows("SELECT * FROM threads")}
for t in report["threads"]:
    r = threads.get(t["tid"])
    if r is None:
        mismatches.append(f"thread {t['tid']} not in threads.parquet")
        continue
    got = {
        "name": r["name"], "java": r["java"], "pid": r["pid"], "wall_ns": r["wall_ns"], "cpu_ns": r["cpu_ns"],
        "off_cpu_ns": off(r), "voluntary_switches": r["voluntary_switches"],
        "involuntary_switches": r["involuntary_switches"], "anomalies": r["anomalies"],
        "not_covered_ns": r["not_covered_ns"],
    }
    want = {k: t[k] for k in got if k in t}
    if "not_covered_ns" not in t:
        want["not_covered_ns"] = 0
    compare(f"thread {t['tid']}", want, got)

# Per method, per thread and overall: the report sums outermost calls only.
sums = ", ".join(f"sum({c})::BIGINT AS {c}" for c in causes)
agg = f"""
  count(*) AS calls, sum(wall_ns)::BIGINT AS wall_ns, sum(cpu_ns)::BIGINT AS cpu_ns, {sums},
  sum(not_covered_ns)::BIGINT AS not_covered_ns,
  sum(voluntary_switches)::BIGINT AS voluntary_switches,
  sum(involuntary_switches)::BIGINT AS involuntary_switches,
  min(wall_ns) AS wall_min_ns, max(wall_ns) AS wall_max_ns,
  count(compiled) AS jit_known, count(*) FILTER (WHERE compiled) AS compiled_calls,
  coalesce(sum(wall_ns) FILTER (WHERE compiled), 0)::BIGINT AS wall_compiled
FROM invocations i JOIN methods m USING (method_id) WHERE outermost"""


def method_fields(r):
    known = r["jit_known"] > 0
    return {
        "calls": r["calls"], "wall_ns": r["wall_ns"], "cpu_ns": r["cpu_ns"], "off_cpu_ns": off(r),
        "not_covered_ns": r["not_covered_ns"], "voluntary_switches": r["voluntary_switches"],
        "involuntary_switches": r["involuntary_switches"], "wall_min_ns": r["wall_min_ns"],
        "wall_max_ns": r["wall_max_ns"], "calls_compiled": r["compiled_calls"] if known else None,
        "wall_compiled_ns": r["wall_compiled"] if known else None,
    }


def check_methods(where, want_list, got_rows):
    got = {(r["class"], r["name"], r["signature"]): method_fields(r) for r in got_rows}
    if len(got) != len(want_list):
        mismatches.append(f"{where}: report {len(want_list)} methods, parquet {len(got)}")
    for m in want_list:
        g = got.get((m["class"], m["name"], m["signature"]))
        if g is None:
            mismatches.append(f"{where} {m['class']}.{m['name']} not in parquet")
            continue
        want = {k: m.get(k, 0) for k in g}
        compare(f"{where} {m['class']}.{m['name']}", want, g)


per_thread = rows(f"SELECT tid, class, name, signature, {agg} GROUP BY tid, class, name, signature")
compared = 0
for t in report["threads"]:
    mine = [r for r in per_thread if r["tid"] == t["tid"]]
    check_methods(f"thread {t['tid']}", t["methods"], mine)
    compared += len(t["methods"])
overall = rows(f"SELECT class, name, signature, {agg} GROUP BY class, name, signature")
check_methods("all threads", report["methods"], overall)

json.dump(
    {
        "threads": len(report["threads"]),
        "thread_methods": compared,
        "methods": len(report["methods"]),
        "off_cpu_intervals": con.execute("SELECT count(*) FROM off_cpu_intervals").fetchone()[0],
        "wakeups_with_waker_method": con.execute(
            "SELECT count(*) FROM wakeups WHERE waker_method_id IS NOT NULL").fetchone()[0],
        "windows": con.execute("SELECT count(*) FROM windows").fetchone()[0],
        "mismatches": mismatches[:50],
    },
    sys.stdout,
)
