"""joblib's array wrappers: how many bytes ``joblib.load`` reads after one is built.

Layer: judging rooms - pure core scanner rules (symbolic values in, sizes out).
``joblib.dump`` pickles each numpy array as a ``joblib.numpy_pickle.NumpyArrayWrapper``
whose BUILD state holds ``shape``, ``dtype`` (a ``numpy.dtype`` call and its BUILD
state), ``order``, ``allow_mmap`` and, since joblib 1.2,
``numpy_array_alignment_bytes``; right after that BUILD it writes the array
(``NumpyArrayWrapper.write_array``): a pickle of its own when the dtype holds objects,
else one byte giving a padding length, that many ``0xff`` bytes, and the raw items.
``joblib.load`` (``NumpyArrayWrapper.read_array``) reads them back from the file and
then goes on unpickling, so the walker must read past the same bytes to see what the
rest of the pickle imports.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from ftmanifest.scan.artifacts.pickle_ops import Import, _Dict, _Obj

WRAPPER = ("joblib.numpy_pickle", "NumpyArrayWrapper")
MAX_ARRAY_BYTES = 1 << 44  # 16 TiB: a shape past this is no array a file holds
_CODE = re.compile(r"[<>|=]?([a-zA-Z])(\d*)")
_HASOBJECT = 0x01  # NPY_ITEM_HASOBJECT in a dtype's flags
_SIZED_KINDS = frozenset("biufcSVUaMm")  # kinds whose itemsize the type string or elsize gives


@dataclass(frozen=True)
class JoblibArray:
    objects: bool  # a nested pickle follows, not raw bytes
    padded: bool  # a padding-length byte and padding precede the bytes
    nbytes: int


def is_array_wrapper(obj: _Obj) -> bool:
    func = obj.func
    return isinstance(func, Import) and (func.module, func.name) == WRAPPER


def joblib_array(state: Any) -> JoblibArray:
    """What follows a wrapper built with ``state``; ``ValueError`` when it cannot be told."""
    if not isinstance(state, _Dict):
        raise ValueError("the wrapper's state is not a dict")
    fields = {k: v for k, v in state.items if isinstance(k, str)}
    shape, dtype = fields.get("shape"), fields.get("dtype")
    if not isinstance(shape, tuple) or not all(
        type(n) is int and n >= 0 for n in shape
    ):  # fmt: skip
        raise ValueError(f"shape {_show(shape)} is not a tuple of sizes")
    kind, itemsize, objects = _dtype(dtype)
    if objects:
        return JoblibArray(True, False, 0)
    nbytes = math.prod(shape) * itemsize
    if nbytes > MAX_ARRAY_BYTES:
        raise ValueError(f"shape {shape} of {kind!r} items is {nbytes} bytes")
    return JoblibArray(False, "numpy_array_alignment_bytes" in fields, nbytes)


def _dtype(dtype: Any) -> tuple[str, int, bool]:
    """(type string, itemsize, holds objects) of a pickled ``numpy.dtype(code, ...)``."""
    func = dtype.func if isinstance(dtype, _Obj) else None
    if not (isinstance(func, Import) and func.dotted == "numpy.dtype"):
        raise ValueError(f"dtype {_show(dtype)} is not a numpy.dtype call")
    args, state = dtype.args, dtype.state
    code = args[0] if isinstance(args, tuple) and args else None
    if not isinstance(code, str) or (m := _CODE.fullmatch(code)) is None:
        raise ValueError(f"dtype code {_show(code)} is not a numpy type string")
    flags = state[7] if isinstance(state, tuple) and len(state) > 7 else None
    elsize = state[5] if isinstance(state, tuple) and len(state) > 5 else None
    kind, digits = m.group(1), m.group(2)
    if kind == "O" or (type(flags) is int and flags & _HASOBJECT):
        return code, 0, True
    if type(flags) is not int:
        raise ValueError(f"dtype {code!r} has no flags in its state")
    if kind not in _SIZED_KINDS:
        raise ValueError(f"dtype {code!r}: kind {kind!r} has no known item size")
    if type(elsize) is int and elsize > 0:
        return code, elsize, False
    if not digits or int(digits) <= 0:
        raise ValueError(f"dtype {code!r} has no item size")
    return code, int(digits), False


def _show(value: Any) -> str:
    return repr(value)[:60] if isinstance(value, (str, int, tuple, type(None))) else "a value"
