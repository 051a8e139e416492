"""Per-record signatures of a split, computed on every core ("both cores used").

Layer: judging rooms - data (edge: reads the split; the work per record is pure).  The
leakage check spends most of its time on each record alone: decoding and parsing the
line, picking and normalising its text, hashing it, cutting it into shingles and
computing its MinHash (measured on 100,000 80-word chat records: parsing 0.7 s, text 0.2
s, normalising 1.0 s, shingles 1.1-1.4 s, MinHash 0.3 s; the LSH queries and inserts
that need the whole index take 0.25 s).  So the parent reads the file in chunks of
lines, worker processes sign them, and the parent consumes the results in file order,
keeping the index and the verdict: the result is the same for any number of workers.

Memory is bounded: the parent never reads more than ``IN_FLIGHT`` chunks per
worker ahead of what it has consumed (about a MiB of lines each).  JSONL and
text are split at line boundaries by the parent (``line_blocks``, with the
reader's per-line bound) and decoded and parsed in the workers exactly as
``recordio`` does, line numbers included; CSV/TSV (a quoted cell may span
lines), JSON and Parquet are read by ``recordio.iter_records`` in the parent,
and only their text goes to the workers.  A chunk that fails in a worker is
signed again in the parent, so an unreadable record is the reader's own error,
naming the file and line, whatever the number of workers.

Workers are forked where the system can (Linux), all at once on the first
chunk of each split (Python launches every ``fork`` worker of a pool up front),
with collection frozen so they share what the parent holds then (the smaller
splits' indexes, read first), so they start in milliseconds with little memory
and need no importable ``__main__`` (``spawn`` re-runs the caller's script,
which breaks a script without a ``__main__`` guard); elsewhere they are
spawned.  The workers run only this module's pure code, so a fork beside the
gloo threads of a torchrun rank is safe.  ``jobs`` 1 signs in the parent with
the same code; a worker that dies (killed, out of memory) is an error naming
``--jobs``, not a traceback.

Across the ranks of a torchrun job (``RankSigner``), every rank cuts
each split into the same chunks and signs those whose index modulo the world
size is its rank; rank 0 gathers a round of chunks at a time and consumes them
in file order, so its report is the single-process one.  The signatures cross
as bytes of one fixed layout (``sigpack``), checked on receipt, never as
pickles: a rank cannot run code on another, and a payload that does not fit
is a refusal naming the rank that sent it.
"""

from __future__ import annotations

import hashlib
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from ftmanifest.counts import format_of, open_regular
from ftmanifest.data import sigpack
from ftmanifest.data.shards import Marks
from ftmanifest.data.text import NUM_PERM, SEED, normalise, shingle_list, task_text
from ftmanifest.data.walk import RecordTexts
from ftmanifest.errors import EXIT_BUG, FtManifestError, WorkerDiedError
from ftmanifest.progress import ProgressSink
from ftmanifest.recordio import (
    DEFAULT_LIMITS,
    RecordReadError,
    decode_line,
    fail,
    iter_records,
    line_blocks,
    loads,
)
from ftmanifest.wire import Malformed, bad_answer

CHUNK_BYTES = 1 << 20
CHUNK_RECORDS = 4096
BLOCK_BYTES = 1 << 20  # read at once, then split into lines
IN_FLIGHT = 3  # chunks per worker read ahead of the one being consumed
SMALL = 8 << 20  # inputs under this many bytes in all are signed in the parent by default
LINE_KINDS = frozenset({"jsonl", "ndjson", "text", "txt"})

Signature = tuple[int, int, bytes | None, Any]
"""(record number, line it starts on, 16-byte hash of its normalised text, its
``RMinHash``); hash and MinHash are None when the text is empty."""


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def default_jobs(paths: Sequence[Path]) -> int:
    """Every core, unless the inputs are small enough that starting workers costs more."""
    total = 0
    for p in paths:
        try:
            total += p.stat().st_size
        except OSError:
            pass  # the reader reports it
    return 1 if total < SMALL else cores()


def digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _sign_texts(texts: list[str]) -> list[tuple[bytes | None, Any]]:
    from rensa import RMinHash

    out: list[tuple[bytes | None, Any]] = []
    for raw in texts:
        text = normalise(raw)
        if not text:
            out.append((None, None))
            continue
        m = RMinHash(num_perm=NUM_PERM, seed=SEED)
        m.update(shingle_list(text))
        out.append((digest(text), m))
    return out


@dataclass(frozen=True)
class _Lines:
    """JSONL or text lines from ``first`` on, as read (with their line ends)."""

    path: str
    kind: str
    fields: tuple[str, ...]
    first: int
    raws: list[bytes]


@dataclass(frozen=True)
class _Texts:
    """Records already read by the parent: (number, line, text)."""

    items: list[tuple[int, int, str]]


@dataclass(frozen=True)
class _Batch:
    """The chunks of several small shards, signed as one job (a folder of a million
    one-line shards is a thousand jobs, not a million)."""

    jobs: tuple[_Lines | _Texts, ...]


Job = _Lines | _Texts | _Batch


Extra = Callable[[RecordTexts], Any]
"""What the signing pass also computes from one parsed JSONL record: called with its
``RecordTexts`` (its value and fields, its task text normalised and cut into shingles,
so the record is parsed, walked and each field normalised once); None when it has
nothing to say."""
Tally = Callable[[list[Any], tuple[str, ...], list[int]], Any]
"""What the signing pass also sums up over the parsed records of one chunk of lines
(their values, the text fields and each record's ``RecordTexts.whole_length``), merged
by the caller in file order."""
_EXTRA: Extra | None = None  # set by ``Workers`` before its processes fork
_TALLY: Tally | None = None
Signed = tuple[list[tuple[int, int, bytes | None, Any]], list[tuple[int, Any]], list[Any]]
"""A chunk's signatures, the ``Extra`` results that are not None by position, and the
``Tally`` of each of its chunks of lines."""


def _sign(job: Job) -> list[tuple[int, int, bytes | None, Any]]:
    """Signatures of one chunk; for ``_Lines``, numbers count from 1 within the chunk
    (a folder's records are numbered by the reader that consumes them)."""
    return _sign_full(job)[0]


def _sign_full(job: Job) -> Signed:
    if isinstance(job, _Batch):
        sigs: list[tuple[int, int, bytes | None, Any]] = []
        extras: list[tuple[int, Any]] = []
        parts: list[Any] = []
        for one in job.jobs:
            some, more, tallied = _sign_full(one)
            extras += [(len(sigs) + k, e) for k, e in more]
            sigs += some
            parts += tallied
        return sigs, extras, parts
    if isinstance(job, _Texts):
        signed = _sign_texts([t for _n, _l, t in job.items])
        read = zip(job.items, signed, strict=True)
        return [(n, line, h, m) for (n, line, _t), (h, m) in read], [], []
    if _EXTRA is not None or _TALLY is not None:
        return _sign_records(job, _EXTRA, _TALLY)
    found = _texts(job)
    signed = _sign_texts([t for _l, t in found])
    pairs = zip(found, signed, strict=True)
    return [(n, line, h, m) for n, ((line, _t), (h, m)) in enumerate(pairs, start=1)], [], []


def _sign_records(job: _Lines, extra: Extra | None, tally: Tally | None) -> Signed:
    """``_sign`` of lines with ``extra`` computed from each record as it is signed, and
    ``tally`` over them all: each line is parsed and its text normalised once."""
    from rensa import RMinHash

    path = Path(job.path)
    sigs: list[tuple[int, int, bytes | None, Any]] = []
    extras: list[tuple[int, Any]] = []
    values: list[Any] = []
    lengths: list[int] = []
    fields = job.fields
    json_lines = job.kind in ("jsonl", "ndjson")
    for i, raw in enumerate(job.raws):
        if not raw.strip():
            continue
        line = job.first + i
        decoded = decode_line(raw, path, line)
        value: Any
        if json_lines:
            value = loads(decoded, path, line)
        else:
            decoded = decoded[:-1] if decoded.endswith("\n") else decoded
            value = decoded[:-1] if decoded.endswith("\r") else decoded
        texts = RecordTexts(value, fields)
        text = texts.task
        if text:
            texts.cut = cut = shingle_list(text)
            m = RMinHash(num_perm=NUM_PERM, seed=SEED)
            m.update(cut)
            sigs.append((len(sigs) + 1, line, digest(text), m))
        else:
            texts.cut = []
            sigs.append((len(sigs) + 1, line, None, None))
        if tally is not None:
            values.append(value)
            lengths.append(texts.whole_length)
        e = None if extra is None else extra(texts)
        if e is not None:
            extras.append((len(sigs) - 1, e))
    return sigs, extras, [] if tally is None else [tally(values, fields, lengths)]


def _texts(job: _Lines) -> list[tuple[int, str]]:
    """(line, text) of each non-blank line, decoded and parsed as ``recordio`` does."""
    path = Path(job.path)
    out = []
    for i, raw in enumerate(job.raws):
        if not raw.strip():
            continue
        line = job.first + i
        text = decode_line(raw, path, line)
        if job.kind in ("jsonl", "ndjson"):
            out.append((line, task_text(loads(text, path, line), job.fields)))
        else:
            text = text[:-1] if text.endswith("\n") else text
            out.append((line, text[:-1] if text.endswith("\r") else text))
    return out


def _sign_in_worker(job: Job) -> Signed | None:
    try:
        return _sign_full(job)
    except Exception:  # signed again in the parent, which raises the reader's own error
        return None


class Workers:
    """A pool of ``jobs`` signing processes (none for 1), shared by the splits of one check.

    ``progress`` counts the records ``signatures`` yields, and the bytes of the lines
    they were read from (CSV, JSON and Parquet records: no bytes).  ``extra``, when
    given, is computed in the workers from each record of a JSONL or text split
    (``Extra``; module state it reads must be set before the pool starts) and each
    result that is not None handed to ``sink`` with the record's number and line."""

    def __init__(
        self,
        jobs: int,
        progress: ProgressSink | None = None,
        extra: Extra | None = None,
        sink: Callable[[int, int, Any], None] | None = None,
        tally: Tally | None = None,
        tallied: Callable[[Any], None] | None = None,
    ) -> None:
        self.jobs = max(1, jobs)
        self.progress = progress
        self.extra = extra
        self.sink = sink
        self.tally, self.tallied = tally, tallied
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> Workers:
        global _EXTRA, _TALLY
        _EXTRA, _TALLY = self.extra, self.tally
        if self.jobs > 1:
            import gc
            import multiprocessing

            methods = multiprocessing.get_all_start_methods()
            ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
            self._pool = ProcessPoolExecutor(self.jobs, mp_context=ctx)
            # the workers fork on the first job, from what this process holds then: keep
            # collection in them from touching (and copying) it
            gc.freeze()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        global _EXTRA, _TALLY
        _EXTRA = _TALLY = None
        if self._pool is not None:
            import gc

            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
            gc.unfreeze()

    def _run(self, jobs: Iterator[Job]) -> Iterator[tuple[Job, list[Any]]]:
        """Each job with its signatures, in order, with a bounded number in flight."""
        for job, sigs, _extras, _parts in self._run_full(jobs):
            yield job, sigs

    def _run_full(
        self, jobs: Iterator[Job]
    ) -> Iterator[tuple[Job, list[Any], list[Any], list[Any]]]:
        if self._pool is None:
            for job in jobs:
                yield job, *_sign_full(job)
            return
        pending: deque[tuple[Job, Future[Signed | None]]] = deque()
        limit = self.jobs * IN_FLIGHT
        try:
            for job in jobs:
                pending.append((job, self._pool.submit(_sign_in_worker, job)))
                while len(pending) >= limit:
                    yield self._result(*pending.popleft())
            while pending:
                yield self._result(*pending.popleft())
        finally:
            for _job, future in pending:
                future.cancel()

    @staticmethod
    def _result(
        job: Job, future: Future[Signed | None]
    ) -> tuple[Job, list[Any], list[Any], list[Any]]:
        from concurrent.futures.process import BrokenProcessPool

        try:
            out = future.result()
        except BrokenProcessPool as exc:
            raise WorkerDiedError(
                f"a signing process died while reading the data ({exc})",
                field="--jobs",
                expected="worker processes that finish",
                observed="a worker ended abruptly (killed, or out of memory)",
                hint="run again, or with --jobs 1 to sign in one process",
            ) from None
        return job, *(_sign_full(job) if out is None else out)

    def signatures(
        self,
        path: Path,
        fmt: str | None,
        fields: Sequence[str] = (),
        shards: Sequence[str] = (),
        marks: Marks | None = None,
    ) -> Iterator[Signature]:
        """Every record of one split, in file order, with its hash and MinHash; a folder
        (``shards``) numbers its records on across the shards, noting each shard's
        first in ``marks``."""
        if shards:
            chunks: Iterator[Job] = shard_chunks(path, fmt, tuple(fields), shards, marks)
        else:
            kind = format_of(path, fmt)
            if kind not in LINE_KINDS:
                for _job, sigs in self._counted(self._run(_text_chunks(path, fmt, tuple(fields)))):
                    yield from sigs
                return
            chunks = _line_chunks(path, kind, tuple(fields))
        number = 0
        for _job, sigs, extras, parts in self._counted(self._run_full(chunks)):
            if self.tallied is not None:
                for part in parts:
                    self.tallied(part)
            if extras and self.sink is not None:
                for k, e in extras:
                    self.sink(number + k + 1, sigs[k][1], e)
            for _n, line, h, m in sigs:
                number += 1
                yield number, line, h, m

    def _counted(self, signed: Iterator[Any]) -> Iterator[Any]:
        for out in signed:
            if self.progress is not None:
                self.progress.advance(_bytes_of(out[0]), items=len(out[1]))
            yield out


def _bytes_of(job: Job) -> int:
    """The bytes of the lines a chunk holds (records read by the parent: none known)."""
    if isinstance(job, _Batch):
        return sum(_bytes_of(one) for one in job.jobs)
    return sum(map(len, job.raws)) if isinstance(job, _Lines) else 0


def _blocks(path: Path) -> Iterator[tuple[int, list[bytes]]]:
    """(number of the first line, lines) of ``path`` a block at a time, with the reader's
    bounds and its errors."""
    import io

    def refuse(p: Path, reason: str) -> RecordReadError:
        return fail(RecordReadError, p, reason)

    with open_regular(path, refuse) as raw, io.BufferedReader(raw, 1 << 20) as f:
        try:
            yield from line_blocks(f, path, DEFAULT_LIMITS, BLOCK_BYTES)
        except OSError as exc:
            if isinstance(exc, RecordReadError):
                raise
            raise fail(RecordReadError, path, exc.strerror or str(exc)) from exc


def _line_chunks(path: Path, kind: str, fields: tuple[str, ...]) -> Iterator[_Lines]:
    """Chunks of about ``CHUNK_BYTES`` at line boundaries: a chunk ends before the line
    that finds it ``CHUNK_BYTES`` long or ``CHUNK_RECORDS`` lines long.  Each line keeps
    its number in the file, so a byte-order mark is stripped on line 1 only, as the
    reader does."""
    from bisect import bisect_left
    from itertools import accumulate

    raws: list[bytes] = []
    first, size = 1, 0
    for start, block in _blocks(path):
        at = 0
        while at < len(block):
            if size >= CHUNK_BYTES or len(raws) >= CHUNK_RECORDS:
                yield _Lines(str(path), kind, fields, first, raws)
                raws, first, size = [], start + at, 0
            part = block[at : at + CHUNK_RECORDS - len(raws)]
            before = list(accumulate(map(len, part), initial=size))  # the size before each
            take = min(bisect_left(before, CHUNK_BYTES), len(part))  # those while it is short
            raws += part[:take]
            size = before[take]
            at += take
    if raws:
        yield _Lines(str(path), kind, fields, first, raws)


def shard_path(folder: Path, name: str) -> Path:
    """Shard ``name`` ('/'-separated) of ``folder``."""
    return folder.joinpath(*name.split("/"))


def shard_chunks(
    folder: Path,
    fmt: str | None,
    fields: tuple[str, ...],
    shards: Sequence[str],
    marks: Marks | None = None,
) -> Iterator[Job]:
    """The chunks of every shard, in order, small ones batched to about a chunk's size;
    each shard's first record number noted in ``marks`` before its chunks are yielded.
    Every rank cuts a folder into the same jobs."""
    batch: list[_Lines | _Texts] = []
    size = records = count = 0
    for name in shards:
        path = shard_path(folder, name)
        if marks is not None:
            marks.note(records + 1, name)
        kind = format_of(path, fmt)
        lines = kind in LINE_KINDS
        chunks = _line_chunks(path, kind, fields) if lines else _text_chunks(path, fmt, fields)
        for job in chunks:
            if isinstance(job, _Lines):
                records += sum(map(bool, map(bytes.strip, job.raws)))  # as ``_texts`` skips
                size += sum(map(len, job.raws))
                count += len(job.raws)
            else:
                records += len(job.items)
                size += sum(len(t) for _n, _l, t in job.items)
                count += len(job.items)
            batch.append(job)
            if size >= CHUNK_BYTES or count >= CHUNK_RECORDS:
                yield batch[0] if len(batch) == 1 else _Batch(tuple(batch))
                batch, size, count = [], 0, 0
    if batch:
        yield batch[0] if len(batch) == 1 else _Batch(tuple(batch))


def _text_chunks(path: Path, fmt: str | None, fields: tuple[str, ...]) -> Iterator[_Texts]:
    items: list[tuple[int, int, str]] = []
    size = 0
    for rec in iter_records(path, fmt):
        text = task_text(rec.value, fields)
        items.append((rec.number, rec.line, text))
        size += len(text)
        if size >= CHUNK_BYTES or len(items) >= CHUNK_RECORDS:
            yield _Texts(items)
            items, size = [], 0
    if items:
        yield _Texts(items)


def selected_texts(
    path: Path,
    fmt: str | None,
    fields: Sequence[str],
    wanted: set[int],
    marks: Marks | None = None,
) -> Iterator[tuple[int, int, str]]:
    """(number, line, text) of the records numbered in ``wanted``, in file order; JSONL
    and text lines that are not wanted are counted, not parsed.  A folder of shards
    (``marks``, as its first reading noted them) reads only the shards that hold one."""
    if marks is None or not marks.firsts:
        yield from _selected(path, fmt, fields, wanted)
        return
    ends = [*marks.firsts[1:], None]
    for first, end, name in zip(marks.firsts, ends, marks.names, strict=True):
        here = {n - first + 1 for n in wanted if n >= first and (end is None or n < end)}
        if here:
            for n, line, text in _selected(shard_path(path, name), fmt, fields, here):
                yield n + first - 1, line, text


def _selected(
    path: Path, fmt: str | None, fields: Sequence[str], wanted: set[int]
) -> Iterator[tuple[int, int, str]]:
    kind = format_of(path, fmt)
    if kind not in LINE_KINDS:
        for rec in iter_records(path, fmt):
            if rec.number in wanted:
                yield rec.number, rec.line, task_text(rec.value, fields)
        return
    fields = tuple(fields)
    ahead = sorted(wanted, reverse=True)  # the wanted numbers not reached yet, last first
    number = 0
    for start, block in _blocks(path):
        if not ahead:
            return
        records = sum(map(bool, map(bytes.strip, block)))  # non-blank lines: records
        if ahead[-1] > number + records:
            number += records  # none wanted here: counted, not parsed
            continue
        raws = [b""] * len(block)  # blank: skipped, keeps the line numbers
        keep = []
        for i, raw in enumerate(block):
            if raw.strip():
                number += 1
                if number in wanted:
                    keep.append(number)
                    raws[i] = raw
        while ahead and ahead[-1] <= number:
            ahead.pop()
        texts = _texts(_Lines(str(path), kind, fields, start, raws))
        for n, (line, text) in zip(keep, texts, strict=True):
            yield n, line, text


# --- across the ranks of a torchrun job (data check --distributed) ------------

Payload = tuple[Any, ...]
"""What a rank hands the others at each gather, as ``sigpack`` bytes: ("round",
[(chunk index, signatures)], ended), ("error", exception) when its share could not be
read, or ("final", exit code, exception or None) once it has stopped."""


class RankQuit(Exception):  # noqa: N818 - a signal between ranks, not an error to report
    """Rank 0 stopped (its exit code in ``code``): every other rank exits with it."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _gather(comm: Any, mine: bytes, what: str, full: bool, ranks: int | None = None) -> list[Any]:
    """Every rank's payload (of the first ``ranks``), parsed and checked, never unpickled;
    one that does not fit is a refusal naming its rank."""
    raws = comm.all_gather_bytes(mine, what)
    out = []
    for who, raw in enumerate(raws[:ranks]):
        try:
            out.append(sigpack.unpack(raw, full))
        except Malformed as exc:
            raise bad_answer(who, what, "record signatures of this version", str(exc)) from None
    return out


class RankSigner:
    """Signs this rank's share of each split and, on rank 0, yields every record's
    signature in file order.

    Each rank reads the same chunks of the split (the same file, cut at the same lines)
    and signs the chunks whose index modulo the world size is its rank, with its own
    ``Workers``; the ranks gather ``batch`` chunks each per round, so rank 0 holds at
    most a round of signatures.  Only rank 0 keeps the index and judges; the result is
    the one a single process finds.  A rank whose share fails to read (or that stopped)
    makes every rank raise the same error at that round; a rank whose payload does not
    fit (a chunk that is not its own, a size that does not add up) is refused by name."""

    def __init__(self, comm: Any, workers: Workers, batch: int = IN_FLIGHT) -> None:
        self.comm = comm
        self.workers = workers
        self.batch = max(1, batch)

    def signatures(
        self,
        path: Path,
        fmt: str | None,
        fields: Sequence[str] = (),
        shards: Sequence[str] = (),
        marks: Marks | None = None,
    ) -> Iterator[Signature]:
        import itertools

        size, rank = self.comm.world_size, self.comm.rank
        kind = format_of(path, fmt)
        lines = bool(shards) or kind in LINE_KINDS  # numbered here, in reading order
        chunks: Iterator[Job] = (
            shard_chunks(path, fmt, tuple(fields), shards, marks)
            if shards
            else _line_chunks(path, kind, tuple(fields))
            if lines
            else _text_chunks(path, fmt, tuple(fields))
        )
        numbered = enumerate(chunks)
        number = start = 0
        width = size * self.batch
        while True:
            try:
                window = list(itertools.islice(numbered, width))
                share = [(i, job) for i, job in window if i % size == rank]
                signed = self.workers._run(job for _i, job in share)
                out = [(i, sigs) for (i, _job), (_j, sigs) in zip(share, signed, strict=True)]
                # rank 0 keeps its own signatures: the others read only the header
                sent = [(i, []) for i, _sigs in out] if rank == 0 else out
                mine = sigpack.pack_round(sent, len(window) < width)
            except FtManifestError as exc:
                mine = sigpack.pack_error(exc)
            got = _gather(self.comm, mine, "record signatures", full=rank == 0)
            _raise_for(got, rank)
            if rank == 0:
                got[0] = ("round", out, got[0][2])
                merged = sorted(_own_chunks(got, start, len(window), size))
                for _i, sigs in merged:
                    for n, line, h, m in sigs:
                        number = number + 1 if lines else n
                        yield number, line, h, m
            if all(p[2] for p in got):
                return
            start += width


def _own_chunks(got: list[Payload], start: int, count: int, size: int) -> list[Any]:
    """Every rank's chunks of this round, each rank's exactly the ones rank 0 expects of
    it (of chunks ``start`` to ``start + count - 1``, those its rank modulo ``size``)."""
    out = []
    for who, p in enumerate(got):
        expected = [i for i in range(start, start + count) if i % size == who]
        sent = sorted(i for i, _sigs in p[1])
        if sent != expected:
            raise bad_answer(
                who,
                "record signatures",
                f"its chunks of this round ({expected[:5]}{'...' if len(expected) > 5 else ''})",
                f"chunks {sent[:5]}{'...' if len(sent) > 5 else ''}",
            )
        out += p[1]
    return out


def _raise_for(got: list[Payload], rank: int) -> None:
    """Stop this rank as the gathered payloads say: rank 0 stopped, or a rank failed."""
    if rank != 0 and got[0][0] == "final":
        raise RankQuit(got[0][1])
    for who, p in enumerate(got):
        if p[0] == "round":
            continue
        exc = p[1] if p[0] == "error" else p[2]
        if isinstance(exc, FtManifestError):
            raise exc
        raise WorkerDiedError(
            f"rank {who} stopped while the ranks signed records",
            field="rank",
            expected="every rank finishing its share",
            observed=f"rank {who} stopped without an error it could send",
            hint="look at that rank's log (killed, or out of memory), then run again",
        )


def run_ranks(comm: Any, work: Any) -> tuple[int, BaseException | None]:
    """Run ``work()`` (rank 0: the whole check, returning its exit code; others: their
    share, returning None), then agree on rank 0's exit code on every rank.

    Returns (the job's exit code, this rank's own error or None).  A rank that failed
    keeps answering the gathers until rank 0 has stopped, so no rank waits for ever."""
    code: int | None = None
    error: BaseException | None = None
    try:
        code = work()
    except RankQuit as quit_:
        return quit_.code, None
    except FtManifestError as exc:
        code, error = exc.exit_code, exc
    except Exception as exc:  # a bug: still tell the other ranks, then re-raise
        code, error = EXIT_BUG, exc
    final = sigpack.pack_final(code, error)
    if comm.rank == 0:
        comm.all_gather_bytes(final, "the verdict")
        return (code if code is not None else EXIT_BUG), error
    while True:  # only rank 0's answer matters here
        (first,) = _gather(comm, final, "the verdict", full=False, ranks=1)
        if first[0] == "final":
            return (first[1] if first[1] is not None else EXIT_BUG), error
