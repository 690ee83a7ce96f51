"""Decodes a gzipped pprof profile with the schema of github.com/google/pprof
proto/profile.proto (Apache-2.0), declared here field for field as a
FileDescriptorProto (no protoc needed), checks what pprof's CheckValid
checks (ids non-zero and unique, every reference defined, one value per
sample type) and that string indexes are in the table, and prints JSON:
the sample types, period, comments and every sample with its labels,
values and locations (leaf first; each location its lines' function
names, inlined ones first, the caller they were inlined into last), and
every (function, file, line) whose line is known."""
import gzip
import json
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto
OPT, REP = F.LABEL_OPTIONAL, F.LABEL_REPEATED
I64, U64, STR, MSG, BOOL = F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_STRING, F.TYPE_MESSAGE, F.TYPE_BOOL
SCHEMA = {
    "Profile": [("sample_type", 1, REP, MSG, "ValueType"), ("sample", 2, REP, MSG, "Sample"),
                ("mapping", 3, REP, MSG, "Mapping"), ("location", 4, REP, MSG, "Location"),
                ("function", 5, REP, MSG, "Function"), ("string_table", 6, REP, STR, None),
                ("drop_frames", 7, OPT, I64, None), ("keep_frames", 8, OPT, I64, None),
                ("time_nanos", 9, OPT, I64, None), ("duration_nanos", 10, OPT, I64, None),
                ("period_type", 11, OPT, MSG, "ValueType"), ("period", 12, OPT, I64, None),
                ("comment", 13, REP, I64, None), ("default_sample_type", 14, OPT, I64, None)],
    "ValueType": [("type", 1, OPT, I64, None), ("unit", 2, OPT, I64, None)],
    "Sample": [("location_id", 1, REP, U64, None), ("value", 2, REP, I64, None), ("label", 3, REP, MSG, "Label")],
    "Label": [("key", 1, OPT, I64, None), ("str", 2, OPT, I64, None), ("num", 3, OPT, I64, None),
              ("num_unit", 4, OPT, I64, None)],
    "Mapping": [("id", 1, OPT, U64, None), ("memory_start", 2, OPT, U64, None), ("memory_limit", 3, OPT, U64, None),
                ("file_offset", 4, OPT, U64, None), ("filename", 5, OPT, I64, None), ("build_id", 6, OPT, I64, None),
                ("has_functions", 7, OPT, BOOL, None), ("has_filenames", 8, OPT, BOOL, None),
                ("has_line_numbers", 9, OPT, BOOL, None), ("has_inline_frames", 10, OPT, BOOL, None)],
    "Location": [("id", 1, OPT, U64, None), ("mapping_id", 2, OPT, U64, None), ("address", 3, OPT, U64, None),
                 ("line", 4, REP, MSG, "Line"), ("is_folded", 5, OPT, BOOL, None)],
    "Line": [("function_id", 1, OPT, U64, None), ("line", 2, OPT, I64, None), ("column", 3, OPT, I64, None)],
    "Function": [("id", 1, OPT, U64, None), ("name", 2, OPT, I64, None), ("system_name", 3, OPT, I64, None),
                 ("filename", 4, OPT, I64, None), ("start_line", 5, OPT, I64, None)],
}
fd = descriptor_pb2.FileDescriptorProto(name="profile.proto", package="perftools.profiles", syntax="proto3")
for name, fields in SCHEMA.items():
    m = fd.message_type.add(name=name)
    for fname, num, label, typ, ref in fields:
        f = m.field.add(name=fname, number=num, label=label, type=typ)
        if ref:
            f.type_name = ".perftools.profiles." + ref
pool = descriptor_pool.DescriptorPool()
pool.Add(fd)
Profile = message_factory.GetMessageClass(pool.FindMessageTypeByName("perftools.profiles.Profile"))

with open(sys.argv[1], "rb") as f:
    data = f.read()
assert data[:2] == b"\x1f\x8b", "not gzipped"
p = Profile()
p.ParseFromString(gzip.decompress(data))
st = p.string_table
assert st[0] == "", "string_table[0] must be empty"


def s(i):
    assert 0 <= i < len(st), f"string index {i} out of the table"
    return st[i]


def unique(ids, what):
    assert all(i != 0 for i in ids), f"a {what} has id 0"
    assert len(set(ids)) == len(ids), f"{what} ids repeat"


unique([f.id for f in p.function], "function")
unique([l.id for l in p.location], "location")
funcs = {f.id: (s(f.name), s(f.system_name), s(f.filename)) for f in p.function}
locs = {}
# Every (function, file, line) a location's lines name, with a line known.
source_lines = set()
for l in p.location:
    assert l.line, f"location {l.id} has no line"
    for ln in l.line:
        assert ln.function_id in funcs, f"location {l.id}: no function {ln.function_id}"
        if ln.line:
            name, _, filename = funcs[ln.function_id]
            source_lines.add((name, filename, ln.line))
    locs[l.id] = [funcs[ln.function_id][0] for ln in l.line]
types = [[s(t.type), s(t.unit)] for t in p.sample_type]
samples = []
for x in p.sample:
    assert len(x.value) == len(types), "a sample's values do not match the sample types"
    assert x.location_id, "a sample without a location"
    for i in x.location_id:
        assert i in locs, f"sample refers to no location {i}"
    labels = {}
    for l in x.label:
        key = s(l.key)
        assert key not in labels, f"label {key} twice"
        labels[key] = s(l.str) if l.str else l.num
    if "thread" in labels:
        assert labels["thread"].endswith(f"[{labels['tid']}]"), labels
    samples.append({"labels": labels, "values": list(x.value),
                    "locations": [locs[i] for i in x.location_id]})
json.dump({
    "sample_type": types,
    "default_sample_type": s(p.default_sample_type),
    "period_type": [s(p.period_type.type), s(p.period_type.unit)],
    "period": p.period,
    "comments": [s(c) for c in p.comment],
    "functions": {str(k): list(v) for k, v in funcs.items()},
    "samples": samples,
    "source_lines": sorted(source_lines),
}, sys.stdout)
