#!/usr/bin/env python3
"""Run time of jtrace's BPF programs per traced switch, read
from the kernel's own BPF statistics (kernel.bpf_stats_enabled=1, which
this script sets for its run and restores), as root:

    bench/stacks_bpf_time.py [REPEATS] [CONFIG ...]

A CONFIG is a name and jtrace options, `name:opt,opt` (default: nostacks
with --no-stacks, stacks with the defaults); an option `+VAR=value` is an
environment variable of that jtrace instead, and `@path` another jtrace
binary (an older build, to compare in the same run). Each repeat runs the configs
interleaved on bench/stacks/StackCost.java's ping-pong (two platform
threads, park/unpark, pinned to CPU 0), reads the run time and run count
of the jtrace process's own sched_switch, cpu_sample and rseq_update
(deferred stacks' user walks) programs (found
through its fds, so other jtrace sessions on the machine do not count)
right before and right after the ping-pong, and prints the program time
per ping-pong switch (both halves: switch-out and switch-in records come
from the one program). Environment: JTRACE (default
target/release/jtrace), JAVA (default java), TRIPS (20000), WORK (45000).
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
JTRACE = os.environ.get("JTRACE", "target/release/jtrace")
JAVA = os.environ.get("JAVA", "java")
TRIPS = int(os.environ.get("TRIPS", "20000"))
WORK = os.environ.get("WORK", "45000")
PROGS = ("sched_switch", "cpu_sample", "rseq_update")


def prog_ids(pid):
    """The ids of the BPF programs the process `pid` holds fds of."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            m = re.search(r"^prog_id:\s+(\d+)", open(f"/proc/{pid}/fdinfo/{fd}").read(), re.M)
        except OSError:
            continue
        if m:
            ids.add(int(m.group(1)))
    return ids


def jtrace_pid(launcher):
    """The jtrace process: the launcher itself (run execs nothing)."""
    return launcher.pid


def snapshot(ids):
    out = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, check=True).stdout)
    res = {}
    for p in out:
        if p.get("id") in ids and p.get("name") in PROGS:
            res[p["name"]] = (p.get("run_time_ns", 0), p.get("run_cnt", 0))
    return res


def one(name, opts, d):
    t = os.path.join(d, name)
    subprocess.run(["rm", "-rf", t])
    cmd = [JTRACE, "run", *opts, "-o", t, "--", "taskset", "-c", "0", JAVA, "-cp", d, "StackCost", "pingpong",
           str(TRIPS), WORK, "1000"]
    env = dict(os.environ)
    for o in opts:
        if o.startswith("+"):
            k, _, v = o[1:].partition("=")
            env[k] = v
    for o in opts:
        if o.startswith("@"):
            cmd[0] = o[1:]
    cmd = [c for c in cmd if not c.startswith(("+", "@"))]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    before = after = None
    ms = None
    ids = set()
    for line in p.stdout:
        if line.startswith("READY"):
            time.sleep(0.5)
            ids = prog_ids(jtrace_pid(p))
            before = snapshot(ids)
        elif line.startswith("MS "):
            after = snapshot(ids)
            ms = float(line.split()[1])
    p.wait()
    switches = 2 * TRIPS
    res = {"ms": ms}
    for prog in PROGS:
        if before and after and prog in before and prog in after:
            dt = after[prog][0] - before[prog][0]
            dn = after[prog][1] - before[prog][1]
            res[prog] = (dt / switches, dn, dt / max(dn, 1))
    kb = os.path.getsize(os.path.join(t, "kernel.bin")) if os.path.exists(os.path.join(t, "kernel.bin")) else 0
    res["bytes"] = kb / switches
    return res


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    configs = []
    for c in sys.argv[2:] or ["nostacks:--no-stacks", "stacks:"]:
        name, _, opts = c.partition(":")
        configs.append((name, [o for o in opts.split(",") if o]))
    old = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=1"], check=True)
    try:
        with tempfile.TemporaryDirectory() as d:
            subprocess.run(["javac", "-d", d, os.path.join(HERE, "stacks", "StackCost.java")], check=True)
            print(f"host: {cpu_model()}; load: {os.getloadavg()}")
            runs = {n: [] for n, _ in configs}
            for _ in range(reps):
                for n, opts in configs:
                    r = one(n, opts, d)
                    runs[n].append(r)
                    ss = r.get("sched_switch")
                    cs = r.get("cpu_sample")
                    ru = r.get("rseq_update")
                    print(f"{n:12} {r['ms']:8.1f} ms  sched_switch {ss[0] if ss else 0:7.0f} ns/switch "
                          f"({ss[2] if ss else 0:5.0f} ns/call, {ss[1] if ss else 0} calls)"
                          f"  cpu_sample {cs[0] if cs else 0:5.0f} ns/switch ({cs[1] if cs else 0} calls, "
                          f"{cs[2] if cs else 0:5.0f} ns/call)  rseq_update {ru[0] if ru else 0:5.0f} ns/switch "
                          f"({ru[1] if ru else 0} calls)  {r['bytes']:5.1f} B/switch", flush=True)
            print("medians (min):")
            for n, rs in runs.items():
                ss = [r["sched_switch"][0] + r.get("rseq_update", (0,))[0] for r in rs if "sched_switch" in r]
                ms = [r["ms"] for r in rs if r["ms"]]
                print(f"{n:12} sched_switch+rseq_update {statistics.median(ss):7.0f} ({min(ss):7.0f}) ns/switch  "
                      f"elapsed {statistics.median(ms):8.1f} ({min(ms):8.1f}) ms  "
                      f"{statistics.median(r['bytes'] for r in rs):5.1f} B/switch")
            print(f"load after: {os.getloadavg()}")
    finally:
        subprocess.run(["sysctl", "-qw", f"kernel.bpf_stats_enabled={old}"])


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


if __name__ == "__main__":
    main()
