#!/usr/bin/env python3
"""An embedding bag with ragjit: each item's ids, a jagged tensor, summed rows of a table.

PyTorch's torch.nn.functional.embedding_bag(ids, table, offsets, mode="sum") on the same data
is the reference; ragjit takes the ids as a nested jagged tensor (int64), the table as a dense
tensor, and returns a dense (B, D) tensor. An id out of range is a ragjit.IndexRangeError
naming the item and position, not a crash.

    python3 examples/python/embedding_bag.py    (needs the ragjit package and PyTorch)
"""
import time

import torch

import ragjit

V, D, B = 10000, 64, 512
torch.manual_seed(0)
table = torch.randn(V, D)
lengths = torch.randint(0, 40, (B,))
offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
ids = torch.nested.nested_tensor_from_jagged(torch.randint(0, V, (int(offsets[-1]),)), offsets)

prog = ragjit.compile("""
ragged j1 : B
input table : f32[V, 64]
input ids : i64[B, j1]
bag = embedding(table, ids).sum(dim=1)
output bag
""")

bag = prog(table=table, ids=ids)
want = torch.nn.functional.embedding_bag(ids.values(), table, offsets[:-1], mode="sum")
torch.testing.assert_close(bag, want, rtol=1e-5, atol=1e-5)


def mean_us(fn, n=20):
    fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6


print("embedding bag: B=%d bags, %d ids, table %d x %d f32" % (B, int(offsets[-1]), V, D))
print("  ragjit   %8.1f us" % mean_us(lambda: prog(table=table, ids=ids)))
print("  PyTorch  %8.1f us (F.embedding_bag)" %
      mean_us(lambda: torch.nn.functional.embedding_bag(ids.values(), table, offsets[:-1], mode="sum")))

bad = ids.values().clone()
first = int((lengths > 0).nonzero()[0])  # the first item with an id
bad[int(offsets[first])] = V
try:
    prog(table=table, ids=torch.nested.nested_tensor_from_jagged(bad, offsets))
except ragjit.IndexRangeError as e:
    print("an id out of range:", e)
