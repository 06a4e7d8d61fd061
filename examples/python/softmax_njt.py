#!/usr/bin/env python3
"""Softmax over the ragged dim of a PyTorch nested jagged tensor, with ragjit.

A batch of variable-length sequences (B items, each len_b x D) as PyTorch holds it: a nested
tensor of layout torch.jagged. ragjit compiles the program once, reads the NJT's values and
offsets in place and returns an NJT over the same offsets, which the rest of the model uses as
it would PyTorch's own. The same step is also called through ragjit.torch.op inside
torch.compile(fullgraph=True). Each result is checked against torch.softmax on the NJT.

    python3 examples/python/softmax_njt.py      (needs the ragjit package and PyTorch)
"""
import time

import torch

import ragjit
import ragjit.torch

B, D = 64, 128
torch.manual_seed(0)
lengths = torch.randint(1, 200, (B,))
x = torch.nested.nested_tensor_from_jagged(
    torch.randn(int(lengths.sum()), D), torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]))
scale = torch.rand(D) + 0.5

prog = ragjit.compile("""
ragged j1 : B
input x : f32[B, j1, 128]
input scale : f32[128]
y = softmax(x * scale, dim=1)     # over each sequence's own length, no padding
output y
""")

y = prog(x=x, scale=scale)                      # an NJT in, an NJT out
want = torch.softmax(x * scale, dim=1)          # PyTorch's NJT softmax
torch.testing.assert_close(y.values(), want.values(), rtol=1e-5, atol=1e-6)
assert y.offsets() is x.offsets()               # the same ragged size as x: no copy of offsets


def best_us(fn, n=50):
    fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6


print("softmax over the ragged dim: B=%d, %d rows of %d f32" % (B, int(lengths.sum()), D))
print("  ragjit   %8.1f us" % best_us(lambda: prog(x=x, scale=scale)))
print("  PyTorch  %8.1f us (NJT eager)" % best_us(lambda: torch.softmax(x * scale, dim=1)))

# the same program as a custom operator, inside a compiled model with no graph break
op = ragjit.torch.op(prog)


@torch.compile(fullgraph=True, backend="aot_eager")
def model(x, scale):
    return op(x=x, scale=scale) * 2.0


z = model(x, scale)
torch.testing.assert_close(z.values(), want.values() * 2.0, rtol=1e-5, atol=1e-6)
print("torch.compile(fullgraph=True) with ragjit.torch.op: matches PyTorch")
