#!/usr/bin/env python3
"""Fails if a crate of the workspace has an import cycle between its modules.

docs/ARCHITECTURE.md: data flows one way, and inside a crate no module
imports a module of a higher layer. Each source file under a crate's src/
is a module; an edge runs from a file to every module it names through
`crate::…`, `super::…` or `self::…` (in a `use` or inline). The crate's root
(lib.rs, main.rs) is the module map and re-exports: edges to it are not
counted. A cycle is a strongly connected set of two or more files; each is
printed with the names that tie it. Exit status 1 if there is one.

Usage: scripts/check-module-cycles.py [workspace root]
"""
import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def crate_dirs(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ("target", ".git", "node_modules")]
        if "Cargo.toml" in filenames and os.path.isdir(os.path.join(dirpath, "src")):
            yield dirpath


def module_of(src, path):
    """The module path of a file under src/: a/b.rs and a/b/mod.rs are a::b."""
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    if rel in (["lib"], ["main"]) or rel[:1] == ["bin"]:
        return None
    return tuple(rel)


def expand(spec):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e] (paths only)."""
    spec = re.sub(r"\s+", "", spec)
    m = re.match(r"^(.*?)\{(.*)\}$", spec)
    if not m:
        return [spec]
    prefix, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if p:
            out.extend(prefix + q for q in expand(p))
    return out


def references(text):
    """Paths a file names starting with crate::, super:: or self::."""
    text = re.sub(r"//[^\n]*", "", text)
    refs = []
    for m in re.finditer(r"\buse\s+((?:crate|super|self)::[^;]*);", text):
        refs.extend(expand(m.group(1)))
    for m in re.finditer(r"\b((?:crate|super|self)(?:::%s)+)" % IDENT, text):
        refs.append(m.group(1))
    return refs


def resolve(ref, here, modules):
    segs = ref.split("::")
    if segs[0] == "crate":
        base, rest = [], segs[1:]
    else:
        # `self` is the file's own module, each `super` one up.
        base = list(here)
        rest = segs
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
    path = base + [s for s in rest if re.fullmatch(IDENT, s)]
    # The longest prefix that is a file's module.
    for n in range(len(path), 0, -1):
        if tuple(path[:n]) in modules:
            return tuple(path[:n])
    return None


def check_crate(dir_):
    src = os.path.join(dir_, "src")
    files = {}
    for dirpath, _, filenames in os.walk(src):
        for f in filenames:
            if f.endswith(".rs"):
                p = os.path.join(dirpath, f)
                m = module_of(src, p)
                if m is not None:
                    files[m] = p
    edges = {m: {} for m in files}
    for m, p in files.items():
        with open(p, encoding="utf-8") as fh:
            text = fh.read()
        # Unit tests may use anything of their crate.
        text = text.split("#[cfg(test)]")[0]
        for ref in references(text):
            t = resolve(ref, m, files)
            if t is not None and t != m:
                edges[m].setdefault(t, set()).add(ref.split("::")[-1])
    return files, edges


def cycles(edges):
    """Tarjan's strongly connected components of two or more nodes."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    found = 0
    for d in sorted(crate_dirs(root)):
        files, edges = check_crate(d)
        for comp in cycles(edges):
            found += 1
            print("import cycle in %s:" % os.path.relpath(d, root))
            for a in comp:
                for b in comp:
                    if b in edges[a]:
                        print("  %s -> %s: %s" % (
                            os.path.relpath(files[a], root),
                            os.path.relpath(files[b], root),
                            ", ".join(sorted(edges[a][b]))))
    if found:
        print("%d import cycle(s); docs/ARCHITECTURE.md says imports go one way" % found)
        sys.exit(1)
    print("no import cycle between modules")


if __name__ == "__main__":
    main()
