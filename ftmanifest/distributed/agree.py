"""What the ranks of a job agree on before they judge, and how they leave together.

Layer: edges - distributed (over ``comm``; ``judge_arguments`` and ``judge_copies``
are pure).  A multi-node job reaches one verdict:

- ``agree_arguments``: every rank's arguments that decide the verdict
  (``--accept`` and its reasons, policy flags, the manifest's digest) are
  gathered before anything is judged; ranks that differ are a refusal on
  every rank naming the ranks, their hosts and the argument.  Before it,
  each rank applied its own command line: one node's extra ``--accept``
  made that node pass while the other refused.
- ``agree_on_copies``: every rank's view of the files a command reads
  (``{field: digest}``) against the pin, or, where nothing is pinned yet
  (``lock``), against the other ranks; a node whose copy differs is a
  refusal on every rank naming the node.  A command whose ranks share the
  reading of one file (``data check`` signs each chunk on one rank) may
  only start once every node's copy is the same.
- ``leave_together``: after printing, every rank waits for the others and
  then ignores SIGTERM while it exits: once one rank exits 1, torchrun's
  agent SIGTERMs the node's slower ranks (the summary then shows them as
  -15 and names whichever exited first); held here, each exits with the
  job's code.
"""

from __future__ import annotations

import signal
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ftmanifest.distributed.shard import agree_exit
from ftmanifest.errors import FtManifestError, RefusedError
from ftmanifest.findings import Finding
from ftmanifest.manifest import load_manifest

if TYPE_CHECKING:
    from ftmanifest.distributed.comm import Comm


class ArgumentsDifferError(RefusedError):
    """The ranks were started with different arguments that decide the verdict."""

    reason = "rank-arguments-differ"


class CopiesDifferError(RefusedError):
    """A node's copy of the files the command reads differs from the pin or the others'."""

    reason = "node-copies-differ"


def ranks_text(ranks: Sequence[int]) -> str:
    """``0``, ``2,3``, ``0-7``, ``0,2,5-7``: a list of ranks for a person (runs of 3+
    as ranges)."""
    out: list[str] = []
    todo = sorted(set(ranks))
    while todo:
        first = last = todo.pop(0)
        while todo and todo[0] == last + 1:
            last = todo.pop(0)
        if last - first >= 2:
            out.append(f"{first}-{last}")
        else:
            out += [str(r) for r in range(first, last + 1)]
    return ",".join(out)


def who(ranks: Sequence[int], hosts: Sequence[str]) -> str:
    """``rank 2 (node-b)``, ``ranks 2,3 (node-b)``."""
    names = ", ".join(dict.fromkeys(hosts[r] for r in ranks))
    return f"rank{'s' if len(ranks) > 1 else ''} {ranks_text(ranks)} ({names})"


def _majority(values: Mapping[int, str]) -> str:
    """The value most ranks have; a tie goes to the lowest rank's."""
    counts = Counter(values.values())
    top = max(counts.values())
    return next(v for _, v in sorted(values.items()) if counts[v] == top)


def _groups(values: Mapping[int, str], want: str) -> list[tuple[str, list[int]]]:
    """(value, ranks) of every value other than ``want``, in rank order."""
    out: dict[str, list[int]] = {}
    for rank, value in sorted(values.items()):
        if value != want:
            out.setdefault(value, []).append(rank)
    return list(out.items())


def judge_arguments(answers: Sequence[Any], hosts: Sequence[str]) -> ArgumentsDifferError | None:
    """None when every rank sent the same ``{argument: value}``; else the refusal."""
    sent = [a if isinstance(a, dict) else {"(answer)": "not a map of arguments"} for a in answers]
    names = sorted({k for a in sent for k in a})
    rows = []
    for name in names:
        values = {r: _show(a.get(name)) for r, a in enumerate(sent)}
        if len(set(values.values())) < 2:
            continue
        want = _majority(values)
        agree = [r for r, v in values.items() if v == want]
        for value, ranks in _groups(values, want):
            rows.append(
                Finding(
                    kind="distributed",
                    rule="distributed.arguments",
                    message=f"{who(ranks, hosts)}: {name} differs from rank(s) {ranks_text(agree)}",
                    field=name,
                    expected=f"{want} (as rank(s) {ranks_text(agree)})",
                    observed=value,
                    extra={"ranks": ranks},
                )
            )
    if not rows:
        return None
    first = rows[0]
    return ArgumentsDifferError(
        "the ranks were started with different arguments: "
        + "; ".join(str(r.message) for r in rows),
        field=first.field,
        expected=first.expected,
        observed=first.observed,
        hint="start every rank with the same command line (the same --accept and --reason, "
        "flags and manifest)",
        findings=rows if len(rows) > 1 else (),
    )


def _show(value: Any) -> str:
    import json

    if value is None:
        return "(not given)"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def agree_arguments(comm: Comm, arguments: Mapping[str, Any]) -> None:
    """Gather every rank's ``arguments`` and raise the same refusal on every rank when
    they differ (values: JSON-able; lists are compared as given, sort them first)."""
    refusal = judge_arguments(comm.all_gather_json(dict(arguments), "the arguments"), comm.hosts)
    if refusal is not None:
        raise refusal


def manifest_digest(path: Any) -> str:
    """The manifest's digest as ranks compare it, or why it cannot be read (a value too:
    a rank that cannot read it differs from those that can)."""
    try:
        return load_manifest(path).digest()
    except FtManifestError as exc:
        return f"unreadable: {exc.message}"


def judge_copies(
    answers: Sequence[Mapping[str, Any]], hosts: Sequence[str], what: str
) -> CopiesDifferError | None:
    """None when every rank's ``seen`` matches the pin (``pinned``, rank 0's) or, where
    nothing is pinned, every other rank's; else the refusal naming each node that differs."""
    pinned = answers[0].get("pinned") or {}
    fields = sorted({k for a in answers for k in (a.get("seen") or {})} | set(pinned))
    rows = []
    for name in fields:
        values = {
            r: str((a.get("seen") or {}).get(name, "(absent)")) for r, a in enumerate(answers)
        }
        pin = pinned.get(name)
        want = str(pin) if pin is not None else _majority(values)
        agree = [r for r, v in values.items() if v == want]
        source = "(manifest)" if pin is not None else f"(as rank(s) {ranks_text(agree)})"
        for value, ranks in _groups(values, want):
            rows.append(
                Finding(
                    kind="distributed",
                    rule="distributed.copies",
                    message=f"{who(ranks, hosts)}: its copy differs on {name}",
                    field=name,
                    expected=f"{want} {source}",
                    observed=value,
                    extra={"ranks": ranks, "hosts": sorted({hosts[r] for r in ranks})},
                )
            )
    if not rows:
        return None
    first = rows[0]
    return CopiesDifferError(
        f"not every node's copy is the one {what} judges: "
        + "; ".join(str(r.message) for r in rows),
        field=first.field,
        expected=first.expected,
        observed=first.observed,
        hint="give every node the same files (restore the pinned copy on the node named), "
        "then run the job again",
        findings=rows if len(rows) > 1 else (),
    )


def agree_on_copies(
    comm: Comm, seen: Mapping[str, str], pinned: Mapping[str, str | None], what: str
) -> None:
    """Gather every rank's ``seen`` (and the pins) and raise the same refusal on every
    rank when a node's copy differs."""
    answer = {"seen": dict(seen), "pinned": dict(pinned)}
    got = comm.all_gather_json(answer, f"the nodes' copies of {what}'s files")
    answers = [a if isinstance(a, dict) else {"seen": {"(answer)": "unreadable"}} for a in got]
    refusal = judge_copies(answers, comm.hosts, what)
    if refusal is not None:
        raise refusal


def leave_together(comm: Comm, code: int, *, exiting: bool = True) -> int:
    """After this rank printed: wait for every rank and return the job's exit code (the
    worst rank's).  ``exiting``: the process exits next, so SIGTERM is ignored from
    here on, and each rank exits with that code whatever torchrun's agent sends."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    code = agree_exit(comm, code)
    if not exiting:
        return code
    try:
        # ignored, not handled: a Python handler is reset to the default while the
        # interpreter finalises, and a SIGTERM then would still end the rank as -15
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except ValueError:  # not the main thread (a test's thread ranks)
        pass
    return code
