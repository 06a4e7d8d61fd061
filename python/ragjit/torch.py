"""A ragjit program as a PyTorch operator that ``torch.compile`` keeps in its graph.

``ragjit.torch.op(prog)`` registers the program as a ``torch.library`` custom operator,
``torch.ops.ragjit.<name>``, with a fake (meta) implementation that gives each output's shape
from the program's types alone: constant dims, named sizes read off the inputs' shapes, the
batch size from the offsets' length, a jagged output's rows from the rows of the input over
its ragged symbol, and a data-dependent size (a pad length ``max(j)``) as a new unbacked size.
So a model calling it compiles with ``torch.compile(fullgraph=True)`` without a graph break,
and the compiled graph calls ragjit for it.

Custom operators take no nested tensors (PyTorch refuses them at the dispatcher), so the
operator's arguments are a jagged input's values, offsets and lengths (None when packed), and
a jagged output comes back as its values, with the rows of its symbol's input values (as
PyTorch's own ops keep them, a view's spare rows included), which the fake can tell without
reading the data; the callable that ``op`` returns does the unwrapping and rewrapping
(``nested_tensor_from_jagged`` over the input's own offsets and lengths tensors, which keeps
PyTorch's ragged size the same symbol as the input's). Outside ``torch.compile`` it calls the
program directly, which is the same computation without the dispatcher's cost.

Limits: an output with two ragged dims ``[B, j, j, ...]`` has no nested tensor form.
"""
from __future__ import annotations

import itertools
from typing import Any, Dict, List, Optional, Tuple

import torch

from . import _lib
from ._errors import ArgumentError, UnsupportedError
from ._program import Program
from ._torch_io import TORCH_DTYPES, Parts

__all__ = ["op", "RaggedOp"]

_names = itertools.count()


class RaggedOp:
    """A program registered as ``torch.ops.<namespace>.<name>`` (:func:`op` makes it).

    Call it as the program, with keyword arguments: nested jagged tensors for jagged inputs,
    tensors for dense ones, ints for named sizes. Jagged outputs are nested jagged tensors,
    dense outputs tensors; one output is returned itself, several as a tuple in output order.
    ``.op`` is the registered operator (``torch.ops.ragjit.<name>.default``), whose arguments
    are flat: for each input in declaration order its tensor, or a jagged input's values,
    offsets and lengths (None for a packed one), then the named sizes; it returns each
    output's tensor (a jagged one's values, with the rows of its symbol's input values)."""

    def __init__(self, program: Program, name: Optional[str] = None, namespace: str = "ragjit") -> None:
        self.program = program
        self.name = name or "program_%d" % next(_names)
        self.namespace = namespace
        # the plan of the flat argument list: (kind, input name); kinds: "dense", "jagged", "size"
        self._args: List[Tuple[str, str]] = []
        where: Dict[int, Tuple[int, int]] = {}   # dense symbol -> (flat arg index, axis)
        batch: Dict[int, int] = {}               # ragged symbol's parent -> offsets arg index
        rows: Dict[int, int] = {}                # ragged symbol -> values arg index
        schema = []
        for port in program.inputs:
            if port.sym is not None:
                if port.nragged != 1:
                    raise UnsupportedError("ragjit.torch.op: input %s : %s has two ragged dims"
                                           % (port.name, port.type_str))
                idx = len(self._args)  # the values' arg; axis 0 is the rows
                rows.setdefault(port.sym, idx)
                batch.setdefault(port.bsym, idx + 1)
                axes = [(a + 1, d) for a, d in enumerate(port.dims[2:])]
                self._args += [("jagged", port.name), ("offsets", port.name), ("lengths", port.name)]
                schema += ["Tensor %s_values" % port.name, "Tensor %s_offsets" % port.name,
                           "Tensor? %s_lengths" % port.name]
            else:
                axes = list(enumerate(port.dims))
                idx = len(self._args)
                self._args.append(("dense", port.name))
                schema.append("Tensor %s" % port.name)
            for axis, d in axes:
                if d < 0 and program.dim_kind(d) == _lib.DIM_DENSE:
                    where.setdefault(d, (idx, axis))
        for name, d in program._size_names.items():
            if d not in where and d not in batch:
                where[d] = (len(self._args), -1)
                self._args.append(("size", name))
                schema.append("SymInt %s" % name)
        self._where, self._batch, self._rows = where, batch, rows
        self._outs = []
        for port in program.outputs:
            if port.nragged > 1:
                raise UnsupportedError("ragjit.torch.op: output %s : %s has two ragged dims, "
                                       "which no nested tensor holds" % (port.name, port.type_str))
            if port.sym is not None and port.sym not in rows:
                raise UnsupportedError("ragjit.torch.op: output %s : %s: no input is over %s"
                                       % (port.name, port.type_str, program.dim_name(port.sym)))
            self._outs.append(port)
        # the input whose offsets a jagged output takes, by ragged symbol
        self._offsets_of = {sym: self._args[i][1] for sym, i in rows.items()}
        rets = "Tensor" if len(self._outs) == 1 else "(%s)" % ", ".join(["Tensor"] * len(self._outs))
        self.schema = "%s(%s) -> %s" % (self.name, ", ".join(schema), rets)
        self._lib = torch.library.Library(namespace, "FRAGMENT")
        self._lib.define(self.schema)
        for key in ("CPU", "CUDA"):
            self._lib.impl(self.name, self._impl, key)
        torch.library.register_fake("%s::%s" % (namespace, self.name), self._fake, lib=self._lib)
        self.op = getattr(getattr(torch.ops, namespace), self.name).default

    # ---- the operator's two implementations ------------------------------------------

    def _inputs(self, args: Tuple[Any, ...]) -> Dict[str, Any]:
        inputs: Dict[str, Any] = {}
        for (kind, name), a in zip(self._args, args):
            if kind == "jagged":
                inputs[name] = Parts(a)
            elif kind == "offsets":
                inputs[name].offsets = a
            elif kind == "lengths":
                inputs[name].lengths = a
            else:
                inputs[name] = a
        return inputs

    def _impl(self, *args: Any) -> Any:
        outs = self.program._run(self._inputs(args), raw=True)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _fake(self, *args: Any) -> Any:
        dynamic: Dict[int, Any] = {}
        outs = []
        for port in self._outs:
            dims = port.dims[2:] if port.sym is not None else port.dims
            shape = [args[self._rows[port.sym]].shape[0]] if port.sym is not None else []
            for d in dims:
                shape.append(self._size(d, args, dynamic, port))
            device = args[0].device if args and isinstance(args[0], torch.Tensor) else "cpu"
            outs.append(torch.empty(shape, dtype=TORCH_DTYPES[port.code], device=device))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _size(self, d: int, args: Tuple[Any, ...], dynamic: Dict[int, Any], port: Any) -> Any:
        if d >= 0:
            return d
        if d in self._batch:
            return args[self._batch[d]].shape[0] - 1
        if d in self._where:
            i, axis = self._where[d]
            return args[i] if axis < 0 else args[i].shape[axis]
        if self.program.dim_kind(d) == _lib.DIM_MAXLEN:
            if d not in dynamic:  # the longest item: known only once the offsets are read
                dynamic[d] = torch.library.get_ctx().new_dynamic_size(min=0)
            return dynamic[d]
        raise UnsupportedError("ragjit.torch.op: output %s : %s: cannot tell dim %s from the "
                               "inputs" % (port.name, port.type_str, self.program.dim_name(d)))

    # ---- calling it -------------------------------------------------------------------

    def __call__(self, **inputs: Any) -> Any:
        if not torch.compiler.is_compiling():
            return self.program(**inputs)
        args = []
        for kind, name in self._args:
            if name not in inputs:
                raise ArgumentError("ragjit.torch.op: %s is missing" % name)
            x = inputs[name]
            if kind == "jagged":
                args.append(x.values())
            elif kind == "offsets":
                args.append(x.offsets())
            elif kind == "lengths":
                args.append(x.lengths())
            else:
                args.append(x)
        outs = self.op(*args)
        if len(self._outs) == 1:
            outs = (outs,)
        result = []
        for port, t in zip(self._outs, outs):
            if port.sym is None:
                result.append(t)
            else:
                src = inputs[self._offsets_of[port.sym]]
                result.append(torch.nested.nested_tensor_from_jagged(t, src.offsets(), src.lengths()))
        return result[0] if len(result) == 1 else tuple(result)

    def __repr__(self) -> str:
        return "<ragjit.torch.op %s::%s>" % (self.namespace, self.schema)


def op(program: Program, name: Optional[str] = None, namespace: str = "ragjit") -> RaggedOp:
    """Registers ``program`` as the PyTorch custom operator ``torch.ops.<namespace>.<name>``
    (``name``: ``program_<n>`` when not given) with a fake implementation, and returns a
    :class:`RaggedOp` that calls it with nested jagged tensors in and out (packed, or views
    with holes), under ``torch.compile(fullgraph=True)`` too."""
    return RaggedOp(program, name, namespace)
