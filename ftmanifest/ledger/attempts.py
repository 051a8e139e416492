"""What the ledger says happened: attempts, their outcome, budget and sealed uses.

Layer: judging rooms - pure core (ledger entries in, views out).  An *attempt* is every
record sharing one ``attempt`` id: ``planned``, then ``started`` and one end
(``completed``, ``failed``, ``not-started``) written by ``ftmanifest run`` or the
Trainer guard, or ``refused`` when verify said no; a person may mark it ``abandoned`` or
``invalid`` with a reason at any time, and that mark is its outcome.  Nothing is ever
dropped: an attempt that started and never ended stays listed as ``unfinished``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeGuard

from ftmanifest.ledger.recordfile import Entry

MARKS = ("abandoned", "invalid")
ENDS = ("completed", "failed", "not-started")
STATUSES = ("planned", "refused", "verified", "started", *ENDS, *MARKS, "unsealed", "scored",
            "bound")  # fmt: skip


@dataclass
class Attempt:
    """The records of one attempt, oldest first."""

    id: str
    entries: list[Entry] = field(default_factory=list)

    def _last(self, *statuses: str) -> Entry | None:
        found = [e for e in self.entries if e.record.get("status") in statuses]
        return found[-1] if found else None

    @property
    def experiment(self) -> str | None:
        for e in reversed(self.entries):
            exp = e.record.get("experiment")
            value = exp.get("id") if isinstance(exp, dict) else None
            if isinstance(value, str):
                return value
        return None

    @property
    def parent(self) -> str | None:
        for e in reversed(self.entries):
            exp = e.record.get("experiment")
            value = exp.get("parent") if isinstance(exp, dict) else None
            if isinstance(value, str):
                return value
        return None

    @property
    def manifest_digest(self) -> str | None:
        for e in reversed(self.entries):
            m = e.record.get("manifest")
            value = m.get("digest") if isinstance(m, dict) else None
            if isinstance(value, str):
                return value
        return None

    @property
    def status(self) -> str:
        """The outcome: a person's mark, else the end, else how far it got."""
        mark = self._last(*MARKS)
        if mark is not None:
            return str(mark.record["status"])
        end = self._last(*ENDS)
        if end is not None:
            return str(end.record["status"])
        if self._last("started") is not None:
            return "unfinished"
        for status in ("refused", "verified", "planned", "scored", "unsealed"):
            if self._last(status) is not None:
                return status
        return "unknown"

    @property
    def reason(self) -> str | None:
        for e in reversed(self.entries):
            if isinstance(e.record.get("reason"), str):
                return str(e.record["reason"])
        return None

    @property
    def started_at(self) -> str | None:
        """When it first started: ``run``'s record, not the Trainer guard's
        (which joins the attempt later) nor a resumed run's."""
        first = next((e for e in self.entries if e.record.get("status") == "started"), None)
        return first.at if first is not None else (self.entries[0].at if self.entries else None)

    @property
    def ended_at(self) -> str | None:
        end = self._last(*ENDS, *MARKS)
        return end.at if end is not None else None

    @property
    def used(self) -> dict[str, float | int | None]:
        """Budget used: the largest figure any record of the attempt gives (``run``
        and the Trainer guard each record the same attempt; the guard knows the
        steps, ``run`` the wall-clock of the whole command)."""
        out: dict[str, float | int | None] = {"steps": None, "hours": None, "gpu_hours": None}
        for e in self.entries:
            used = e.record.get("budget_used")
            if not isinstance(used, dict):
                continue
            for key in out:
                value = used.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    old = out[key]
                    out[key] = value if old is None else max(old, value)
        return out

    @property
    def trackers(self) -> list[dict[str, Any]]:
        """The tracker runs (MLflow, W&B) the attempt's records name, once each
        (optional ``trackers`` of a record; older records have none)."""
        return _union(self.entries, "trackers", ("kind", "run_id"))

    @property
    def adapter_bindings(self) -> list[dict[str, Any]]:
        """Every adapter the attempt bound (or left unbound), once each by folder:
        the checkpoints the guard saw and those bound after ``save_model``."""
        return _union(self.entries, "adapter_bindings", ("path",))

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.id,
            "experiment": self.experiment,
            "parent": self.parent,
            "status": self.status,
            "reason": self.reason,
            "manifest_digest": self.manifest_digest,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "budget_used": self.used,
            "trackers": self.trackers,
            "adapter_bindings": self.adapter_bindings,
            "records": [e.id for e in self.entries],
        }


def _union(entries: Iterable[Entry], key: str, identity: tuple[str, ...]) -> list[dict[str, Any]]:
    """The dicts listed under ``key`` by any entry, the latest of each identity,
    in the order they first appear."""
    out: dict[tuple[str, ...], dict[str, Any]] = {}
    for e in entries:
        items = e.record.get(key)
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict):
                out[tuple(str(item.get(k)) for k in identity)] = dict(item)
    return list(out.values())


def attempts(entries: Iterable[Entry]) -> list[Attempt]:
    """Entries grouped by attempt, in the order each attempt first appears."""
    out: dict[str, Attempt] = {}
    for e in entries:
        aid = e.record.get("attempt")
        key = aid if isinstance(aid, str) and aid else "r-" + e.short
        out.setdefault(key, Attempt(key)).entries.append(e)
    return list(out.values())


def counts(items: Sequence[Attempt]) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in items:
        out[a.status] = out.get(a.status, 0) + 1
    return out


def find(items: Sequence[Attempt], wanted: str) -> list[Attempt]:
    """Attempts ``wanted`` names: an attempt id (or its prefix), a record id
    prefix, or an experiment id (its latest attempt)."""
    exact = [a for a in items if a.id == wanted]
    if exact:
        return exact
    bare = wanted.removeprefix("sha256:")
    by_record = []
    if len(bare) >= 6:
        by_record = [
            a
            for a in items
            if any(e.id.removeprefix("sha256:").startswith(bare) for e in a.entries)
        ]
    by_prefix = [a for a in items if a.id.startswith(wanted)] if len(wanted) >= 4 else []
    hits = {id(a): a for a in (*by_prefix, *by_record)}
    if hits:
        return list(hits.values())
    of_experiment = [a for a in items if a.experiment == wanted]
    return of_experiment[-1:]


# -- budget -------------------------------------------------------------------


def over_budget(attempt: Attempt, budget: Mapping[str, Any]) -> list[str]:
    """What ``attempt`` spent beyond ``experiment.budget`` (empty: within it)."""
    used = attempt.used
    out = []
    for key, limit_key, unit in (
        ("steps", "max_steps", "steps"),
        ("hours", "max_hours", "h"),
        ("gpu_hours", "max_gpu_hours", "GPU-h"),
    ):
        limit = budget.get(limit_key)
        value = used.get(key)
        if _number(limit) and _number(value) and value > limit:  # a record says anything
            out.append(f"{key} {_num(value)} {unit} > budget {_num(limit)} {unit}")
    return out


def _number(x: Any) -> TypeGuard[int | float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _num(x: float | int) -> str:
    return str(x) if isinstance(x, int) else f"{x:.3g}"


def hours_between(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    try:
        return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds() / 3600
    except (ValueError, TypeError):
        return None


# -- experiment families and the sealed split --------------------------------


def parents(
    entries: Iterable[Entry], extra: Mapping[str, str | None] | None = None
) -> dict[str, str | None]:
    """experiment id -> parent id, from every record (and ``extra``)."""
    out: dict[str, str | None] = {}
    for e in entries:
        exp = e.record.get("experiment")
        if isinstance(exp, dict) and isinstance(exp.get("id"), str):
            parent = exp.get("parent")
            if exp["id"] not in out or out[exp["id"]] is None:
                out[exp["id"]] = parent if isinstance(parent, str) else None
    out.update(extra or {})
    return out


def root_of(experiment: str, tree: Mapping[str, str | None]) -> str:
    seen = {experiment}
    while tree.get(experiment):
        experiment = str(tree[experiment])
        if experiment in seen:  # a cycle: stop where it closes
            break
        seen.add(experiment)
    return experiment


def family(experiment: str, tree: Mapping[str, str | None]) -> set[str]:
    """Every experiment sharing ``experiment``'s root: its ancestors, their
    descendants, and so siblings too (tuning across siblings uses the split
    as much as tuning along a chain)."""
    root = root_of(experiment, tree)
    ids = set(tree) | {experiment}
    return {e for e in ids if root_of(e, tree) == root}


@dataclass(frozen=True)
class SealedUse:
    use: str
    experiment: str | None
    split: str
    data_digest: str | None
    reason: str | None
    at: str
    record: str
    scored_by: str | None = None


def sealed_uses(entries: Sequence[Entry]) -> list[SealedUse]:
    """Every ``unseal`` recorded, with the record that scored it (if any)."""
    scored: dict[str, str] = {}
    for e in entries:
        sealed = e.record.get("sealed")
        if e.record.get("status") == "scored" and isinstance(sealed, dict):
            use = sealed.get("use")
            if isinstance(use, str):
                scored.setdefault(use, e.id)
    out = []
    for e in entries:
        sealed = e.record.get("sealed")
        if e.record.get("status") != "unsealed" or not isinstance(sealed, dict):
            continue
        exp = e.record.get("experiment")
        use = str(sealed.get("use", e.short))
        out.append(
            SealedUse(
                use=use,
                experiment=exp.get("id") if isinstance(exp, dict) else None,
                split=str(sealed.get("split", "")),
                data_digest=sealed.get("data_digest"),
                reason=e.record.get("reason"),
                at=e.at,
                record=e.id,
                scored_by=scored.get(use),
            )
        )
    return out


def family_uses(
    entries: Sequence[Entry],
    experiment: str,
    split: str,
    extra: Mapping[str, str | None] | None = None,
) -> list[SealedUse]:
    """The uses of ``split`` by ``experiment``'s family, oldest first."""
    members = family(experiment, parents(entries, extra))
    return [u for u in sealed_uses(entries) if u.split == split and u.experiment in members]
