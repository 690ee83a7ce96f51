"""Decodes a jtrace Perfetto export with Perfetto's official schema (PyPI
`perfetto`'s perfetto_trace_pb2) and prints what it holds as JSON, resolving
every interned id as trace_processor would (an id used before it is defined
on the sequence is an error)."""
import collections
import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

trace = pb.Trace()
with open(sys.argv[1], "rb") as f:
    trace.ParseFromString(f.read())

names, arg_names, strings = {}, {}, {}
tracks = {}  # uuid -> ("thread", pid, tid) | ("process", pid) | ("child", parent uuid, name)
out = collections.defaultdict(int)
begin_names = collections.Counter()  # method slices per name
state_names = collections.Counter()  # off-CPU slices per cause
stops = []
open_depth = collections.Counter()
max_depth = 0
evidence = collections.Counter()
switches, wakings = 0, 0
flow_starts, flow_ends = set(), set()
cleared = False
for p in trace.packet:
    if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
        cleared = True
    if p.HasField("interned_data"):
        assert cleared, "interned data before the sequence's state was cleared"
        d = p.interned_data
        for n in d.event_names:
            assert n.iid not in names, f"event name iid {n.iid} defined twice"
            names[n.iid] = n.name
        for n in d.debug_annotation_names:
            arg_names[n.iid] = n.name
        for s in d.debug_annotation_string_values:
            strings[s.iid] = s.str.decode()
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
        for e in p.ftrace_events.event:
            if e.HasField("sched_switch"):
                switches += 1
            elif e.HasField("sched_waking"):
                wakings += 1
    if p.HasField("track_event"):
        e = p.track_event
        assert p.trusted_packet_sequence_id == 1
        assert p.sequence_flags & pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        kind = tracks[e.track_uuid]
        args = {}
        for a in e.debug_annotations:
            k = arg_names[a.name_iid]
            if a.HasField("string_value_iid"):
                args[k] = strings[a.string_value_iid]
            elif a.HasField("uint_value"):
                args[k] = a.uint_value
            else:
                args[k] = a.bool_value
        flow_starts.update(e.flow_ids)
        flow_ends.update(e.terminating_flow_ids)
        if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            name = names[e.name_iid]
            open_depth[e.track_uuid] += 1
            if kind[0] == "thread":
                begin_names[name] += 1
                max_depth = max(max_depth, open_depth[e.track_uuid])
            elif kind[2].startswith("JVM stops"):
                stops.append(name)
            else:
                state_names[name] += 1
                if "evidence" in args:
                    evidence[args["evidence"].split("(")[0]] += 1
        elif e.type == pb.TrackEvent.TYPE_SLICE_END:
            assert open_depth[e.track_uuid] > 0, "a slice end with no begin"
            open_depth[e.track_uuid] -= 1
            if kind[0] == "thread":
                out["method_ends"] += 1
                assert "cpu_ns" in args and "signature" in args, args
                out["method_cpu_ns"] += args["cpu_ns"]
        elif e.type == pb.TrackEvent.TYPE_INSTANT:
            out["instants"] += 1

assert all(v == 0 for v in open_depth.values()), "slices left open"
json.dump(
    {
        "packets": len(trace.packet),
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
        "sched_switch": switches,
        "sched_waking": wakings,
    },
    sys.stdout,
)
