"""Who this rank is, and gathering one object from every rank before a deadline.

Layer: edges - distributed (edge).  ``job_from_env`` reads the variables ``torchrun``
sets (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
``GROUP_RANK``, ``MASTER_ADDR``/``MASTER_PORT``); ``joined`` joins the job's
process group over gloo (host data: fingerprints, digests, findings, record
signatures), or, when the training script already initialised one (the Trainer
guard, NCCL on GPUs), makes a gloo group beside it.  Every collective carries
the deadline: a rank that never joins or stops answering makes the others
raise ``RankTimeoutError`` (exit 1, a refusal), never wait for ever.

Nothing that crosses between ranks is pickled: ``Comm`` gathers
bytes (sizes first, then padded uint8 tensors, each answer capped at
``MAX_ANSWER``), parsed as JSON or a caller's fixed binary layout, and the
callers validate every field; an answer that does not fit is a refusal
naming the rank (``bad_answer``), never a crash, a hang or code run here.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ftmanifest.errors import UsageError
from ftmanifest.wire import RankAnswerError, RankTimeoutError

DEFAULT_TIMEOUT = 300.0
"""Seconds a rank waits for the others to join or answer (``--rank-timeout``)."""

_JOINS = itertools.count()  # groups this process joined (every rank joins alike)
# Set once this process has made a process group of its own (the CLI's --distributed):
# ``cli.entry`` then ends the process without the interpreter's teardown.
made_a_group = False
_INTS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")


@dataclass(frozen=True)
class Job:
    """This process's place in the job, as the launcher described it."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    master: str  # "addr:port", for messages

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def job_from_env(environ: Mapping[str, str] | None = None) -> Job | None:
    """The job this process belongs to, or None when no launcher set ``WORLD_SIZE``."""
    env = os.environ if environ is None else environ
    if "WORLD_SIZE" not in env:
        return None
    values: dict[str, int] = {}
    for name in _INTS:
        raw = env.get(name, "0" if name in ("LOCAL_RANK", "GROUP_RANK") else None)
        if raw is None and name == "LOCAL_WORLD_SIZE":
            raw = env["WORLD_SIZE"]
        try:
            values[name] = int(raw if raw is not None else "")
        except ValueError:
            raise UsageError(
                f"the launcher's {name} is not a number",
                field=name,
                expected="a whole number, as torchrun sets it",
                observed=repr(raw),
                hint="run under torchrun (or srun/kubectl with the torch.distributed variables)",
            ) from None
    size, rank = values["WORLD_SIZE"], values["RANK"]
    if size < 1 or not 0 <= rank < size or "MASTER_ADDR" not in env or "MASTER_PORT" not in env:
        raise UsageError(
            "the launcher's variables do not describe a job",
            field="RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT",
            expected="0 <= RANK < WORLD_SIZE and MASTER_ADDR, MASTER_PORT set",
            observed=f"RANK={env.get('RANK')} WORLD_SIZE={env.get('WORLD_SIZE')} "
            f"MASTER_ADDR={env.get('MASTER_ADDR')} MASTER_PORT={env.get('MASTER_PORT')}",
            hint="start the command with torchrun --nproc-per-node N ...",
        )
    return Job(
        rank=rank,
        world_size=size,
        local_rank=values["LOCAL_RANK"],
        local_world_size=values["LOCAL_WORLD_SIZE"],
        node_rank=values["GROUP_RANK"],
        master=f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}",
    )


class Comm:
    """One joined group: every rank hands in data and gets every rank's, in rank order.

    Only bytes cross: ``all_gather_json`` (small structured answers) and
    ``all_gather_bytes`` (bulk data in a caller's fixed binary layout).  Nothing
    received is unpickled, so what another rank (or anything that reaches the
    unauthenticated rendezvous port) sends is data to validate, never code.
    """

    def __init__(self, job: Job, group: Any, timeout: float) -> None:
        self.job = job
        self.group = group
        self.timeout = timeout
        # every rank's host name, once ``joined`` gathered them: messages name the node
        self.hosts: list[str] = ["?"] * job.world_size
        self._step = 0  # the gathers so far: the key each rank checks in under
        self._keys = f"ftmanifest/{next(_JOINS)}"  # the same on every rank of a job

    @property
    def rank(self) -> int:
        return self.job.rank

    @property
    def world_size(self) -> int:
        return self.job.world_size

    def all_gather_json(self, obj: Any, what: str = "results") -> list[Any]:
        """Every rank's JSON-able ``obj`` in rank order, on every rank, as parsed JSON.

        An answer that is not JSON (or nests too deep to parse) comes back as
        ``UNREADABLE``: the caller names that rank."""
        import json

        data = json.dumps(obj, sort_keys=True, default=str).encode("utf-8")
        out: list[Any] = []
        for raw in self.all_gather_bytes(data, what):
            try:
                out.append(json.loads(raw.decode("utf-8")))
            except (ValueError, UnicodeDecodeError, RecursionError):
                out.append(UNREADABLE)
        return out

    def all_gather_bytes(self, data: bytes, what: str = "results") -> list[bytes]:
        """Every rank's ``data`` in rank order, on every rank; the caller parses it.

        Sizes are gathered first, then the payloads padded to the largest; an
        answer over ``MAX_ANSWER`` bytes is refused on every rank before any
        payload is sent, and a silent rank raises ``RankTimeoutError``."""
        self._step += 1
        self._check_in(self._step)
        try:
            lengths = self._sizes(len(data))
            if not all(0 <= n <= MAX_ANSWER for n in lengths):  # the same on every rank
                raise _too_large(what, lengths)
            raws = self._payloads(data, max(1, *lengths))
        except (RuntimeError, OSError) as exc:  # gloo raises RuntimeError on a timeout
            missing = self._missing(self._step)
            raise _timeout(
                self.job, self.timeout, f"gathering {what}", exc, missing, self.hosts
            ) from None
        if len(raws) != self.world_size:
            raise RankAnswerError(f"the gather of {what} returned {len(raws)} answers")
        return [raw[:n] for raw, n in zip(raws, lengths, strict=True)]

    # the transport: the one place that touches torch.distributed (tests replace it)

    def _store(self) -> Any:
        import torch.distributed as dist

        return dist.distributed_c10d._get_default_store()

    def _check_in(self, step: int) -> None:
        """Say in the job's store that this rank reached gather ``step``, so that a rank
        that times out can name the ranks that never got there."""
        try:
            self._store().set(f"{self._keys}/{step}/{self.rank}", "1")
        except Exception:  # noqa: BLE001 - only the naming is lost, never the gather
            pass

    def _missing(self, step: int) -> list[int] | None:
        """The ranks that did not reach gather ``step``, or None when it cannot be said."""
        try:
            store = self._store()
            keys = [f"{self._keys}/{step}/{r}" for r in range(self.world_size)]
            return [r for r, key in enumerate(keys) if not store.check([key])]
        except Exception:  # noqa: BLE001 - the message then names no rank
            return None

    def _sizes(self, n: int) -> list[int]:
        import torch
        import torch.distributed as dist

        sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(self.world_size)]
        dist.all_gather(sizes, torch.tensor([n], dtype=torch.int64), group=self.group)
        return [int(t.item()) for t in sizes]

    def _payloads(self, data: bytes, width: int) -> list[bytes]:
        import torch
        import torch.distributed as dist

        mine = torch.zeros(width, dtype=torch.uint8)
        if data:
            mine[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        buffers = [torch.zeros(width, dtype=torch.uint8) for _ in range(self.world_size)]
        dist.all_gather(buffers, mine, group=self.group)
        return [b.numpy().tobytes() for b in buffers]


def _hosts(comm: Comm) -> list[str]:
    """Every rank's host name, as it says (text, cut short): for messages only."""
    import socket

    got = comm.all_gather_json(socket.gethostname()[:100] or "?", "the ranks' host names")
    return [h[:100] if isinstance(h, str) and h else "?" for h in got]


UNREADABLE = object()
"""What ``all_gather_json`` returns for a rank whose answer is not JSON."""
MAX_ANSWER = 256 * 1024 * 1024
"""Bytes one rank may send in one gather (a model of 100,000 files is ~15 MB)."""


def _too_large(what: str, lengths: list[int]) -> RankAnswerError:
    over = [r for r, n in enumerate(lengths) if not 0 <= n <= MAX_ANSWER]
    return RankAnswerError(
        f"rank {over[0]} sent an answer of {lengths[over[0]]} bytes while gathering {what}",
        field="ranks",
        expected=f"answers of at most {MAX_ANSWER} bytes",
        observed=", ".join(f"rank {r}: {n}" for r, n in enumerate(lengths)),
    )


def _timeout(
    job: Job,
    timeout: float,
    doing: str,
    exc: BaseException,
    missing: list[int] | None = None,
    hosts: list[str] | None = None,
) -> RankTimeoutError:
    detail = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    if missing:
        named = ", ".join(
            f"rank {r} ({hosts[r]})" if hosts and hosts[r] != "?" else f"rank {r}" for r in missing
        )
        observed = f"{named} did not answer: it died, hangs or is still busy"
        head = f"{named} did not answer"
    else:
        observed = "a rank that did not join, died or hangs"
        head = "not every rank answered"
    return RankTimeoutError(
        f"rank {job.rank} of {job.world_size}: {head} while {doing} "
        f"within {timeout:g} s ({detail})",
        field="ranks",
        expected=f"{job.world_size} ranks answering within {timeout:g} s",
        observed=observed,
        hint="look at the named rank's output (on its host); raise --rank-timeout if a rank "
        "is only slow",
    )


@contextmanager
def joined(job: Job, timeout: float = DEFAULT_TIMEOUT) -> Iterator[Comm]:
    """Join the job (or reuse the script's group with a gloo group beside it)."""
    from datetime import timedelta

    import torch.distributed as dist

    if not dist.is_available():
        raise UsageError(
            "this torch build has no torch.distributed",
            field="--distributed",
            expected="a torch with distributed support",
            observed="torch.distributed.is_available() is False",
            hint="install a standard torch build, or run without --distributed",
        )
    deadline = timedelta(seconds=timeout)
    owned = not dist.is_initialized()
    try:
        if owned:
            dist.init_process_group(
                "gloo",
                init_method="env://",
                rank=job.rank,
                world_size=job.world_size,
                timeout=deadline,
            )
            global made_a_group
            made_a_group = True
            group = None
        else:
            # a group of our own even beside a gloo one: its collectives keep the
            # script's timeout (the Trainer's ddp_timeout, 30 min), ours keep ours
            group = dist.new_group(backend="gloo", timeout=deadline)
    except (RuntimeError, OSError, ValueError) as exc:
        raise _timeout(job, timeout, "joining", exc) from None
    try:
        comm = Comm(job, group, timeout)
        comm.hosts = _hosts(comm)
        yield comm
    finally:
        if owned and dist.is_initialized():
            dist.destroy_process_group()
        elif group is not None and dist.is_initialized():
            dist.destroy_process_group(group)
