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
worker ahead of what it has consumed (about a MiB of lines each; ``chunks`` says how
each format is cut and what of it a worker decodes).  A chunk that fails in a worker is
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

The chunks come from ``chunks`` (the split cut at line boundaries); across the ranks of
a torchrun job, ``ranks.RankSigner`` hands each rank its share of them and gathers the
signatures.  What flows through this module is one chunk in, its signatures out.
"""

from __future__ import annotations

import hashlib
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

from ftmanifest.counts import format_of
from ftmanifest.data.chunks import (
    LINE_KINDS,
    Job,
    _Batch,
    _line_chunks,
    _Lines,
    _text_chunks,
    _Texts,
    _texts,
    shard_chunks,
)
from ftmanifest.data.shards import Marks
from ftmanifest.data.text import NUM_PERM, SEED, normalise, shingle_list
from ftmanifest.data.walk import RecordTexts
from ftmanifest.errors import WorkerDiedError
from ftmanifest.progress import ProgressSink
from ftmanifest.recordio import decode_line, loads

IN_FLIGHT = 3  # chunks per worker read ahead of the one being consumed
SMALL = 8 << 20  # inputs under this many bytes in all are signed in the parent by default

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
