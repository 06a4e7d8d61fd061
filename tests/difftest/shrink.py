"""shrink.py — cuts a failing case down to a small reproducer.

Greedy, each step kept only if the case still fails the same way (a crash stays a crash, a
mismatch a mismatch): keep one output; replace a statement by one of its operands of the same
type (which drops the statement and whatever fed only it); drop items; halve lengths. A
budget of runs bounds the time it takes.
"""
import time

from . import data as datamod
from .check import Failure, run_case
from .model import Program


def clone(outputs, old, new):
    """The graph under outputs with node old replaced by new (nodes copied, inputs shared)."""
    memo = {}

    def copy(n):
        if n is old:
            return new
        if n.op in ("input", "lit"):
            return n
        if id(n) not in memo:
            m = type(n)(n.op, [copy(a) for a in n.args], n.dtype, n.shape, **n.attrs)
            memo[id(n)] = m
        return memo[id(n)]

    return [copy(o) for o in outputs]


def candidates(prog):
    """Smaller programs: each statement replaced by a same-typed operand."""
    for n in reversed(prog.stmts):
        for a in n.args:
            if a.is_lit() or a.dtype != n.dtype or a.shape != n.shape or a.attrs.get("usable") is False:
                continue
            outs = clone(prog.outputs, n, a)
            if any(o.op == "input" for o in outs):
                continue
            yield Program(prog.inputs, outs, prog.sizes)


class Shrinker:
    def __init__(self, ragjit, target, threads, work, kind, budget=60, seconds=150):
        self.ragjit, self.target, self.threads, self.work, self.kind = ragjit, target, threads, work, kind
        self.runs, self.budget, self.deadline = 0, budget, time.time() + seconds

    def fails(self, prog, dat):
        if self.runs >= self.budget or time.time() > self.deadline:
            return False
        self.runs += 1
        try:
            run_case(self.ragjit, prog, dat, self.target, self.threads, self.work)
        except Failure as f:
            return f.kind == self.kind
        except Exception:  # the reference cannot take the smaller case: not a reproducer
            return False
        return False

    def shrink(self, prog, dat):
        for o in prog.outputs if len(prog.outputs) > 1 else []:
            p = Program(prog.inputs, [o], prog.sizes)
            if self.fails(p, dat):
                prog = p
                break
        progress = True
        while progress:
            progress = False
            for p in candidates(prog):
                if self.fails(p, dat):
                    prog, progress = p, True
                    break
        return prog, self.shrink_data(prog, dat)

    def shrink_data(self, prog, dat):
        b = 0
        while b < len(dat.lens) and len(dat.lens) > 1:
            keep = [i for i in range(len(dat.lens)) if i != b]
            d = datamod.shrink(prog, dat, keep, [dat.lens[i] for i in keep])
            if self.fails(prog, d):
                dat = d
            else:
                b += 1
        for i in range(len(dat.lens)):
            while dat.lens[i] > 1:
                lens = list(dat.lens)
                lens[i] //= 2
                d = datamod.shrink(prog, dat, list(range(len(lens))), lens)
                if not self.fails(prog, d):
                    break
                dat = d
        return dat
