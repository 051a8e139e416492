"""Pickle opcode tables and the symbolic values the walker builds.

Layer: judging rooms - pure core scanner (data only).  The walker in ``pickles`` never
builds real objects: constants stay strings/bytes/numbers/``None``, containers are
``_Seq``/``_Dict``/tuples, calls become ``_Obj``, imports ``Import``, and everything
else is ``OPAQUE``.  ``is_flat_tensor_mapping`` tells from those values whether a pickle
holds only ``name -> tensor`` weights; ``refusal`` tells whether CPython's unpickler
would raise on an opcode applied to constants (so the loader stops there, before
anything after it runs).
"""

from __future__ import annotations

import pickletools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

OPS: dict[int, pickletools.OpcodeInfo] = {
    op.code.encode("latin-1")[0]: op for op in pickletools.opcodes
}
CHUNK = 1 << 20  # constants longer than this are streamed, never held whole
LINE_LIMIT = 1 << 16  # protocol-0 numbers and import names are never this long
HIGHEST_PROTOCOL = 5
TENSOR_BUILDERS = frozenset(
    {
        "torch._utils._rebuild_tensor",
        "torch._utils._rebuild_tensor_v2",
        "torch._utils._rebuild_tensor_v3",
        "torch._utils._rebuild_parameter",
        "torch._utils._rebuild_parameter_with_state",
        "torch._utils._rebuild_qtensor",
        "torch._tensor._rebuild_from_type_v2",
    }
)
StringSink = Callable[[int, str], None]


class _Opaque:
    """A value the walker does not need to know (numbers, persistent ids...)."""


class _Mark:
    pass


class _Big:
    """Placeholder for a constant too long to keep."""


OPAQUE, BIG = _Opaque(), _Big()


@dataclass(eq=False)
class Import:
    module: str
    name: str
    offset: int
    opcode: str

    @property
    def dotted(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass(eq=False)
class _Obj:
    """Result of calling something: REDUCE, NEWOBJ, OBJ, INST."""

    func: Any
    items: list[Any] = field(default_factory=list)
    args: Any = None  # what it was called with (REDUCE, NEWOBJ)
    state: Any = None  # what BUILD set on it


@dataclass(eq=False)
class _Dict:
    items: list[Any] = field(default_factory=list)


@dataclass(eq=False)
class _Seq:
    items: list[Any] = field(default_factory=list)
    kind: str = "list"  # or "set", "frozenset"


@dataclass
class Problem:
    rule: str
    message: str
    offset: int
    kind: str = "malformed"


@dataclass
class WalkResult:
    imports: list[Import] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    opcodes: int = 0
    end: int = 0
    stopped: bool = False  # reached STOP
    capped: str | None = None  # why the walk was cut short by a cap
    value: Any = None  # symbolic top-level object at STOP
    # Where CPython's unpickler would raise (the loader stops there) ...
    rejected: Problem | None = None
    # ... and the first import or call it would reach before that.
    reached: int | None = None
    # BINPERSID arguments: torch's ('storage', type, key, location, numel) tuples
    persistent_ids: list[Any] = field(default_factory=list)
    # offsets where a joblib ``NumpyArrayWrapper`` was built: ``joblib.load`` reads
    # the array's bytes there, which a plain unpickler would read as opcodes
    joblib_arrays: list[int] = field(default_factory=list)

    @property
    def fatal(self) -> bool:
        return not self.stopped

    @property
    def loader_acts(self) -> bool:
        """The real unpickler reaches STOP, an import or a call, or a cap left it open.

        False only when it would raise before doing anything: such bytes are no
        pickle any loader runs.
        """
        return self.reached is not None or self.rejected is None


_FIXED = {
    "BININT": "<i",
    "BININT1": "<B",
    "BININT2": "<H",
    "BINFLOAT": ">d",
    "BINGET": "<B",
    "LONG_BINGET": "<I",
    "BINPUT": "<B",
    "LONG_BINPUT": "<I",
    "EXT1": "<B",
    "EXT2": "<H",
    "EXT4": "<i",
    "PROTO": "<B",
    "FRAME": "<Q",
}
_SIZED: dict[str, tuple[str, str]] = {
    "LONG1": ("<B", "long"),
    "LONG4": ("<i", "long"),
    "BINSTRING": ("<i", "latin1"),
    "SHORT_BINSTRING": ("<B", "latin1"),
    "BINBYTES": ("<I", "bytes"),
    "SHORT_BINBYTES": ("<B", "bytes"),
    "BINBYTES8": ("<Q", "bytes"),
    "BYTEARRAY8": ("<Q", "bytes"),
    "SHORT_BINUNICODE": ("<B", "utf8"),
    "BINUNICODE": ("<I", "utf8"),
    "BINUNICODE8": ("<Q", "utf8"),
}
_NOARG_PUSH: dict[str, Callable[[], Any]] = {
    "NONE": lambda: None,
    "NEWTRUE": lambda: True,
    "NEWFALSE": lambda: False,
    "EMPTY_LIST": _Seq,
    "EMPTY_SET": lambda: _Seq(kind="set"),
    "EMPTY_TUPLE": tuple,
    "EMPTY_DICT": _Dict,
}


def _pairs(items: list[Any]) -> list[tuple[Any, Any]]:
    return list(zip(items[::2], items[1::2], strict=False))


CONSTANTS = (str, bytes, bytearray, int, float, tuple, type(None), _Dict, _Seq)


def kind_of(value: Any) -> str:
    if isinstance(value, _Seq):
        return value.kind
    return "dict" if isinstance(value, _Dict) else type(value).__name__


def unhashable(value: Any) -> bool:
    return isinstance(value, (_Dict, bytearray)) or (
        isinstance(value, _Seq) and value.kind != "frozenset"
    )


def refusal(op: str, target: Any, arg: Any = None) -> str | None:
    """Why CPython's unpickler raises on ``op`` applied to ``target`` (None: it may not).

    Only constants are judged; anything a call or import made may accept anything.
    ``arg`` is BUILD's state or REDUCE/NEWOBJ's argument tuple.
    """
    if op in ("REDUCE", "NEWOBJ", "NEWOBJ_EX") and isinstance(arg, CONSTANTS):
        if not isinstance(arg, tuple):
            return f"{op} arguments are a {kind_of(arg)}, not a tuple"
    if not isinstance(target, CONSTANTS):
        return None
    if op in ("APPEND", "APPENDS"):
        ok = isinstance(target, bytearray) or (isinstance(target, _Seq) and target.kind == "list")
    elif op in ("SETITEM", "SETITEMS"):
        ok = isinstance(target, (_Dict, bytearray)) or (
            isinstance(target, _Seq) and target.kind == "list"
        )
    elif op == "ADDITEMS":
        ok = isinstance(target, _Seq) and target.kind == "set"
    elif op == "BUILD":
        state, slots = arg if isinstance(arg, tuple) and len(arg) == 2 else (arg, None)
        ok = not isinstance(state, CONSTANTS) or (
            state is None and (slots is None or (isinstance(slots, _Dict) and not slots.items))
        )
    else:  # a call: constants are not callable
        ok = op not in ("REDUCE", "NEWOBJ", "NEWOBJ_EX", "OBJ")
    return None if ok else f"{op} on a {kind_of(target)}"


def is_flat_tensor_mapping(value: Any) -> bool:
    """True when the pickled object is ``{str: tensor}`` and nothing else."""
    if isinstance(value, _Obj) and isinstance(value.func, Import):
        if value.func.dotted != "collections.OrderedDict":
            return False
    elif not isinstance(value, _Dict):
        return False
    pairs = value.items
    if not pairs or not all(isinstance(p, tuple) and len(p) == 2 for p in pairs):
        return False
    return all(isinstance(k, str) and _is_tensor(v) for k, v in pairs)


def _is_tensor(value: Any) -> bool:
    return (
        isinstance(value, _Obj)
        and isinstance(value.func, Import)
        and value.func.dotted in TENSOR_BUILDERS
    )
