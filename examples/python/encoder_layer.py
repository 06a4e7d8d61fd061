#!/usr/bin/env python3
"""A transformer encoder layer over a PyTorch nested jagged tensor, compiled by ragjit.

Pre-norm, single-head self-attention over each item's own length (a len_b x len_b block of
scores per item, no padding and no mask), then a GELU feed-forward layer, each with its
residual add:

    h = x + attention(layer_norm(x))
    y = h + ffn(layer_norm(h))

The reference is the same layer in PyTorch, in float64, item by item (each item a dense
(len_b, D) tensor: what padding-free attention means). The input is an NJT; the output is an
NJT over the same offsets.

    python3 examples/python/encoder_layer.py    (needs the ragjit package and PyTorch)
"""
import math
import time

import torch
import torch.nn.functional as F

import ragjit

D, FF, B = 64, 256, 16
torch.manual_seed(0)
lengths = torch.randint(1, 96, (B,))
offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
x = torch.nested.nested_tensor_from_jagged(torch.randn(int(offsets[-1]), D), offsets)


def param(*shape, scale=None):
    return torch.randn(*shape) * (scale if scale is not None else 1.0 / math.sqrt(shape[-1]))


w = dict(wq=param(D, D), wk=param(D, D), wv=param(D, D), wo=param(D, D),
         g1=1.0 + 0.1 * param(D, scale=1.0), b1=0.1 * param(D, scale=1.0),
         g2=1.0 + 0.1 * param(D, scale=1.0), b2=0.1 * param(D, scale=1.0),
         w1=param(FF, D), c1=0.1 * param(FF, scale=1.0), w2=param(D, FF), c2=0.1 * param(D, scale=1.0))

prog = ragjit.compile("""
ragged j1 : B
input x : f32[B, j1, 64]
input wq : f32[64, 64]
input wk : f32[64, 64]
input wv : f32[64, 64]
input wo : f32[64, 64]
input g1 : f32[64]
input b1 : f32[64]
input g2 : f32[64]
input b2 : f32[64]
input w1 : f32[256, 64]
input c1 : f32[256]
input w2 : f32[64, 256]
input c2 : f32[64]
a = layer_norm(x, 64, g1, b1, eps=1e-5)
q = linear(a, wq)
k = linear(a, wk)
v = linear(a, wv)
p = softmax(q @ k.transpose(1, 2) / 8.0, dim=2)     # [B, j1, j1]: one block per item
h = x + linear(p @ v, wo)
f = layer_norm(h, 64, g2, b2, eps=1e-5)
y = h + linear(gelu(linear(f, w1, c1)), w2, c2)
output y
""")


def reference(item):
    """The layer on one item (len_b, D), in float64."""
    p64 = {k: t.double() for k, t in w.items()}
    a = F.layer_norm(item, (D,), p64["g1"], p64["b1"], eps=1e-5)
    q, k, v = a @ p64["wq"].T, a @ p64["wk"].T, a @ p64["wv"].T
    h = item + (torch.softmax(q @ k.T / math.sqrt(D), dim=1) @ v) @ p64["wo"].T
    f = F.layer_norm(h, (D,), p64["g2"], p64["b2"], eps=1e-5)
    return h + F.linear(F.gelu(F.linear(f, p64["w1"], p64["c1"])), p64["w2"], p64["c2"])


y = prog(x=x, **w)
assert y.is_nested and y.offsets() is x.offsets()
worst = 0.0
for got, item in zip(y.unbind(), x.unbind()):
    want = reference(item.double())
    torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4)
    worst = max(worst, float((got.double() - want).abs().max()))

t = time.perf_counter()
for _ in range(10):
    prog(x=x, **w)
ms = (time.perf_counter() - t) / 10 * 1e3
print("encoder layer: B=%d items of 1..95 rows (%d in all), D=%d, FF=%d" % (B, int(offsets[-1]), D, FF))
print("  matches PyTorch (float64, item by item): largest difference %.2e" % worst)
print("  ragjit %.2f ms a call" % ms)
