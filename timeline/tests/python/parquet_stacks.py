"""Reads a jtrace Parquet export's off-CPU intervals with their stacks
(DuckDB, PyPI `duckdb`): per interval, its thread, start and the frames of
its stack_id from the stacks table, innermost first; prints JSON."""
import json
import sys

import duckdb

d = sys.argv[1]
con = duckdb.connect()
rows = con.execute(
    f"""
    SELECT o.tid, o.start_ns, o.stack_id,
           list(s.name ORDER BY s.frame) FILTER (WHERE s.name IS NOT NULL) AS frames,
           list(s.kind ORDER BY s.frame) FILTER (WHERE s.kind IS NOT NULL) AS kinds
    FROM '{d}/off_cpu_intervals.parquet' o
    LEFT JOIN '{d}/stacks.parquet' s ON s.stack_id = o.stack_id
    GROUP BY o.tid, o.start_ns, o.stack_id
    ORDER BY o.tid, o.start_ns
    """
).fetchall()
json.dump(
    [{"tid": t, "start_ns": s, "stack_id": i, "frames": f or [], "kinds": k or []} for t, s, i, f, k in rows],
    sys.stdout,
)
