"""Decodes a jtrace Perfetto export with Perfetto's official schema (PyPI
`perfetto`'s perfetto_trace_pb2) and prints what it holds as JSON,
resolving everything as trace_processor does:
* interned ids per packet sequence (an id used before its sequence defined
  it, or defined twice, is an error);
* timestamps: a packet's clock is its own timestamp_clock_id, else its
  sequence's default; a sequence-scoped incremental clock (ids 64-127)
  adds each packet's value to the last, starting from its clock
  snapshot's value, and maps to the trace clock through that snapshot;
* track events on the sequence's default track unless they name one; a
  slice is a begin and the end that closes it on the same track, with the
  arguments of both;
* ftrace: a compact_sched switch's previous thread is the next thread of
  the CPU's previous switch in time (full or compact); one with no
  previous switch on its CPU is counted as unresolved.

Usage: perfetto_check.py FILE [--full]   (--full adds every slice, switch
and waking, for exact comparison)."""
import collections
import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

BOOTTIME = 6
U32 = 0xFFFFFFFF  # tids as the kernel's unsigned values (int32 in the schema)
full = "--full" in sys.argv[2:]

trace = pb.Trace()
with open(sys.argv[1], "rb") as f:
    trace.ParseFromString(f.read())


class Sequence:
    def __init__(self):
        self.cleared = False
        self.names, self.arg_names, self.strings = {}, {}, {}
        self.clock = 0  # the default timestamp_clock_id
        self.track = None  # the default track_uuid
        self.clocks = {}  # incremental clock id -> [last value, offset to trace time]


seqs = collections.defaultdict(Sequence)
tracks = {}  # uuid -> ("thread", pid, tid) | ("process", pid) | ("child", parent uuid, name)
out = collections.defaultdict(int)
begin_names = collections.Counter()  # method slices per name
state_names = collections.Counter()  # off-CPU slices per cause
stops = []
open_slices = collections.defaultdict(list)  # track -> [(name, ts, args)]
max_depth = 0
evidence = collections.Counter()
flow_starts, flow_ends = set(), set()
slices, instants = [], []
switches, wakings = [], []  # switches: [cpu, ts, prev or None, state, next]


def packet_ts(p, st):
    if not p.HasField("timestamp"):
        return None
    clock = p.timestamp_clock_id or st.clock
    if 64 <= clock < 128:
        c = st.clocks[clock]  # KeyError: a clock no snapshot defined
        c[0] += p.timestamp
        return c[0] + c[1]
    assert clock in (0, BOOTTIME), f"unexpected clock {clock}"
    return p.timestamp


def thread_of(uuid):
    kind = tracks[uuid]
    if kind[0] == "thread":
        return kind[2]
    if kind[0] == "child" and tracks[kind[1]][0] == "thread":
        return tracks[kind[1]][2]
    return tracks[kind[1]][1]  # a process's child track: its pid


for p in trace.packet:
    sid = p.trusted_packet_sequence_id
    if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
        seqs[sid] = Sequence()
        seqs[sid].cleared = True
    st = seqs[sid]
    if p.HasField("trace_packet_defaults"):
        d = p.trace_packet_defaults
        st.clock = d.timestamp_clock_id
        if d.track_event_defaults.HasField("track_uuid"):
            st.track = d.track_event_defaults.track_uuid
    if p.HasField("interned_data"):
        assert st.cleared, "interned data before the sequence's state was cleared"
        d = p.interned_data
        for table, entries in [
            (st.names, d.event_names),
            (st.arg_names, d.debug_annotation_names),
            (st.strings, d.debug_annotation_string_values),
        ]:
            for n in entries:
                assert n.iid not in table, f"iid {n.iid} defined twice on sequence {sid}"
                table[n.iid] = n.name if hasattr(n, "name") else n.str.decode()
    if p.HasField("clock_snapshot"):
        assert sid, "a clock snapshot on sequence 0"
        clocks = {c.clock_id: c for c in p.clock_snapshot.clocks}
        for cid, c in clocks.items():
            if cid >= 64:
                assert c.is_incremental
                st.clocks[cid] = [c.timestamp, clocks[BOOTTIME].timestamp - c.timestamp]
        continue
    ts = packet_ts(p, st)
    if p.HasField("track_descriptor"):
        t = p.track_descriptor
        if t.HasField("thread"):
            tracks[t.uuid] = ("thread", t.thread.pid, t.thread.tid)
        elif t.HasField("process"):
            tracks[t.uuid] = ("process", t.process.pid)
        else:
            assert t.parent_uuid in tracks, "a child track before its parent"
            tracks[t.uuid] = ("child", t.parent_uuid, t.name)
    if p.HasField("ftrace_events"):
        b = p.ftrace_events
        cpu = b.cpu
        for e in b.event:
            if e.HasField("sched_switch"):
                s = e.sched_switch
                assert e.pid == s.prev_pid & 0xFFFFFFFF
                switches.append([cpu, e.timestamp, s.prev_pid & U32, s.prev_state, s.next_pid & U32])
            elif e.HasField("sched_waking"):
                w = e.sched_waking
                wakings.append([e.timestamp, e.pid, w.pid & U32, w.target_cpu])
        c = b.compact_sched
        n = len(c.switch_timestamp)
        assert n == len(c.switch_prev_state) == len(c.switch_next_pid) == len(c.switch_next_prio)
        assert n == len(c.switch_next_comm_index)
        acc = 0
        for i in range(n):
            acc += c.switch_timestamp[i]
            assert c.switch_next_comm_index[i] < len(c.intern_table)
            switches.append([cpu, acc, None, c.switch_prev_state[i], c.switch_next_pid[i] & U32])
        out["compact_switches"] += n
        assert not c.waking_timestamp
    if p.HasField("track_event"):
        e = p.track_event
        assert sid, "a track event on sequence 0"
        uuid = e.track_uuid if e.HasField("track_uuid") else st.track
        kind = tracks[uuid]
        args = {}
        for a in e.debug_annotations:
            k = st.arg_names[a.name_iid]
            if a.HasField("string_value_iid"):
                args[k] = st.strings[a.string_value_iid]
            elif a.HasField("uint_value"):
                args[k] = a.uint_value
            else:
                args[k] = a.bool_value
        flow_starts.update(e.flow_ids)
        flow_ends.update(e.terminating_flow_ids)
        if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            name = st.names[e.name_iid]
            open_slices[uuid].append((name, ts, args))
            if kind[0] == "thread":
                begin_names[name] += 1
                max_depth = max(max_depth, len(open_slices[uuid]))
            elif kind[2].startswith("JVM stops"):
                stops.append(name)
            else:
                state_names[name] += 1
                if "evidence" in args:
                    evidence[args["evidence"].split("(")[0]] += 1
        elif e.type == pb.TrackEvent.TYPE_SLICE_END:
            assert open_slices[uuid], "a slice end with no begin"
            name, start, bargs = open_slices[uuid].pop()
            bargs.update(args)
            if kind[0] == "thread":
                out["method_ends"] += 1
                assert "cpu_ns" in args and "signature" in args, args
                out["method_cpu_ns"] += args["cpu_ns"]
            where = "method" if kind[0] == "thread" else "stops" if kind[2].startswith("JVM stops") else "off_cpu"
            if full:
                slices.append([where, thread_of(uuid), name, start, ts, bargs])
        elif e.type == pb.TrackEvent.TYPE_INSTANT:
            out["instants"] += 1
            if full:
                instants.append([thread_of(uuid), st.names[e.name_iid], ts])

assert all(not v for v in open_slices.values()), "slices left open"

# A compact switch's previous thread: the CPU's previous switch's next.
unresolved = 0
by_cpu = collections.defaultdict(list)
for s in switches:
    by_cpu[s[0]].append(s)
for cpu, ss in by_cpu.items():
    ss.sort(key=lambda s: s[1])
    last = None
    for s in ss:
        if s[2] is None:
            if last is None:
                unresolved += 1
            s[2] = last
        last = s[4]

result = {
    "packets": len(trace.packet),
    "sequences": len([s for s in seqs if s]),
    "threads": sorted([v[2], v[1]] for v in tracks.values() if v[0] == "thread"),
    "processes": sorted(v[1] for v in tracks.values() if v[0] == "process"),
    "method_slices": dict(begin_names),
    "method_ends": out["method_ends"],
    "method_cpu_ns": out["method_cpu_ns"],
    "max_depth": max_depth,
    "off_cpu_slices": dict(state_names),
    "evidence": dict(evidence),
    "instants": out["instants"],
    "flows": len(flow_starts),
    "flows_unmatched": len(flow_starts ^ flow_ends),
    "stops": stops,
    "sched_switch": len(switches),
    "compact_switches": out["compact_switches"],
    "compact_unresolved": unresolved,
    "sched_waking": len(wakings),
}
if full:
    result.update(
        {
            "slices": sorted(slices, key=lambda s: (s[0], s[1], s[3], -s[4], s[2])),
            "instant_list": sorted(instants),
            "switches": sorted(switches, key=lambda s: (s[0], s[1], -1 if s[2] is None else s[2])),
            "wakings": sorted(wakings),
        }
    )
json.dump(result, sys.stdout)
