"""ragjit's errors: one exception class per status code of the C library (rj_status)."""
from __future__ import annotations

from typing import Dict, Type


class Error(Exception):
    """A failure reported by ragjit.

    ``status`` is the C status code (an ``int``, ``RJ_ERR_*`` in ``ragjit.h``), ``status_name``
    its short description, and ``message`` ragjit's message (``str(e)`` is the message)."""

    status: int = -1
    status_name: str = "error"

    def __init__(self, message: str, status: "int | None" = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class NoMemoryError(Error):
    """RJ_ERR_NOMEM: the allocator returned NULL."""
    status, status_name = 1, "out of memory"


class ArgumentError(Error):
    """RJ_ERR_ARG: a bad argument (unknown name, index out of range, ...)."""
    status, status_name = 2, "bad argument"


class GraphError(Error):
    """RJ_ERR_GRAPH: the graph failed earlier."""
    status, status_name = 3, "graph"


class ShapeError(Error):
    """RJ_ERR_SHAPE: ranks or dims do not combine (including a ragged symbol mismatch)."""
    status, status_name = 4, "shape"


class DtypeError(Error):
    """RJ_ERR_DTYPE: a dtype the op (or the program's input) does not accept."""
    status, status_name = 5, "dtype"


class UnsupportedError(Error):
    """RJ_ERR_UNSUPPORTED: well-formed, but not supported by this version or target."""
    status, status_name = 6, "unsupported"


class UnboundError(Error):
    """RJ_ERR_UNBOUND: an input, dense size or ragged symbol was not given."""
    status, status_name = 7, "unbound"


class SizeError(Error):
    """RJ_ERR_SIZE: an element count or a dense size disagrees (or exceeds the memory limit)."""
    status, status_name = 8, "size"


class BatchError(Error):
    """RJ_ERR_BATCH: batch sizes (offsets lengths, B) disagree."""
    status, status_name = 9, "batch"


class OffsetsStartError(Error):
    """RJ_ERR_OFFSETS_START: offsets[0] != 0, or a negative offset in a view with holes."""
    status, status_name = 10, "offsets start"


class OffsetsOrderError(Error):
    """RJ_ERR_OFFSETS_ORDER: offsets decrease, or a negative length."""
    status, status_name = 11, "offsets order"


class OffsetsEndError(Error):
    """RJ_ERR_OFFSETS_END: the last offset is not the number of rows of the values."""
    status, status_name = 12, "offsets end"


class SameError(Error):
    """RJ_ERR_SAME: symbols declared ``same`` were given different lengths."""
    status, status_name = 13, "same"


class SizeOverflowError(Error):
    """RJ_ERR_OVERFLOW: a size computation overflows."""
    status, status_name = 14, "overflow"


class PadLengthError(Error):
    """RJ_ERR_PAD_LEN: a pad/unpad length is smaller than the longest row."""
    status, status_name = 15, "pad length"


class ParseError(Error):
    """RJ_ERR_PARSE: a syntax error in the program's text."""
    status, status_name = 16, "parse"


class FileError(Error):
    """RJ_ERR_IO: a file could not be read or written, or is malformed."""
    status, status_name = 17, "io"


class CompileError(Error):
    """RJ_ERR_COMPILE: the backend failed to compile the program."""
    status, status_name = 18, "compile"


class NoDeviceError(Error):
    """RJ_ERR_NO_DEVICE: no CUDA driver or device, or no OpenCL platform or device."""
    status, status_name = 19, "no device"


class InternalError(Error):
    """RJ_ERR_INTERNAL: a bug in ragjit; please report it."""
    status, status_name = 20, "internal"


class IndexRangeError(Error):
    """RJ_ERR_INDEX: an index op's index is out of range (found during a run)."""
    status, status_name = 21, "index"


BY_STATUS: Dict[int, Type[Error]] = {
    c.status: c for c in (NoMemoryError, ArgumentError, GraphError, ShapeError, DtypeError,
                          UnsupportedError, UnboundError, SizeError, BatchError,
                          OffsetsStartError, OffsetsOrderError, OffsetsEndError, SameError,
                          SizeOverflowError, PadLengthError, ParseError, FileError,
                          CompileError, NoDeviceError, InternalError, IndexRangeError)
}


def error_for(status: int, message: str) -> Error:
    """The exception of a status code, carrying the message."""
    cls = BY_STATUS.get(status, Error)
    return cls(message, status)


for _cls in (Error, *BY_STATUS.values()):
    _cls.__module__ = "ragjit"
