"""Which backups ``ftmanifest prune`` keeps: restic's ``forget`` rules.

Layer: judging rooms - pure core (no I/O, no clock).  ``select`` judges every backup of
every group (experiment, kind) against the keep rules of its kind, as ``restic forget``
does a host's snapshots: newest first, ``keep_last`` keeps the N newest, ``keep_hourly``
... ``keep_yearly`` keep the newest backup of each of the last N hours/days/ISO
weeks/months/years (UTC) that have one, ``keep_within`` keeps every backup made within
the duration before ``now`` (restic measures from the newest backup, so one backup dated
years ahead by a fast clock put every other outside the window).  A backup dated after
``now`` (beyond ``CLOCK_SLACK``) is kept and takes no part: it fills no ``keep_last``
slot, is no group's newest, and pushes no other out of a bucket.  A backup is kept when
any rule keeps it, and the newest of a group is always kept.  "Newest" is by the precise
creation time, then the sequence number the metadata signs, then the id.  A group whose
kind has no rule at all is refused (``EmptyPolicyError``) rather than emptied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from ftmanifest.errors import RefusedError
from ftmanifest.manifest.retention import BackupRetention, KeepPolicy, subtract

NEWEST = "newest of its group"
FUTURE = "dated after now (kept, not counted)"
CLOCK_SLACK = timedelta(minutes=5)  # clocks of the machines that back up may differ this much


class EmptyPolicyError(RefusedError, ValueError):
    """The keep rules for a kind name no rule: prune would delete all but one."""

    reason = "empty-retention-policy"

    def __init__(self, kind: str) -> None:
        super().__init__(
            f"no keep rule for backups of kind {kind!r}: prune would remove all but the newest",
            loc=("security", "retention", "backups"),
            expected="at least one keep_* rule (default or under kinds." + kind + ")",
            observed="none",
            hint=f"set security.retention.backups (e.g. keep_daily: 7) or kinds.{kind}",
        )
        self.kind = kind


@dataclass(frozen=True)
class Item:
    """One backup as prune sees it."""

    backup_id: str
    group: tuple[str, str]  # (experiment id or "", kind)
    created: datetime  # timezone-aware, from the signed metadata (to the microsecond)
    sequence: int = 0  # the signed sequence number; 0 in older metadata

    def __post_init__(self) -> None:
        if self.created.utcoffset() is None:
            raise ValueError(f"backup {self.backup_id}: creation time has no time zone")


@dataclass(frozen=True)
class Decision:
    item: Item
    keep: bool
    reasons: tuple[str, ...]  # () when not kept


def policy_for(retention: BackupRetention | str, kind: str) -> KeepPolicy:
    """The rules for ``kind``: its ``kinds`` entry, else the default.

    A bare duration (``backups: 30d``) is ``keep_within`` for every kind.
    """
    if isinstance(retention, str):
        return KeepPolicy(keep_within=retention)
    return retention.policy(kind)


def is_empty(policy: KeepPolicy) -> bool:
    return policy.is_empty()


# (rule, label, bucket of a UTC time), in restic's order of reasons
_BUCKETS: tuple[tuple[str, str, Callable[[datetime], str]], ...] = (
    ("keep_hourly", "hourly", lambda t: t.strftime("%Y-%m-%dT%H")),
    ("keep_daily", "daily", lambda t: t.strftime("%Y-%m-%d")),
    ("keep_weekly", "weekly", lambda t: "{}-W{:02d}".format(*t.isocalendar()[:2])),
    ("keep_monthly", "monthly", lambda t: t.strftime("%Y-%m")),
    ("keep_yearly", "yearly", lambda t: f"{t.year:04d}"),
)


def _newest_first(items: Sequence[Item]) -> list[Item]:
    return sorted(items, key=lambda i: (i.created, i.sequence, i.backup_id), reverse=True)


def _judge(items: list[Item], policy: KeepPolicy, now: datetime | None) -> list[Decision]:
    """``items``: one group, newest first, none after ``now``."""
    reasons: list[list[str]] = [[] for _ in items]
    if policy.keep_last is not None:
        for r in reasons[: policy.keep_last]:
            r.append(f"last {policy.keep_last}")
    for rule, label, bucket_of in _BUCKETS:
        left = getattr(policy, rule)
        last: str | None = None
        for item, r in zip(items, reasons, strict=True):
            if not left:
                break
            bucket = bucket_of(item.created.astimezone(timezone.utc))
            if bucket != last:  # newest first: the first of a bucket is its newest
                r.append(f"{label} {bucket}")
                last = bucket
                left -= 1
    if policy.keep_within is not None and items:
        since = now if now is not None else items[0].created
        cutoff = subtract(since.astimezone(timezone.utc), policy.keep_within)
        for item, r in zip(items, reasons, strict=True):
            if item.created > cutoff:
                r.append(f"within {policy.keep_within}")
    if items:
        reasons[0].append(NEWEST)
    return [Decision(i, bool(r), tuple(r)) for i, r in zip(items, reasons, strict=True)]


def select(
    items: Sequence[Item],
    policy_of: Callable[[str], KeepPolicy],
    *,
    now: datetime | None = None,
) -> list[Decision]:
    """A decision for every item: grouped by ``group``, each group newest first.

    Ties in time are broken by ``sequence``, then ``backup_id``, so the result
    does not depend on the order of ``items``.  ``now`` (aware) is where
    ``keep_within`` is measured from and what is "from the future" (``None``:
    no clock; the newest of each group stands in for it, as in restic).
    ``policy_of(kind)`` gives the rules of a kind; an empty one raises
    ``EmptyPolicyError``; a repeated ``backup_id`` raises ``ValueError``.
    """
    seen: set[str] = set()
    groups: dict[tuple[str, str], list[Item]] = {}
    for item in items:
        if item.backup_id in seen:
            raise ValueError(f"backup id {item.backup_id!r} appears twice")
        seen.add(item.backup_id)
        groups.setdefault(item.group, []).append(item)
    out: list[Decision] = []
    for group in sorted(groups):
        policy = policy_of(group[1])
        if is_empty(policy):
            raise EmptyPolicyError(group[1])
        ordered = _newest_first(groups[group])
        ahead = [i for i in ordered if now is not None and i.created > now + CLOCK_SLACK]
        out += [Decision(i, True, (FUTURE,)) for i in ahead]
        out += _judge(ordered[len(ahead) :], policy, now)
    return out
