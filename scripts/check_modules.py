#!/usr/bin/env python3
"""Fails on a cycle between the modules of src/ (a lint step of scripts/test.sh).

A module is a file: src/a/b.rs is `a::b`, src/a/mod.rs is `a`. An edge A -> B is a `crate::`
path in A's code (comments stripped) that names B or something inside B; `use crate::{..}`
groups are expanded. A parent module's own declarations (`mod x;`) are not edges. Prints the
strongly connected components of more than one module, each with the edges inside it, and exits
1 if there is any. `--graph` prints every edge instead.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "src"


def module_name(path):
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return "::".join(parts) or "crate"


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out = []
    for line in text.splitlines():
        # A `//` outside a string starts a comment; strings with `//` in them are rare enough
        # here that a cut inside one only loses edges the compiler would show anyway.
        in_str = False
        cut = len(line)
        i = 0
        while i < len(line) - 1:
            c = line[i]
            if c == '"' and (i == 0 or line[i - 1] != "\\"):
                in_str = not in_str
            elif not in_str and line.startswith("//", i):
                cut = i
                break
            i += 1
        out.append(line[:cut])
    return "\n".join(out)


def expand(text, i, prefix):
    """Paths of the `a::b::{c, d::e}` expression at text[i:], each prefixed."""
    paths = []
    ident = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*|\*)\s*")
    cur = list(prefix)
    while True:
        if text.startswith("{", i):
            i += 1
            while True:
                sub, i = expand(text, i, cur)
                paths.extend(sub)
                while i < len(text) and text[i] in " \n\t":
                    i += 1
                if text.startswith(",", i):
                    i += 1
                    while i < len(text) and text[i] in " \n\t":
                        i += 1
                    if text.startswith("}", i):
                        return paths, i + 1
                    continue
                if text.startswith("}", i):
                    return paths, i + 1
                return paths, i
        m = ident.match(text, i)
        if not m:
            paths.append(cur)
            return paths, i
        cur = cur + [m.group(1)]
        i = m.end()
        if text.startswith("::", i):
            i += 2
            continue
        # `x as y`
        m2 = re.match(r"\s*as\s+[A-Za-z_][A-Za-z0-9_]*", text[i:])
        if m2:
            i += m2.end()
        paths.append(cur)
        return paths, i


def main():
    files = sorted(ROOT.rglob("*.rs"))
    modules = {module_name(f): f for f in files}
    edges = {m: set() for m in modules}
    for name, f in modules.items():
        code = strip_comments(f.read_text())
        for m in re.finditer(r"\bcrate::", code):
            for path in expand(code, m.end(), [])[0]:
                target = None
                for k in range(len(path), 0, -1):
                    cand = "::".join(path[:k])
                    if cand in modules:
                        target = cand
                        break
                if target and target != name and target != "crate":
                    edges[name].add(target)
    if "--graph" in sys.argv:
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f"{a} -> {b}")
        return 0
    # Tarjan's strongly connected components.
    index, low, stack, on, sccs = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

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
            sccs.append(comp)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    knots = [sorted(c) for c in sccs if len(c) > 1]
    if not knots:
        print(f"check_modules: {len(modules)} modules, {sum(map(len, edges.values()))} edges, no cycle")
        return 0
    for comp in knots:
        inside = set(comp)
        print(f"check_modules: a cycle through {len(comp)} modules: {', '.join(comp)}")
        for a in comp:
            for b in sorted(edges[a] & inside):
                print(f"    {a} -> {b}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
