"""Retention periods and backup keep rules: ``security.retention``.

Layer: pure core - manifest (pure).  A duration is restic's combined form (``30d``,
``1y6m``, ``1y2m3d4h``); it stays a string in the model so the canonical form
of a manifest (what is signed) is the text its author wrote.  ``parse_duration``
and ``subtract`` give it meaning.  ``BackupRetention`` holds the keep rules
``ftmanifest prune`` applies (``ftmanifest.backup.retention``).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Literal

from pydantic import AfterValidator, Discriminator, Field, Tag, WithJsonSchema

from ftmanifest.manifest.types import PositiveInt, Strict

_N = r"(0|[1-9][0-9]*)"
# Units in this order, each at most once; decimal integers without leading
# zeros; the look-ahead asks for one non-zero digit, so the total is above zero.
DURATION_PATTERN = rf"^(?=.*[1-9])(?:{_N}y)?(?:{_N}m)?(?:{_N}w)?(?:{_N}d)?(?:{_N}h)?$"
_DURATION = re.compile(DURATION_PATTERN)
DURATION_FORMAT = (
    "a duration such as 30d, 12h, 2w, 6m, 1y or 1y6m: whole numbers with units "
    "y (years), m (months), w (weeks), d (days), h (hours), in that order, "
    "each at most once, together above zero"
)

BackupKind = Literal["data", "checkpoint", "logs", "adapter", "run"]
BACKUP_KINDS: tuple[BackupKind, ...] = ("data", "checkpoint", "logs", "adapter", "run")


@dataclass(frozen=True)
class DurationParts:
    """A parsed duration; weeks are counted as 7 days."""

    years: int = 0
    months: int = 0
    days: int = 0
    hours: int = 0


def _check_duration(value: str) -> str:
    if not _DURATION.fullmatch(value):
        raise ValueError(f"expected {DURATION_FORMAT}; got {value!r}")
    return value


Duration = Annotated[
    str,
    AfterValidator(_check_duration),
    WithJsonSchema(
        {"type": "string", "pattern": DURATION_PATTERN, "description": DURATION_FORMAT.capitalize()}
    ),
]


def parse_duration(text: str) -> DurationParts:
    """The parts of ``text``; ``ValueError`` when it is not a duration."""
    match = _DURATION.fullmatch(text)
    if not match:
        raise ValueError(f"expected {DURATION_FORMAT}; got {text!r}")
    y, m, w, d, h = (int(g) if g else 0 for g in match.groups())
    return DurationParts(years=y, months=m, days=7 * w + d, hours=h)


def format_duration(parts: DurationParts) -> str:
    """The shortest text for ``parts`` (days are never written as weeks)."""
    units = ((parts.years, "y"), (parts.months, "m"), (parts.days, "d"), (parts.hours, "h"))
    if any(n < 0 for n, _ in units) or not any(n for n, _ in units):
        raise ValueError(f"a duration is above zero and has no negative part: {parts}")
    return "".join(f"{n}{unit}" for n, unit in units if n)


def subtract(t: datetime, d: str | DurationParts) -> datetime:
    """``t`` minus the duration ``d``, with calendar years and months.

    As restic's ``AddDate(-years, -months, -days)`` then minus the hours, except
    for a day of the month the target month lacks: Go rolls it over into the
    next month (Mar 31 - 1m = Mar 3), we clamp it to the target month's last
    day (Mar 31 - 1m = Feb 29 in 2024, Feb 28 in 2025; Feb 29 2024 - 1y =
    Feb 28 2023), so "a month before" never lands in the same month.  Days and
    hours are then taken off as 24 h and 1 h (exact in UTC, the zone prune
    uses).  A result before year 1 saturates at ``datetime.min`` (in ``t``'s
    zone): everything is within so long a duration.
    """
    parts = parse_duration(d) if isinstance(d, str) else d
    floor = datetime.min.replace(tzinfo=t.tzinfo)
    month_index = t.year * 12 + (t.month - 1) - (parts.years * 12 + parts.months)
    year, month = divmod(month_index, 12)
    if year < 1:
        return floor
    month += 1
    day = min(t.day, calendar.monthrange(year, month)[1])
    try:
        return t.replace(year=year, month=month, day=day) - timedelta(
            days=parts.days, hours=parts.hours
        )
    except OverflowError:
        return floor


class KeepPolicy(Strict):
    """Which backups of one kind ``prune`` keeps (restic's ``forget`` rules)."""

    keep_last: PositiveInt | None = Field(default=None, description="Keep the N newest backups.")
    keep_hourly: PositiveInt | None = Field(
        default=None, description="Keep the newest backup of each of the last N hours (UTC)."
    )
    keep_daily: PositiveInt | None = Field(
        default=None, description="Keep the newest backup of each of the last N days (UTC)."
    )
    keep_weekly: PositiveInt | None = Field(
        default=None, description="Keep the newest backup of each of the last N ISO weeks."
    )
    keep_monthly: PositiveInt | None = Field(
        default=None, description="Keep the newest backup of each of the last N months."
    )
    keep_yearly: PositiveInt | None = Field(
        default=None, description="Keep the newest backup of each of the last N years."
    )
    keep_within: Duration | None = Field(
        default=None,
        description="Keep every backup made within this duration of the newest one, e.g. 30d.",
    )

    def is_empty(self) -> bool:
        """No keep rule at all (``prune`` refuses such a policy)."""
        return all(
            getattr(self, name) is None
            for name in (
                "keep_last",
                "keep_hourly",
                "keep_daily",
                "keep_weekly",
                "keep_monthly",
                "keep_yearly",
                "keep_within",
            )
        )


class BackupRetention(KeepPolicy):
    """Keep rules for encrypted backups: a default and per-kind replacements."""

    kinds: dict[BackupKind, KeepPolicy] = Field(
        default_factory=dict,
        description="Per backup kind (data, checkpoint, logs, adapter, run), a policy that "
        "replaces the default rules above for that kind.",
    )

    def policy(self, kind: str) -> KeepPolicy:
        """The rules for ``kind``: its entry in ``kinds``, else the default."""
        for name, override in self.kinds.items():
            if name == kind:
                return override
        return KeepPolicy.model_validate(self.model_dump(exclude={"kinds"}, exclude_none=True))

    def is_unset(self) -> bool:
        """Neither a default rule nor a non-empty per-kind rule: kept forever."""
        return self.is_empty() and all(p.is_empty() for p in self.kinds.values())


def _backups_shape(value: object) -> str:
    return "duration" if isinstance(value, str) else "rules"


# A string is a bare duration, anything else keep rules: an error names the
# one shape the value was meant to have, not both.
BackupsField = Annotated[
    Annotated[BackupRetention, Tag("rules")] | Annotated[Duration, Tag("duration")],
    Discriminator(_backups_shape),
]


def backup_retention(value: BackupRetention | str | None) -> BackupRetention | None:
    """``security.retention.backups`` as keep rules; a bare duration is ``keep_within``."""
    if isinstance(value, str):
        return BackupRetention(keep_within=value)
    return value
