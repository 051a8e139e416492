"""Pickles in a row: what a loader that reads on after STOP would meet.

Layer: judging rooms - pure core scanner (reads a byte stream, returns data).
``pickle.load`` stops at STOP, but a legacy ``torch.load`` reads five pickles in a row
and any loader may call ``load`` again; so the bytes after STOP are walked too - as
another pickle when CPython's unpickler would act on them, else reported as trailing
data.  ``sniff_pickle`` is the same judgement on a file's first bytes: a pickle is
whatever the real unpickler accepts, never what looks printable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import IO

from ftmanifest.scan.artifacts.pickle_ops import Problem, StringSink, WalkResult
from ftmanifest.scan.artifacts.pickles import PickleWalker

# torch/serialization.py MAGIC_NUMBER: the value of a legacy file's first pickle
TORCH_MAGIC = 0x1950A86A20F9469CFC6C
MAX_PICKLES = 1024  # pickles in a row before the walk gives up (a not-scanned error)
SNIFF_BYTES = 256 << 20  # a prefix the unpickler still accepts this far is a pickle
SNIFF_OPCODES = 200_000


@dataclass
class PickleRun:
    """Consecutive pickles from one stream, and what follows the last of them."""

    walks: list[WalkResult] = field(default_factory=list)
    end: int = 0  # offset after the last walked pickle
    trailing: int | None = None  # offset of bytes after it that no unpickler runs
    trailing_problem: Problem | None = None  # why the unpickler refuses them
    capped: str | None = None  # more than MAX_PICKLES pickles
    # a frame was straddled: the pickles as a reader that drops the frame's rest
    # sees them (``PickleStream.drop_frames``); judged as well as ``walks``
    dropping: list[WalkResult] = field(default_factory=list)
    # a joblib array wrapper was built: the pickles as ``joblib.load`` reads them,
    # past each array's bytes (``PickleStream.joblib``); judged as well as ``walks``
    joblib: list[WalkResult] = field(default_factory=list)

    @property
    def first_array(self) -> int | None:
        """Where the plain reading first meets a joblib array's bytes."""
        return min((a for w in self.walks for a in w.joblib_arrays), default=None)


STRADDLE = "pickle.frame-straddle"


def _straddled(res: WalkResult) -> bool:
    return any(p.rule == STRADDLE for p in res.problems)


def _rewind(stream: IO[bytes], start: int | None) -> bool:
    if start is None:
        return False
    try:
        stream.seek(start)
    except (OSError, ValueError):
        return False
    return True


def _tell(stream: IO[bytes]) -> int | None:
    try:
        return stream.tell() if stream.seekable() else None
    except (OSError, ValueError, AttributeError):
        return None


def sniff_pickle(stream: IO[bytes], *, acting_only: bool = False) -> str | None:
    """``"pickle"``, ``"torch-legacy"`` or None for the bytes from the stream's position.

    A pickle when CPython's unpickler would import or call something, reach
    STOP, or still accept the prefix after ``SNIFF_BYTES``/``SNIFF_OPCODES``
    (a capped walk is never taken for text).  Legacy torch when the first
    pickle's value is torch's magic number, however it is spelled.  With
    ``acting_only`` (bytes that have another format's magic) only an import or
    call counts: a pickle of a constant does nothing when loaded.
    """
    start = _tell(stream)
    res = PickleWalker(stream, max_bytes=SNIFF_BYTES, max_opcodes=SNIFF_OPCODES, strict=True).walk()
    if _straddled(res) and _rewind(stream, start):  # either reading may be the one that acts
        other = PickleWalker(
            stream, max_bytes=SNIFF_BYTES, max_opcodes=SNIFF_OPCODES, strict=True, drop_frames=True
        ).walk()
        if other.reached is not None or not res.loader_acts:
            res = other
    if not res.loader_acts or (acting_only and res.reached is None):
        return None
    magic = res.stopped and type(res.value) is int and res.value == TORCH_MAGIC
    return "torch-legacy" if magic else "pickle"


def walk_pickles(
    stream: IO[bytes],
    *,
    on_string: StringSink | None = None,
    max_bytes: int = 2 << 30,
    max_opcodes: int = 2_000_000,
    count: int | None = None,
    base: int = 0,
    joblib: bool = False,
) -> PickleRun:
    """Walk pickle after pickle from ``base`` until the stream ends.

    The first pickle is always walked (the caller decided it is one).  After
    each STOP the next bytes are walked as a pickle when the real unpickler
    would act on them; otherwise they are ``trailing``.  ``count`` stops after
    that many pickles (a legacy torch file: five, then raw storage bytes,
    reported as ``trailing`` for the caller to judge).  ``max_bytes`` is an
    offset, ``max_opcodes`` a total over all pickles.
    """
    start = _tell(stream)
    run = _walk_run(
        stream, on_string, max_bytes, max_opcodes, count, base, drop_frames=False, joblib=joblib
    )
    if any(_straddled(w) for w in run.walks) and _rewind(stream, start):
        run.dropping = _walk_run(
            stream, None, max_bytes, max_opcodes, count, base, drop_frames=True, joblib=joblib
        ).walks
    return run


def _walk_run(
    stream: IO[bytes],
    on_string: StringSink | None,
    max_bytes: int,
    max_opcodes: int,
    count: int | None,
    base: int,
    *,
    drop_frames: bool,
    joblib: bool = False,
) -> PickleRun:
    run = PickleRun(end=base)
    pos, used = base, 0
    while True:
        if count is not None and len(run.walks) >= count:
            if stream.read(1):
                run.trailing = pos
            break
        if len(run.walks) >= MAX_PICKLES:
            if stream.read(1):
                run.capped = f"more than {MAX_PICKLES} pickles in a row"
            break
        res = PickleWalker(
            stream,
            on_string=on_string,
            max_bytes=max_bytes,
            max_opcodes=max(max_opcodes - used, 0),
            base=pos,
            drop_frames=drop_frames,
            joblib=joblib,
        ).walk()
        used += res.opcodes
        if run.walks and res.opcodes == 0 and res.end == pos:
            break  # the stream ended right after STOP
        if run.walks and not res.loader_acts:
            run.trailing, run.trailing_problem = pos, res.rejected
            break
        run.walks.append(res)
        pos = run.end = res.end
        if not res.stopped:
            break
    return run
