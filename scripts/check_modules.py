#!/usr/bin/env python3
"""The shape rules of src/, a lint step of scripts/test.sh; exits 1 naming each breach.

- No cycle between modules. A module is a file: src/a/b.rs is `a::b`, src/a/mod.rs is `a`. An
  edge A -> B is a `crate::` path in A's code (comments stripped) that names B or something in
  B; `use crate::{..}` groups are expanded. Each strongly connected component of more than one
  module is printed with the edges inside it.
- Layers: the top-level modules, in the order of src/lib.rs's "//! layers:" line, each use
  only those before them (so `crate::storage::..` in fold/ points down, never up).
- No file over 500 lines; no function (or v1_function! body) over 80 lines unless a line of
  its doc comment starts with "Long because" and says why.

`--graph` prints every edge instead; `--self-test` runs the checks on copies of src/ with a
cycle, an upward use, a long function and a long file put in, and fails unless each is caught.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "src"
if "--root" in sys.argv:
    ROOT = pathlib.Path(sys.argv[sys.argv.index("--root") + 1]).resolve()


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
    failed = False
    for comp in knots:
        failed = True
        inside = set(comp)
        print(f"check_modules: a cycle through {len(comp)} modules: {', '.join(comp)}")
        for a in comp:
            for b in sorted(edges[a] & inside):
                print(f"    {a} -> {b}")
    layers = re.search(r"^//! layers: (.*)$", (ROOT / "lib.rs").read_text(), flags=re.M)
    order = [name.strip() for name in layers.group(1).split(",")] if layers else []
    if set(order) != {m for m in modules if "::" not in m and m != "crate"} - {"tests"}:
        failed = True
        print(f"check_modules: src/lib.rs's \"//! layers:\" line must name every top-level module once: {order}")
    rank = {name: i for i, name in enumerate(order)}
    for a in sorted(edges):
        for b in sorted(edges[a]):
            la, lb = a.split("::")[0], b.split("::")[0]
            if la in rank and lb in rank and rank[lb] > rank[la]:
                failed = True
                print(f"check_modules: {a} -> {b} points up (lib.rs layers {lb} after {la})")
    long_fns = 0
    for f in files:
        lines = f.read_text().splitlines()
        rel = f.relative_to(ROOT.parent)
        if len(lines) > 500:
            failed = True
            print(f"check_modules: {rel} has {len(lines)} lines (at most 500)")
        for name, start, length in functions(lines):
            if length > 80:
                doc = []
                k = start - 1
                while k >= 0 and re.match(r"\s*(///|//|#\[)", lines[k]):
                    doc.append(lines[k])
                    k -= 1
                if not any(re.match(r"\s*///?\s*Long because", d) for d in doc):
                    failed = True
                    long_fns += 1
                    print(f"check_modules: {rel}:{start + 1}: {name} is {length} lines (at most 80 without"
                          " a \"Long because\" line in its doc comment)")
    if failed:
        return 1
    print(f"check_modules: {len(modules)} modules, {sum(map(len, edges.values()))} edges, no cycle,"
          f" layers in lib.rs order, files and functions within their lengths")
    return 0


def functions(lines):
    """(name, first line index, length in lines) of each fn and v1_function! in `lines`."""
    fn = re.compile(r"^\s*(?:pub(?:\([a-z]+\))? )?(?:const )?(?:unsafe )?(?:extern \"[A-Za-z-]+\" )?fn ([a-z_0-9]+)")
    macro = re.compile(r"^\s*(?:crate::pg::v1::)?v1_function!\(")
    out = []
    for i, line in enumerate(lines):
        m = fn.match(line)
        opener = "{"
        if m:
            name = m.group(1)
        elif macro.match(line):
            name = lines[i + 1].strip().rstrip(",") if i + 1 < len(lines) else "v1_function"
            opener = "("
        else:
            continue
        closer = "}" if opener == "{" else ")"
        depth, seen = 0, False
        for j in range(i, len(lines)):
            code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', lines[j].split("//")[0])
            if opener == "{" and not seen and ";" in code and "{" not in code:
                break  # a declaration without a body
            for c in code:
                if c == opener:
                    depth += 1
                    seen = True
                elif c == closer:
                    depth -= 1
            if seen and depth == 0:
                out.append((name, i, j - i + 1))
                break
    return out


def self_test():
    """Each breach put into a copy of src/ must make the check fail, naming it."""
    import shutil
    import subprocess
    import tempfile

    long_fn = "\nfn made_long() {\n" + "    let _ = 1;\n" * 90 + "}\n"
    breaches = {
        # pg::spi -> fold::xact: a cycle (xact reaches pg) and an upward use.
        "a cycle": ("pg/spi.rs", "\nuse crate::fold::xact as _;\n", "a cycle through"),
        "an upward use": ("pg/errors.rs", "\nuse crate::read::unseen as _;\n", "points up"),
        "a long function": ("pg/gucs.rs", long_fn, "made_long is"),
        "a long file": ("pg/v1.rs", "// a line\n" * 500, "lines (at most 500)"),
    }
    failed = False
    for what, (file, added, expected) in breaches.items():
        with tempfile.TemporaryDirectory() as tmp:
            copy = pathlib.Path(tmp) / "src"
            shutil.copytree(ROOT, copy)
            with open(copy / file, "a") as f:
                f.write(added)
            run = subprocess.run([sys.executable, __file__, "--root", str(copy)], capture_output=True, text=True)
            caught = run.returncode == 1 and expected in run.stdout
            print(f"check_modules self-test: {what} in {file}: {'caught' if caught else 'MISSED'}")
            failed |= not caught
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(self_test() if "--self-test" in sys.argv else main())
