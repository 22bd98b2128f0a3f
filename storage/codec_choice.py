"""Which record codec serves: the compiled ``_codec`` extension, or the pure-Python one.

The extension (storage/_codec.c, built by ``pip install``) is used when it is
present; ``LOGAN_RAY_PURE_CODEC=1`` or a missing build selects the pure-Python
code, which gives identical results (tests run both through :func:`use_compiled`).
Decoders and builders ask :func:`implementation` once per call, so a switch
takes effect at the next call.
"""
from __future__ import annotations

import os

from .errors import CorruptRecordError
from .record_types import Column, Record

try:
    from . import _codec as _compiled
except ImportError:  # not built (e.g. running from a source tree): the pure-Python codec serves
    _compiled = None
if os.environ.get("LOGAN_RAY_PURE_CODEC", "") not in ("", "0"):
    _compiled = None
if _compiled is not None:
    _compiled.setup(Record, CorruptRecordError, Column)
_C = _compiled  # the implementation in use; None = pure Python


def compiled() -> bool:
    """True when the compiled codec serves (False: the pure-Python one)."""
    return _C is not None


def implementation():
    """The compiled codec module in use, or None when the pure-Python code serves."""
    return _C


def use_compiled(flag: bool) -> bool:
    """Switch implementation (tests compare both); returns the previous setting."""
    global _C
    prev = _C is not None
    if flag and _compiled is None:
        raise RuntimeError("the compiled record codec (logan_ray.storage._codec) is not built")
    _C = _compiled if flag else None
    return prev


__all__ = ["compiled", "implementation", "use_compiled"]
