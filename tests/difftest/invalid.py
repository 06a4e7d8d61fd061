"""invalid.py — programs and data that ragjit must refuse: exit 1 or 2 with a message on
stderr, never a crash, a hang or a silent result.

Each template is a program the guide says is an error (a parse error, a type or shape error,
an argument out of range, a pad value that does not fit an integer dtype) or valid program
with data the guide says is bad (an explicit pad len shorter than the longest item, an index
out of range, offsets that do not match the values). They are varied by the seed.
"""
import os
import subprocess

import numpy as np

HEAD = "ragged j1 : B\ninput x : f32[B, j1, 4]\n"
PROGRAMS = [
    HEAD + "y = sum(x, dim=0)\noutput y\n",                                  # the batch dim
    HEAD + "input m : i32[B, j1, 4]\ny = mean(m, dim=1)\noutput y\n",         # mean of ints
    HEAD + "input m : bool[B, j1, 4]\ny = -m\noutput y\n",                    # -bool
    HEAD + "input m : bool[B, j1, 4]\ny = m - m\noutput y\n",
    HEAD + "input m : i32[B, j1, 4]\ny = pad(m, value=1e10)\noutput y\n",     # does not fit i32
    HEAD + "input m : i64[B, j1, 4]\ny = masked_fill(m, m > 0, inf)\noutput y\n",
    HEAD + "ragged j2 : B\ninput z : f32[B, j2, 4]\ny = x + z\noutput y\n",   # j1 vs j2
    HEAD + "y = layer_norm(x, 5)\noutput y\n",
    HEAD + "y = softmax(x, dim=3)\noutput y\n",
    HEAD + "y = sum(x, dim=1.0)\noutput y\n",
    HEAD + "y = softmx(x, dim=1)\noutput y\n",
    HEAD + "y = relu(x\noutput y\n",
    HEAD + "y = index_select(x, 1, x)\noutput y\n",
    HEAD + "input w : f32[5, 3]\ny = x @ w\noutput y\n",
    HEAD + "y = pad(x, len=-1)\noutput y\n",
    HEAD + "y = unpad(x, j1)\noutput y\n",
    HEAD + "j1 = relu(x)\noutput j1\n",
    HEAD + "y = reshape(x, [B, j1, 3, -1])\noutput y\n",
    HEAD + "input c : f32[B, j1, 4]\ny = where(c, x, x)\noutput y\n",
    HEAD + "y = 9223372036854775808 + x\noutput y\n",
    HEAD + "output y\n",
    "input x : f32[B, j1, 4]\ny = x\noutput y\n",
]
# valid programs, data the guide calls bad (ragjit run --data): each a (program, writer)
BAD_DATA = [
    (HEAD + "y = softmax(pad(x, len=2), dim=1)\noutput y\n", "long_items"),
    (HEAD + "input t : i64[B, j1]\ny = embedding(x.sum(1), t)\noutput y\n", "index_out"),
    (HEAD + "y = relu(x)\noutput y\n", "rows_mismatch"),
    (HEAD + "y = relu(x)\noutput y\n", "bad_lengths"),
]


def write_bad_data(kind, d, rng):
    os.makedirs(d, exist_ok=True)
    lens = [3, int(rng.integers(0, 3)), 5]
    off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    rows = int(off[-1]) + (1 if kind == "rows_mismatch" else 0)
    np.save(os.path.join(d, "x.npy"), rng.uniform(-1, 1, (rows, 4)).astype(np.float32))
    np.save(os.path.join(d, "j1.npy"), off)
    if kind == "index_out":
        t = rng.integers(0, 3, rows).astype(np.int64)
        t[int(rng.integers(rows))] = int(rng.choice([3, 4, 9, -1, -7]))  # the table has 3 rows
        np.save(os.path.join(d, "t.npy"), t)
    if kind == "bad_lengths":
        np.save(os.path.join(d, "j1.lengths.npy"), np.array(lens[:2], dtype=np.int64))


def run_one(ragjit, text, work, target, data=None, timeout=60):
    """None if refused properly, else what went wrong."""
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "bad.rj")
    with open(path, "w") as f:
        f.write(text)
    src = ["--data", data] if data else ["--random", "B=3,maxlen=4"]
    cmd = [ragjit, "run", path] + src + ["--out", os.path.join(work, "out"), "--target", target]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout} s"
    if p.returncode < 0:
        return f"died of signal {-p.returncode}"
    if p.returncode not in (1, 2):
        return f"exited {p.returncode} (expected a refusal: 1 or 2)"
    if not p.stderr.strip():
        return "refused without a message"
    return None


def case(seed):
    """The invalid case of one seed: (label, program text, bad-data kind or None, rng)."""
    rng = np.random.default_rng(seed)
    i = seed % (len(PROGRAMS) + len(BAD_DATA))
    if i < len(PROGRAMS):
        return f"invalid program #{i}", PROGRAMS[i], None, rng
    text, kind = BAD_DATA[i - len(PROGRAMS)]
    return f"bad data '{kind}'", text, kind, rng
