"""Test support: a job of threads, one per rank, over ``Comm``'s own gather code.

``ThreadComm`` is a real ``Comm`` whose transport (``_sizes``, ``_payloads``)
exchanges bytes between threads instead of gloo tensors, so everything above
it (the size cap, JSON parsing, every caller's checks) is the code a torchrun
job runs.  A rank can send raw bytes of its choosing with ``all_gather_bytes``
(a hostile or broken peer).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ftmanifest.distributed.comm import Comm, Job


class _Group:
    def __init__(self, n: int) -> None:
        self.slots: list[Any] = [None] * n
        self.barrier = threading.Barrier(n, timeout=10)


class ThreadComm(Comm):
    """``Comm`` over threads; ``sent`` holds what this rank handed ``all_gather_json``."""

    def __init__(self, group: _Group, rank: int, node_rank: int = 0) -> None:
        n = len(group.slots)
        super().__init__(Job(rank, n, rank, n, node_rank, "threads:0"), group, 10.0)
        self.sent: list[Any] = []

    def all_gather_json(self, obj: Any, what: str = "results") -> list[Any]:
        self.sent.append(obj)
        return super().all_gather_json(obj, what)

    def _exchange(self, value: Any) -> list[Any]:
        self.group.slots[self.rank] = value
        self.group.barrier.wait()  # BrokenBarrierError (a RuntimeError) on a timeout
        out = list(self.group.slots)
        self.group.barrier.wait()
        return out

    def _sizes(self, n: int) -> list[int]:
        return [int(v) for v in self._exchange(n)]

    def _payloads(self, data: bytes, width: int) -> list[bytes]:
        return [bytes(d).ljust(width, b"\0") for d in self._exchange(bytes(data))]


def on_ranks(fns: list[Callable[[ThreadComm], Any]], nodes: list[int] | None = None) -> list[Any]:
    """Run ``fns[r](comm_r)`` on one thread per rank; each rank's value or exception."""
    group = _Group(len(fns))
    out: list[Any] = [None] * len(fns)

    def run(rank: int) -> None:
        comm = ThreadComm(group, rank, (nodes or [0] * len(fns))[rank])
        try:
            out[rank] = fns[rank](comm)
        except BaseException as exc:
            out[rank] = exc  # the others time out at their next gather, as gloo's would

    threads = [threading.Thread(target=run, args=(r,)) for r in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a rank hung"
    return out
