"""Walk a pickle's opcodes without executing anything.

Layer: judging rooms - pure core scanner.  It reads a byte stream and returns data;
nothing in the stream is ever imported, called or unpickled.  A small symbolic stack
machine follows the opcodes of protocols 0-5 far enough to resolve every import
(``GLOBAL``, ``INST``, ``STACK_GLOBAL`` - also through the memo - and the ``EXT*``
registry codes), to hand every string constant to a callback, and to tell whether the
pickled object is a flat ``name -> tensor`` mapping (weights that safetensors could
hold).  Memory stays bounded: big constants are streamed in chunks (``pickle_stream``),
and both the bytes walked and the opcodes counted are capped.  Opcode tables and
symbolic values live in ``pickle_ops``.

Alongside, the walk follows CPython's unpickler closely enough to say where it
would raise (``WalkResult.rejected``) and whether it would first import or call
something (``reached``): bytes it refuses before acting are no pickle a loader
runs; bytes it accepts are a pickle whatever they look like (``sniff``).  With
``strict`` the walk stops at the first of the two.
"""

from __future__ import annotations

import struct
from typing import Any

from ftmanifest.scan.artifacts.joblib_arrays import is_array_wrapper, joblib_array
from ftmanifest.scan.artifacts.pickle_ops import (
    _FIXED,
    _NOARG_PUSH,
    _SIZED,
    BIG,
    CHUNK,
    CONSTANTS,
    HIGHEST_PROTOCOL,
    OPAQUE,
    OPS,
    TENSOR_BUILDERS,
    Import,
    Problem,
    WalkResult,
    _Dict,
    _Obj,
    _pairs,
    _Seq,
    is_flat_tensor_mapping,
    refusal,
    unhashable,
)
from ftmanifest.scan.artifacts.pickle_stream import PickleStream, _Stop

__all__ = [
    "CHUNK",
    "TENSOR_BUILDERS",
    "Import",
    "PickleWalker",
    "Problem",
    "WalkResult",
    "is_flat_tensor_mapping",
]


MAX_PERSISTENT_IDS = 1_000_000  # torch names one per storage
MAX_JOBLIB_NESTING = 8  # object arrays inside object arrays
EXPANSION_CAP = 10_000_000  # items the loaded object has when shared references are unfolded


def _children(node: Any) -> list[Any] | tuple[Any, ...] | None:
    if isinstance(node, (_Seq, _Obj, _Dict)):
        return node.items
    return node if isinstance(node, tuple) else None


def expanded_size(root: Any, cap: int) -> int:
    """Items in ``root`` with every shared reference unfolded, counted up to ``cap + 1``.

    Each container is counted once per reference to it; a container on its own
    path (a cycle) counts as one item there.  Linear in the distinct containers.
    """
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        children = _children(node)
        if children is None:
            continue
        key = id(node)
        if done:
            on_path.discard(key)
            total = 1 + sum(sizes.get(id(c), 1) for c in children)
            sizes[key] = min(total, cap + 1)
        elif key not in sizes and key not in on_path:
            on_path.add(key)
            stack.append((node, True))
            stack.extend((c, False) for c in children if _children(c) is not None)
    return sizes.get(id(root), 1)


class PickleWalker(PickleStream):
    """Walk one pickle from ``stream``, starting at byte ``base`` of it."""

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
            if not all(part.isidentifier() for part in module.split(".")):
                # only a file the attacker already put on sys.path could be found
                self._reject("pickle.bad-argument", f"{opcode} names a module no import finds")
            elif not all(part.isidentifier() for part in name.split(".")):
                # getattr fails right after the import: nothing is called, and the
                # import alone runs only code already installed (text such as
                # "changed\nand longer\n" spells GLOBAL hanged."and longer")
                self._reject("pickle.bad-argument", f"{opcode} names an attribute no getattr finds")
            imp = Import(module, name, self.op_pos, opcode)
            self.res.imports.append(imp)
            self._reach()
            return imp
        if isinstance(module, CONSTANTS) and isinstance(name, CONSTANTS):
            self._reject("pickle.bad-argument", f"{opcode} requires two strings")
        self.res.problems.append(
            Problem(
                "pickle.unresolvable-import",
                f"{opcode} at offset {self.op_pos} imports a name that is not a constant string",
                self.op_pos,
                "unsafe-pickle",
            )
        )
        self._reach()
        return OPAQUE

    # -- the walk -----------------------------------------------------------
    def walk(self) -> WalkResult:
        try:
            self._loop()
        except _Stop:
            pass
        self.res.end = self.pos
        if self.res.stopped and expanded_size(self.res.value, EXPANSION_CAP) > EXPANSION_CAP:
            self.res.problems.append(
                Problem(
                    "pickle.expansion-bomb",
                    f"the object expands to over {EXPANSION_CAP:,} items through shared "
                    "references (memo or DUP): whatever walks it (repr, json, a recursive "
                    "copy) never finishes",
                    self.op_pos,
                    "unsafe-pickle",
                )
            )
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
                self.res.capped = f"more than {self.max_opcodes} opcodes (max_opcodes)"
                raise _Stop
            if self.pos - self.raw_bytes > self.max_bytes:
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
            value = self._number(name)
            if name not in ("GET", "PUT"):
                push(value)
            elif isinstance(value, int):
                return self._fixed("BIN" + name, value)
            elif name == "GET":
                push(OPAQUE)  # a memo index too long to read: any value
            else:
                self._top()
        elif name in ("STRING", "UNICODE"):
            raw = self._long_line(scan=True)
            if raw is None:
                push(BIG)
            else:
                push(self._text_arg(name, raw))
        elif name in ("GLOBAL", "INST"):
            if name == "INST" and not self.meta:
                # _pickle.c looks for the MARK before it imports (pickle.py after)
                self._reject("pickle.mark-missing", "INST needs a MARK that is not there")
            lines = self._line(name=name), self._line(name=name)
            try:
                module, attr = (line.decode("utf-8") for line in lines)
            except UnicodeDecodeError:
                self._reject("pickle.bad-argument", f"{name} argument is not UTF-8")
                module, attr = (line.decode("utf-8", "replace") for line in lines)
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
                self.stack.append(_Seq(items, name.lower()))
            elif name == "DICT":
                self._check_pairs(name, items, None)
                self.stack.append(_Dict(list(_pairs(items))))
            elif name == "OBJ":
                if not items:
                    self._reject("pickle.stack-underflow", "OBJ without a class")
                self._call(name, items[0] if items else OPAQUE, tuple(items[1:]))
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
                    self._check_pairs(name, new, self._top())
                    new = list(_pairs(new))
            target = self._top()
            if name == "SETITEM":
                self._check_pairs(name, list(new[0]), target)
            why = refusal(name, target)
            if why:
                self._reject("pickle.bad-argument", why)
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
            args = self._pop()
            func = self._pop()
            self._call(name, func, args)
            push(_Obj(func, args=args))
        elif name == "BUILD":
            target = self.stack[-2] if len(self.stack) > 1 else OPAQUE
            state = self._pop()
            why = refusal(name, target, state)
            if why:
                self._reject("pickle.bad-argument", why)
            if isinstance(target, _Obj):
                target.state = state
                if is_array_wrapper(target):
                    self.res.joblib_arrays.append(self.op_pos)
                    if self.joblib:
                        self._joblib_array(state)
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
            if len(self.res.persistent_ids) < MAX_PERSISTENT_IDS:
                self.res.persistent_ids.append(self._pop())  # torch: what storages it reads
            else:
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

    def _joblib_array(self, state: Any) -> None:
        """Read past the array ``joblib.load`` reads after a wrapper's BUILD
        (``NumpyArrayWrapper.read_array``): a pickle of its own when the dtype holds
        objects, else a padding byte, that many bytes, and the array's raw bytes."""
        if self.frame_end is not None and self.pos < self.frame_end:
            self._fail("pickle.joblib-array", "a joblib array starts inside a pickle frame, "
                       "where joblib never writes one")  # fmt: skip
        self.frame_end = None
        try:
            array = joblib_array(state)
        except ValueError as exc:
            self._fail("pickle.joblib-array", f"joblib array after BUILD cannot be read: {exc}")
        if array.objects:
            self._joblib_objects()
            return
        if array.padded:
            (pad,) = self._raw(1)
            self._raw(pad)
        self._raw(array.nbytes)

    def _raw(self, n: int) -> bytes:
        """``n`` array bytes read past (the first 64 kept); the stream must hold them."""
        kept = b""
        while n > 0:
            data = self.f.read(min(n, CHUNK))
            if not data:
                self._fail("pickle.truncated", "stream ends inside a joblib array's bytes")
            kept = kept or data[:65536]
            self.pos += len(data)
            self.raw_bytes += len(data)
            n -= len(data)
        return kept

    def _joblib_objects(self) -> None:
        """An object array: joblib pickles it as a pickle of its own, read by a fresh
        unpickler on the same file; its imports and defects are this walk's."""
        if self.nested >= MAX_JOBLIB_NESTING:
            self._fail("pickle.joblib-array", "joblib object arrays nested too deep")
        inner = type(self)(self.f, on_string=self.on_string, max_bytes=self.max_bytes + self.pos,
                           max_opcodes=max(self.max_opcodes - self.res.opcodes, 0),
                           base=self.pos, joblib=True)  # fmt: skip
        inner.nested = self.nested + 1
        res = inner.walk()
        self.pos, self.raw_bytes = inner.pos, self.raw_bytes + (inner.pos - self.op_pos)
        self.res.opcodes += res.opcodes
        self.res.imports += res.imports
        self.res.problems += res.problems
        self.res.joblib_arrays += res.joblib_arrays
        if res.reached is not None:
            self._reach()
        if not res.stopped:
            self.res.capped = self.res.capped or res.capped
            if res.rejected is not None and self.res.rejected is None:
                self.res.rejected = res.rejected
            raise _Stop

    def _call(self, name: str, func: Any, args: Any) -> None:
        why = refusal(name, func, args)
        if why:
            self._reject("pickle.bad-argument", why)
        elif not isinstance(func, (Import, _Obj)):
            self._reach()  # something a persistent_load or the memo handed over

    def _check_pairs(self, name: str, items: list[Any], target: Any) -> None:
        if len(items) % 2:
            self._reject("pickle.bad-argument", f"odd number of items for {name}")
        if (target is None or isinstance(target, _Dict)) and any(unhashable(k) for k in items[::2]):
            self._reject("pickle.bad-argument", f"{name} with an unhashable key")

    def _fixed(self, name: str, arg: int) -> bool:
        if name == "PROTO":
            if arg > HIGHEST_PROTOCOL:
                self._fail("pickle.bad-protocol", f"unknown pickle protocol {arg}")
        elif name == "FRAME":
            self.frame(arg)
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
            self._reach()
        else:  # BININT, BININT1, BININT2, BINFLOAT
            self.stack.append(arg)
        return False
