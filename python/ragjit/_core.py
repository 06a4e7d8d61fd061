"""Contexts, and compiling programs in them (``ragjit.compile``).

A context holds the settings the C library keeps per rj_ctx (threads, memory limit, kernel
cache) and its program cache; programs (module _program) keep their context alive, and the
last of them frees it, whatever order the garbage collector finalizes them in."""
from __future__ import annotations

import os
import threading
from typing import Any, Dict, Iterable, List, Optional, Union

from ._errors import Error, error_for
from ._jagged import Jagged
from ._lib import LIB
from ._program import Program, _free_context_if_done

__all__ = ["Context", "Jagged", "Program", "compile", "default_context"]


class Context:
    """A ragjit context: the settings shared by the programs compiled in it, and its program
    cache (the same source compiled twice in one context compiles once).

    ``threads``: worker threads of CPU programs (``None`` or 0: one per available processor);
    ``memory_limit``: the most bytes one run may allocate (``None`` or 0: half the physical
    memory); ``cache_dir``: the persistent kernel cache (``None``: ``$RAGJIT_CACHE_DIR``, else
    ``~/.cache/ragjit``; ``"off"`` turns it off). A context may be shared by threads."""

    def __init__(self, threads: Optional[int] = None, memory_limit: Optional[int] = None,
                 cache_dir: Optional[Union[str, os.PathLike]] = None) -> None:
        self._ptr: Optional[int] = LIB.rj_ctx_new(None, None)
        if not self._ptr:
            raise error_for(1, "ragjit: cannot create a context (out of memory)")
        # [rj_ctx pointer, programs alive, context finalized]: shared with the programs, so the
        # context is freed after the last of them even when the garbage collector finalizes a
        # cycle holding both in any order (all finalizers of a cycle run before any is cleared)
        self._life: List[Any] = [self._ptr, 0, False]
        self._threads = 0
        self._memory_limit = 0
        self._cache_dir: Optional[str] = None
        if threads is not None:
            self.threads = threads
        if memory_limit is not None:
            self.memory_limit = memory_limit
        if cache_dir is not None:
            self.cache_dir = os.fspath(cache_dir)

    def _check(self, status: int) -> None:
        if status != 0:
            raise self._error(status)

    def _error(self, status: Optional[int] = None) -> Error:
        if status is None:
            status = LIB.rj_ctx_status(self._ptr)
        msg = (LIB.rj_ctx_error(self._ptr) or b"").decode("utf-8", "replace")
        if not msg:
            msg = (LIB.rj_status_str(status) or b"ragjit error").decode()
        return error_for(status, msg)

    @property
    def threads(self) -> int:
        """Worker threads of CPU programs; 0: one per available processor."""
        return self._threads

    @threads.setter
    def threads(self, n: Optional[int]) -> None:
        n = 0 if n is None else int(n)
        self._check(LIB.rj_ctx_set_threads(self._ptr, n))
        self._threads = n

    @property
    def memory_limit(self) -> int:
        """The most bytes one run may allocate; 0: the default (half the physical memory)."""
        return self._memory_limit

    @memory_limit.setter
    def memory_limit(self, nbytes: Optional[int]) -> None:
        nbytes = 0 if nbytes is None else int(nbytes)
        self._check(LIB.rj_ctx_set_memory_limit(self._ptr, nbytes))
        self._memory_limit = nbytes

    @property
    def cache_dir(self) -> Optional[str]:
        """The persistent kernel cache's directory as set (None: the default; "off": none)."""
        return self._cache_dir

    @cache_dir.setter
    def cache_dir(self, path: Optional[Union[str, os.PathLike]]) -> None:
        arg = None if path is None else os.fsencode(path)
        self._check(LIB.rj_ctx_set_cache_dir(self._ptr, arg))
        self._cache_dir = None if path is None else os.fsdecode(path)

    def compile(self, source: str, target: str = "cpu", filename: str = "<string>",
                constants: Iterable[str] = ()) -> "Program":
        """Compiles a program in ragjit's text format (docs/guide.md) for ``target``:
        ``"cpu"`` (LLVM), ``"reference"`` (the interpreter), ``"opencl"`` or ``"cuda"``;
        ``constants``: the inputs whose contents do not change between calls (see
        :class:`Program`)."""
        return Program(self, source, target, filename, constants)

    def __del__(self) -> None:
        life = getattr(self, "_life", None)
        if life is not None:
            life[2] = True
            _free_context_if_done(life)


_default_lock = threading.Lock()
_default: Optional[Context] = None
_by_threads: Dict[int, Context] = {}


def default_context() -> Context:
    """The module's context, made on first use; its settings are the module-level settings
    (``ragjit.default_context().threads = 4``)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Context()
        return _default


def _context_for_threads(threads: int) -> Context:
    with _default_lock:
        ctx = _by_threads.get(threads)
        if ctx is None:
            ctx = _by_threads[threads] = Context(threads=threads)
        return ctx


def compile(source: str, target: str = "cpu", threads: Optional[int] = None,
            context: Optional[Context] = None, filename: str = "<string>",
            constants: Iterable[str] = ()) -> "Program":
    """Compiles ``source`` (ragjit's text format) for ``target`` and returns a
    :class:`Program`.

    ``threads`` runs the program with that many CPU worker threads (programs compiled with the
    same ``threads`` share a context); ``context`` gives a :class:`Context` of your own
    (``threads`` must then be left out). ``constants`` names the inputs whose contents do not
    change between calls, a model's weights: their products' packed weights are made once
    and kept (see :class:`Program`). Raises a :class:`ragjit.Error` subclass
    (``ParseError``, ``ShapeError``, ...) with ragjit's message when the program is wrong."""
    if context is not None and threads is not None:
        raise TypeError("ragjit.compile: give threads or context, not both")
    if context is None:
        context = default_context() if threads is None else _context_for_threads(int(threads))
    return Program(context, source, target, filename, constants)



Context.__module__ = "ragjit"
