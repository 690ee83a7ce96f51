#!/usr/bin/env python3
"""Compares two `addr2line -a -i -f` style outputs (reference first): per pc,
the innermost location (file:line), the number of frames, the locations of
the whole inline chain (file and line of every frame), and the chain with
function names too. Files are compared by base name (and the innermost by
full path). Usage: lines_compare.py REF GOT LABEL REFNAME. Prints one
summary line and up to three differences."""
import os, re, sys

def parse(path):
    recs, cur = {}, None
    lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    i = 0
    while i < len(lines):
        l = lines[i]
        if re.fullmatch(r"0x[0-9a-f]+", l):
            cur = int(l, 16)
            recs[cur] = []
            i += 1
            continue
        name, loc = l, lines[i + 1]
        loc = re.sub(r" \(discriminator \d+\)$", "", loc)
        f, _, n = loc.rpartition(":")
        n = int(n) if n.isdigit() else 0
        recs[cur].append((name, f, n))
        i += 2
    return recs

def known(chain):
    return [c for c in chain if not (c[0] == "??" and c[1] == "??")]

ref, got = parse(sys.argv[1]), parse(sys.argv[2])
label = sys.argv[3] if len(sys.argv) > 3 else sys.argv[2]
rn = sys.argv[4] if len(sys.argv) > 4 else "binutils"
n = len(ref)
inner_full = inner_base = chain = locs = depth = ref_lines = got_lines = missing = extra = 0
diffs = []
for pc, r in ref.items():
    g = known(got.get(pc, []))
    r = known(r)
    has_r = bool(r) and r[0][2] > 0
    has_g = bool(g) and g[0][2] > 0
    ref_lines += has_r
    got_lines += has_g
    if has_r and not has_g:
        missing += 1
    if has_g and not has_r:
        extra += 1
    if not has_r:
        continue
    if has_g and (r[0][1], r[0][2]) == (g[0][1], g[0][2]):
        inner_full += 1
    if has_g and (os.path.basename(r[0][1]), r[0][2]) == (os.path.basename(g[0][1]), g[0][2]):
        inner_base += 1
    depth += len(r) == len(g)
    same = len(r) == len(g) and all(
        a[0] == b[0] and os.path.basename(a[1]) == os.path.basename(b[1]) and a[2] == b[2] for a, b in zip(r, g)
    )
    chain += same
    locs += len(r) == len(g) and all(
        os.path.basename(a[1]) == os.path.basename(b[1]) and a[2] == b[2] for a, b in zip(r, g)
    )
    if not same and len(diffs) < 3:
        diffs.append((hex(pc), r, g))
pct = lambda k: f"{100.0 * k / max(ref_lines, 1):.1f} %"
print(f"{label} vs {rn}: {ref_lines} of {n} pcs with a line there, {got_lines} here; "
      f"innermost file:line {pct(inner_base)} (full path {pct(inner_full)}); "
      f"inline depth {pct(depth)}; chain's locations {pct(locs)}; with names {pct(chain)}; "
      f"lines only {rn} has {missing}, only this {extra}")
for d in diffs:
    print(f"   differs at {d[0]}\n     {rn}: {d[1]}\n     this: {d[2]}")
