"""Fleet analysis over many traces' Parquet exports with DataFusion (PyPI
`datafusion`, a multi-threaded, partition-parallel query engine; the same SQL
runs on Spark). docs/SCALE.md explains the layout and the limits.

  fleet.py add ROOT HOST TRACE_ID PARQUET_DIR   # file one export under ROOT
  fleet.py offcpu ROOT [LIMIT]                  # off-CPU by cause per method, as JSON

Layout (Hive-style partitions, so `host` and `trace_id` become columns):
  ROOT/<table>/host=<HOST>/trace_id=<TRACE_ID>/<table>.parquet
"""
import json
import os
import shutil
import sys

TABLES = ["threads", "methods", "invocations", "off_cpu_intervals", "wakeups", "windows"]
CAUSES = ["runqueue", "monitor", "wait", "park", "sleep", "gc", "safepoint", "socket", "file",
          "page_fault", "lock_native", "syscall_other", "unknown", "tracer", "throttled", "steal"]


def add(root, host, trace_id, src):
    for t in TABLES:
        d = os.path.join(root, t, f"host={host}", f"trace_id={trace_id}")
        os.makedirs(d, exist_ok=True)
        dst = os.path.join(d, f"{t}.parquet")
        try:
            os.link(os.path.join(src, f"{t}.parquet"), dst)  # same file system: no copy
        except OSError:
            shutil.copyfile(os.path.join(src, f"{t}.parquet"), dst)


def context(root):
    import datafusion
    import pyarrow as pa

    ctx = datafusion.SessionContext()
    for t in TABLES:
        ctx.register_parquet(t, os.path.join(root, t) + "/",
                             table_partition_cols=[("host", pa.string()), ("trace_id", pa.string())],
                             file_extension=".parquet")
    return ctx


def offcpu(root, limit=None):
    """Off-CPU time by cause per method (outermost calls, as the report sums
    them), over every trace, with how many hosts and traces saw the method."""
    sums = ", ".join(f"sum(i.{c}_ns) AS {c}_ns" for c in CAUSES)
    sql = f"""
        SELECT m.class, m.name, count(*) AS calls, count(DISTINCT i.host) AS hosts,
               count(DISTINCT i.trace_id) AS traces, sum(i.off_cpu_ns) AS off_cpu_ns, {sums}
        FROM invocations i JOIN methods m
          ON i.method_id = m.method_id AND i.host = m.host AND i.trace_id = m.trace_id
        WHERE i.outermost
        GROUP BY m.class, m.name
        ORDER BY off_cpu_ns DESC, m.class, m.name"""
    if limit:
        sql += f" LIMIT {int(limit)}"
    rows = context(root).sql(sql).to_pylist()
    return [{k: v for k, v in r.items() if v or not k.endswith("_ns")} for r in rows]


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "add" and len(sys.argv) == 6:
        add(*sys.argv[2:6])
    elif cmd == "offcpu" and len(sys.argv) in (3, 4):
        json.dump(offcpu(sys.argv[2], *sys.argv[3:]), sys.stdout, indent=1)
    else:
        sys.exit(__doc__)
