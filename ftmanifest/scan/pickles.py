"""Walk a pickle's opcodes without executing anything.

Layer: pure core scanner.  It reads a byte stream and returns data; nothing in
the stream is ever imported, called or unpickled.  A small symbolic stack
machine follows the opcodes of protocols 0-5 far enough to resolve every import
(``GLOBAL``, ``INST``, ``STACK_GLOBAL`` - also through the memo - and the
``EXT*`` registry codes), to hand every string constant to a callback, and to
tell whether the pickled object is a flat ``name -> tensor`` mapping (weights
that safetensors could hold).  Memory stays bounded: big constants are streamed
in chunks, and both the bytes walked and the opcodes counted are capped.
"""

from __future__ import annotations

import codecs
import pickletools
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any, NoReturn

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


@dataclass(eq=False)
class _Dict:
    items: list[Any] = field(default_factory=list)


@dataclass(eq=False)
class _Seq:
    items: list[Any] = field(default_factory=list)


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

    @property
    def fatal(self) -> bool:
        return not self.stopped


class _Stop(Exception):
    pass


class PickleWalker:
    """Walk one pickle from ``stream``, starting at byte ``base`` of it."""

    def __init__(
        self,
        stream: IO[bytes],
        *,
        on_string: StringSink | None = None,
        max_bytes: int = 1 << 31,
        max_opcodes: int = 2_000_000,
        base: int = 0,
    ) -> None:
        self.f = stream
        self.on_string = on_string
        self.max_bytes = max_bytes
        self.max_opcodes = max_opcodes
        self.pos = base
        self.res = WalkResult()
        self.stack: list[Any] = []
        self.meta: list[list[Any]] = []
        self.memo: dict[int, Any] = {}
        self.op_pos = base
        self._noted: set[str] = set()

    # -- reading ------------------------------------------------------------
    def _read(self, n: int) -> bytes:
        data = self.f.read(n)
        self.pos += len(data)
        if len(data) < n:
            self._fail("pickle.truncated", f"stream ends inside an opcode (needed {n} bytes)")
        return data

    def _line(self, limit: int = LINE_LIMIT) -> bytes:
        line = self.f.readline(limit + 1)
        self.pos += len(line)
        if not line.endswith(b"\n"):
            if len(line) <= limit:
                self._fail("pickle.truncated", "stream ends inside a text opcode")
            self._fail("pickle.line-too-long", f"text argument longer than {limit} bytes")
        return line[:-1]

    def _long_line(self, scan: bool = False) -> bytes | None:
        """A protocol-0 argument line: returned if short, else streamed to the newline.

        With ``scan``, the chunks of a long line go to the string sink as they pass.
        """
        line = self.f.readline(CHUNK + 1)
        self.pos += len(line)
        if line.endswith(b"\n"):
            return line[:-1]
        if len(line) <= CHUNK:
            self._fail("pickle.truncated", "stream ends inside a text opcode")
        dec = codecs.getincrementaldecoder("raw-unicode-escape")("replace")
        while True:
            if scan:
                self._emit(dec.decode(line.rstrip(b"\n")), force=True)
            if line.endswith(b"\n"):
                return None
            self._check_bytes()
            line = self.f.readline(CHUNK)
            self.pos += len(line)
            if not line:
                self._fail("pickle.truncated", "stream ends inside a text opcode")

    def _check_bytes(self) -> None:
        if self.pos > self.max_bytes:
            self.res.capped = f"pickle longer than {self.max_bytes} bytes"
            raise _Stop

    def _fail(self, rule: str, message: str) -> NoReturn:
        self.res.problems.append(Problem(rule, message, self.op_pos))
        raise _Stop

    def _note(self, rule: str, message: str, kind: str = "malformed") -> None:
        if rule not in self._noted:
            self._noted.add(rule)
            self.res.problems.append(Problem(rule, message, self.op_pos, kind))

    def _const(self, n: int, mode: str) -> Any:
        """A length-prefixed constant: kept if small, else streamed in chunks.

        ``mode``: ``utf8`` (str), ``latin1`` (protocol-2 byte strings), ``bytes``,
        or ``skip`` (long integers: nothing to read in them).
        """
        if n < 0:
            self._fail("pickle.negative-length", "negative length for a constant")
        if n <= CHUNK:
            raw = self._read(n)
            if mode == "skip":
                return OPAQUE
            if mode == "bytes":
                self._emit(raw)
                return raw
            try:
                codec = ("utf-8", "surrogatepass") if mode == "utf8" else ("latin-1", "strict")
                value = raw.decode(*codec)
            except UnicodeDecodeError:
                self._fail("pickle.bad-argument", "string constant is not valid UTF-8")
            self._emit(value)
            return value
        errors = "surrogatepass" if mode == "utf8" else "strict"
        dec = codecs.getincrementaldecoder("utf-8")(errors)
        left, scan = n, mode != "skip"
        while left:
            self._check_bytes()
            raw = self._read(min(left, CHUNK))
            left -= len(raw)
            if scan:
                try:
                    self._emit(dec.decode(raw, final=not left), force=True)
                except UnicodeDecodeError:
                    scan = False  # binary payload (tensor data), nothing to read
        return BIG

    def _emit(self, value: Any, force: bool = False) -> None:
        if self.on_string is None:
            return
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                return
        if isinstance(value, str) and (force or len(value) >= 6):
            self.on_string(self.op_pos, value)

    # -- stack helpers ------------------------------------------------------
    def _pop(self) -> Any:
        if self.stack:
            return self.stack.pop()
        self._note("pickle.stack-underflow", "an opcode pops from an empty stack")
        return OPAQUE

    def _top(self) -> Any:
        if self.stack:
            return self.stack[-1]
        self._note("pickle.stack-underflow", "an opcode reads an empty stack")
        return OPAQUE

    def _pop_mark(self) -> list[Any]:
        items = self.stack
        if self.meta:
            self.stack = self.meta.pop()
        else:
            self._note("pickle.mark-missing", "an opcode needs a MARK that is not there")
            self.stack = []
        return items

    def _import(self, module: Any, name: Any, opcode: str) -> Any:
        if isinstance(module, str) and isinstance(name, str):
            imp = Import(module, name, self.op_pos, opcode)
            self.res.imports.append(imp)
            return imp
        self.res.problems.append(
            Problem(
                "pickle.unresolvable-import",
                f"{opcode} at offset {self.op_pos} imports a name that is not a constant string",
                self.op_pos,
                "unsafe-pickle",
            )
        )
        return OPAQUE

    # -- the walk -----------------------------------------------------------
    def walk(self) -> WalkResult:
        try:
            self._loop()
        except _Stop:
            pass
        self.res.end = self.pos
        return self.res

    def _loop(self) -> None:
        while True:
            self.op_pos = self.pos
            code = self.f.read(1)
            self.pos += len(code)
            if not code:
                self._fail("pickle.truncated", "stream ends before STOP")
            self.res.opcodes += 1
            if self.res.opcodes > self.max_opcodes:
                self.res.capped = f"more than {self.max_opcodes} opcodes"
                raise _Stop
            if self.pos > self.max_bytes:
                self._check_bytes()
            op = OPS.get(code[0])
            if op is None:
                self._fail("pickle.invalid-opcode", f"byte {code[0]:#04x} is not a pickle opcode")
            if self._step(op.name):
                return

    def _step(self, name: str) -> bool:  # noqa: C901 - one branch per opcode family
        push = self.stack.append
        if name in _FIXED:
            fmt = _FIXED[name]
            (arg,) = struct.unpack(fmt, self._read(struct.calcsize(fmt)))
            return self._fixed(name, arg)
        if name in _SIZED:
            fmt, mode = _SIZED[name]
            (n,) = struct.unpack(fmt, self._read(struct.calcsize(fmt)))
            value = self._const(n, mode)
            push(bytearray(value) if name == "BYTEARRAY8" and isinstance(value, bytes) else value)
        elif name in ("INT", "LONG", "FLOAT", "GET", "PUT"):
            line = self._line()
            if name in ("GET", "PUT"):
                try:
                    idx = int(line)
                except ValueError:
                    self._fail("pickle.bad-argument", f"{name} argument is not a number")
                return self._fixed("BIN" + name, idx)
            push(OPAQUE)
        elif name in ("STRING", "UNICODE"):
            raw = self._long_line(scan=True)
            if raw is None:
                push(BIG)
            else:
                push(self._text_arg(name, raw))
        elif name in ("GLOBAL", "INST"):
            module = self._line().decode("utf-8", "replace")
            attr = self._line().decode("utf-8", "replace")
            imp = self._import(module, attr, name)
            if name == "INST":
                self._pop_mark()
                imp = _Obj(imp)
            self.stack.append(imp)
        elif name == "PERSID":
            self._long_line()
            push(OPAQUE)
        elif name == "STACK_GLOBAL":
            attr, module = self._pop(), self._pop()
            push(self._import(module, attr, name))
        elif name in _NOARG_PUSH:
            push(_NOARG_PUSH[name]())
        elif name == "MARK":
            self.meta.append(self.stack)
            self.stack = []
        elif name in ("TUPLE", "LIST", "DICT", "FROZENSET", "POP_MARK", "OBJ"):
            items = self._pop_mark()
            if name == "TUPLE":
                self.stack.append(tuple(items))
            elif name in ("LIST", "FROZENSET"):
                self.stack.append(_Seq(items))
            elif name == "DICT":
                self.stack.append(_Dict(list(_pairs(items))))
            elif name == "OBJ":
                self.stack.append(_Obj(items[0] if items else OPAQUE))
        elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
            n = int(name[-1])
            push(tuple(reversed([self._pop() for _ in range(n)])))
        elif name in ("APPEND", "SETITEM", "APPENDS", "SETITEMS", "ADDITEMS"):
            if name == "APPEND":
                new = [self._pop()]
            elif name == "SETITEM":
                v, k = self._pop(), self._pop()
                new = [(k, v)]
            else:
                new = self._pop_mark()
                if name == "SETITEMS":
                    new = list(_pairs(new))
            target = self._top()
            if isinstance(target, (_Dict, _Seq, _Obj)):
                target.items.extend(new)
        elif name == "POP":
            if self.stack:
                self.stack.pop()
            else:
                self._pop_mark()
        elif name == "DUP":
            push(self._top())
        elif name in ("REDUCE", "NEWOBJ", "NEWOBJ_EX"):
            if name == "NEWOBJ_EX":
                self._pop()
            self._pop()
            push(_Obj(self._pop()))
        elif name == "BUILD":
            self._pop()
            if isinstance(self._top(), Import):
                self.res.problems.append(
                    Problem(
                        "pickle.build-on-global",
                        f"BUILD at offset {self.op_pos} sets attributes on an imported object",
                        self.op_pos,
                        "unsafe-pickle",
                    )
                )
        elif name == "BINPERSID":
            self._pop()
            push(OPAQUE)
        elif name == "MEMOIZE":
            self.memo[len(self.memo)] = self._top()
        elif name in ("NEXT_BUFFER", "READONLY_BUFFER"):
            if name == "NEXT_BUFFER":
                push(OPAQUE)
        elif name == "STOP":
            self.res.value = self._pop()
            self.res.stopped = True
            return True
        else:  # pragma: no cover - every opcode pickletools knows is handled above
            self._fail("pickle.invalid-opcode", f"unhandled opcode {name}")
        return False

    def _fixed(self, name: str, arg: int) -> bool:
        if name == "PROTO":
            if arg > HIGHEST_PROTOCOL:
                self._fail("pickle.bad-protocol", f"unknown pickle protocol {arg}")
        elif name == "FRAME":
            pass
        elif name in ("BINGET", "LONG_BINGET"):
            if arg not in self.memo:
                self._note("pickle.memo-missing", "GET of a memo slot never written")
            self.stack.append(self.memo.get(arg, OPAQUE))
        elif name in ("BINPUT", "LONG_BINPUT"):
            if arg < 0:
                self._fail("pickle.bad-argument", "negative memo index")
            self.memo[arg] = self._top()
        elif name in ("EXT1", "EXT2", "EXT4"):
            self.res.problems.append(
                Problem(
                    "pickle.extension-import",
                    f"{name} at offset {self.op_pos} imports registry extension code {arg}",
                    self.op_pos,
                    "unsafe-pickle",
                )
            )
            self.stack.append(OPAQUE)
        else:
            self.stack.append(OPAQUE)
        return False

    def _text_arg(self, name: str, raw: bytes) -> Any:
        try:
            if name == "UNICODE":
                value: str = raw.decode("raw-unicode-escape")
            else:
                if len(raw) < 2 or raw[:1] not in b"'\"" or raw[-1:] != raw[:1]:
                    self._fail("pickle.bad-argument", "STRING argument is not quoted")
                value = codecs.escape_decode(raw[1:-1])[0].decode("latin-1")
        except (UnicodeDecodeError, ValueError):
            self._fail("pickle.bad-argument", f"{name} argument cannot be decoded")
        self._emit(value)
        return value


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
    "LONG1": ("<B", "skip"),
    "LONG4": ("<i", "skip"),
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
    "NONE": lambda: OPAQUE,
    "NEWTRUE": lambda: OPAQUE,
    "NEWFALSE": lambda: OPAQUE,
    "EMPTY_LIST": _Seq,
    "EMPTY_SET": _Seq,
    "EMPTY_TUPLE": tuple,
    "EMPTY_DICT": _Dict,
}


def _pairs(items: list[Any]) -> list[tuple[Any, Any]]:
    return list(zip(items[::2], items[1::2], strict=False))


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
