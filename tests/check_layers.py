#!/usr/bin/env python3
"""check_layers.py — the source tree's shape, checked (DESIGN.md §6, issue 34).

  check_layers.py SRC_DIR

Fails (exit 1, naming each offence) when
  - a file calls a function of a higher layer: util < ir < codegen < runtime (a call is a
    name followed by `(` that names a non-static function defined in another .c file;
    comments and string literals are stripped first, and a file's own static functions and
    locals shadow global names);
  - .c files call each other in a circle (a strongly connected component of the "calls a
    function defined in" relation, within or across directories);
  - a .c file has more than MAX_FILE lines, or a function more than MAX_FUNC lines (a
    function may say why it is longer with a comment `/* long: reason */` on the line before
    its definition).
A regex reading, not a C parser: it over-approximates calls, so a false circle is fixed by
renaming, never by an exception list here.
"""
import os
import re
import sys

MAX_FILE = 1000
MAX_FUNC = 120
LAYERS = ["util", "ir", "codegen", "runtime"]


def strip(text):
    """Comments become blanks (lines kept), string and char literals become empty."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text[i] in "\"'":
            q, j = text[i], i + 1
            while j < n and text[j] != q:
                j += 2 if text[j] == "\\" else 1
            out.append(q + q)
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def layer(rel):
    top = rel.split("/")[0]
    return LAYERS.index(top) if top in LAYERS else len(LAYERS)


def circles(calls):
    """Tarjan's strongly connected components of more than one file."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(calls[v]):
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
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(calls):
        if v not in index:
            visit(v)
    return found


def long_functions(rel, raw):
    lines = raw.split("\n")
    bad, i = [], 0
    while i < len(lines):
        line = lines[i]
        if re.match(r"^[A-Za-z_][^;=]*\)\s*\{\s*$", line) and not line.startswith(("struct", "typedef", "enum", "union")):
            j = i + 1
            while j < len(lines) and lines[j] != "}":
                j += 1
            reason = i > 0 and "long:" in lines[i - 1]
            if j - i - 1 > MAX_FUNC and not reason:
                bad.append("%s:%d: a function of %d lines (over %d): %s" % (rel, i + 1, j - i - 1, MAX_FUNC, line.strip()))
            i = j
        i += 1
    return bad


def main():
    root = sys.argv[1]
    files = sorted(os.path.relpath(os.path.join(d, f), root)
                   for d, _, fs in os.walk(root) for f in fs if f.endswith(".c"))
    raw = {f: open(os.path.join(root, f), encoding="utf-8").read() for f in files}
    src = {f: strip(t) for f, t in raw.items()}
    defs, statics = {}, {}
    for f, t in src.items():
        statics[f] = set(re.findall(r"^static[\w \*]*?\b(\w+)\(", t, re.M))
        for m in re.finditer(r"^(?!static)[A-Za-z_][\w \*]*?\b(\w+)\([^;{]*\)\s*\{", t, re.M):
            defs.setdefault(m.group(1), f)
    calls, why = {}, {}
    for f, t in src.items():
        local = statics[f] | set(re.findall(r"\b(\w+)\s*;", t))
        calls[f] = set()
        for m in re.finditer(r"\b(\w+)\s*\(", t):
            g = defs.get(m.group(1))
            if g and g != f and m.group(1) not in local:
                calls[f].add(g)
                why.setdefault((f, g), set()).add(m.group(1))
    problems = []
    for f in files:
        for g in sorted(calls[f]):
            if layer(g) > layer(f):
                problems.append("%s calls up into %s: %s" % (f, g, ", ".join(sorted(why[(f, g)]))))
    for comp in circles(calls):
        edges = ["%s -> %s (%s)" % (a, b, ", ".join(sorted(why[(a, b)])[:4]))
                 for a in comp for b in comp if b in calls[a]]
        problems.append("files calling each other in a circle: " + "; ".join(edges))
    for f in files:
        n = raw[f].count("\n")
        if n > MAX_FILE:
            problems.append("%s: %d lines (over %d)" % (f, n, MAX_FILE))
        problems += long_functions(f, raw[f])
    for p in problems:
        print(p)
    print("%d files, %d calls between files: %s" % (len(files), sum(len(c) for c in calls.values()),
                                                    "%d problems" % len(problems) if problems else "layered"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
