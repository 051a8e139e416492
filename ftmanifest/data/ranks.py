"""The signing of a split shared by the ranks of a torchrun job (``data check
--distributed``).

Layer: judging rooms - data (edge: talks to the other ranks through ``comm``).  What
flows through here is the signatures crossing between ranks: every rank cuts each split
into the same chunks (``chunks``) and signs those whose index modulo the world size is
its rank with its own ``parallel.Workers``; rank 0 gathers a round of chunks at a time
and consumes them in file order, so its report is the single-process one.  The
signatures cross as bytes of one fixed layout (``sigpack``), checked on receipt, never
as pickles: a rank cannot run code on another, and a payload that does not fit is a
refusal naming the rank that sent it.  ``run_ranks`` agrees on rank 0's exit code.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ftmanifest.counts import format_of
from ftmanifest.data import sigpack
from ftmanifest.data.chunks import LINE_KINDS, Job, _line_chunks, _text_chunks, shard_chunks
from ftmanifest.data.parallel import IN_FLIGHT, Signature, Workers
from ftmanifest.data.shards import Marks
from ftmanifest.errors import EXIT_BUG, FtManifestError, WorkerDiedError
from ftmanifest.wire import Malformed, bad_answer

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
