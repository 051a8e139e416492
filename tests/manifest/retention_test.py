"""``security.retention``: durations, calendar subtraction and backup keep rules."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from ftmanifest.manifest.data import Retention, Security
from ftmanifest.manifest.model import Manifest
from ftmanifest.manifest.retention import (
    BackupRetention,
    DurationParts,
    KeepPolicy,
    format_duration,
    parse_duration,
    subtract,
)

UTC = timezone.utc


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("30d", DurationParts(days=30)),
        ("12h", DurationParts(hours=12)),
        ("2w", DurationParts(days=14)),
        ("6m", DurationParts(months=6)),
        ("1y", DurationParts(years=1)),
        ("1y6m", DurationParts(years=1, months=6)),
        ("1y2m3d4h", DurationParts(1, 2, 3, 4)),
        ("1w3d", DurationParts(days=10)),
        ("1y0m", DurationParts(years=1)),
        ("0y1h", DurationParts(hours=1)),
        ("365d", DurationParts(days=365)),
    ],
)
def test_valid_durations(text: str, parts: DurationParts) -> None:
    assert parse_duration(text) == parts
    assert Retention(logs=text).logs == text  # kept as written


@pytest.mark.parametrize(
    "text",
    [
        "",  # nothing
        "0d",  # total zero
        "0y0m0w0d0h",
        "30",  # no unit
        "d",  # no number
        "30x",  # unknown unit
        "30D",  # units are lower case
        "3d2y",  # out of order
        "1d1d",  # unit twice
        "1y 6m",  # space
        " 30d",
        "30d\n",
        "-1d",  # negative
        "1.5d",  # not whole
        "01d",  # leading zero
        "30min",
        "30s",  # seconds are not a unit
    ],
)
def test_invalid_durations_are_refused_with_field_format_and_value(text: str) -> None:
    with pytest.raises(ValueError, match="expected a duration"):
        parse_duration(text)
    with pytest.raises(ValidationError) as info:
        Retention.model_validate({"raw_data": text})
    (error,) = info.value.errors()
    assert error["loc"] == ("raw_data",)
    assert "units y (years), m (months)" in error["msg"] and repr(text) in error["msg"]


def test_a_duration_is_a_string_in_the_schema_and_dump() -> None:
    with pytest.raises(ValidationError):
        Retention.model_validate({"logs": 30})
    r = Retention.model_validate({"logs": "1y6m", "backups": "365d"})
    assert r.model_dump(mode="json", exclude_unset=True) == {"logs": "1y6m", "backups": "365d"}


def _t(year: int, month: int, day: int, hour: int = 0) -> datetime:
    return datetime(year, month, day, hour, tzinfo=UTC)


@pytest.mark.parametrize(
    ("start", "duration", "expected"),
    [
        (_t(2024, 3, 31), "1m", _t(2024, 2, 29)),  # clamped to leap February
        (_t(2025, 3, 31), "1m", _t(2025, 2, 28)),
        (_t(2024, 2, 29), "1y", _t(2023, 2, 28)),
        (_t(2028, 2, 29), "4y", _t(2024, 2, 29)),
        (_t(2026, 1, 15), "2m", _t(2025, 11, 15)),  # across a year
        (_t(2026, 5, 31), "1y3m", _t(2025, 2, 28)),
        (_t(2026, 3, 31), "1m1d", _t(2026, 2, 27)),  # months first, then days
        (_t(2026, 3, 1, 2), "3h", _t(2026, 2, 28, 23)),
        (_t(2026, 11, 30, 12), "2w", _t(2026, 11, 16, 12)),
        (_t(2026, 11, 30, 12), "1y2m3d4h", _t(2025, 9, 27, 8)),
        (_t(2026, 1, 1), "2026y", datetime.min.replace(tzinfo=UTC)),  # saturates
        (_t(2026, 1, 1), "99999999999999999999d", datetime.min.replace(tzinfo=UTC)),
    ],
)
def test_subtract_is_calendar_arithmetic(
    start: datetime, duration: str, expected: datetime
) -> None:
    assert subtract(start, duration) == expected
    assert subtract(start, parse_duration(duration)) == expected


def test_subtract_keeps_the_time_zone_and_time_of_day() -> None:
    tz = timezone(timedelta(hours=2))
    got = subtract(datetime(2026, 3, 31, 9, 30, tzinfo=tz), "1m")
    assert got == datetime(2026, 2, 28, 9, 30, tzinfo=tz) and got.tzinfo is tz


def test_bare_backup_duration_means_keep_within_and_stays_a_string() -> None:
    r = Retention.model_validate({"backups": "30d"}, strict=True)
    assert r.backups == "30d"
    policy = r.backup_policy()
    assert policy == BackupRetention(keep_within="30d")
    assert policy.policy("run") == KeepPolicy(keep_within="30d")


def test_kinds_replace_the_default_for_their_kind_only() -> None:
    data = {"keep_daily": 7, "keep_last": 2, "kinds": {"data": {"keep_monthly": 12}}}
    policy = Retention.model_validate({"backups": data}, strict=True).backup_policy()
    assert policy is not None
    assert policy.policy("data") == KeepPolicy(keep_monthly=12)  # nothing inherited
    assert policy.policy("run") == KeepPolicy(keep_daily=7, keep_last=2)


@pytest.mark.parametrize(
    "backups",
    [
        {"keep_last": 3, "keep_forever": True},  # extra key
        {"kinds": {"data": {"keep_last": 1, "kinds": {}}}},  # no nesting
        {"kinds": {"dataset": {"keep_last": 1}}},  # unknown kind
        {"keep_last": 0},  # at least one
        {"keep_daily": -1},
        {"keep_daily": "7"},
        {"keep_within": "0d"},
        {"kinds": {"run": {"keep_within": "7 days"}}},
        "forever",
        7,
    ],
)
def test_bad_backup_rules_are_refused(backups: object) -> None:
    with pytest.raises(ValidationError):
        Retention.model_validate({"backups": backups}, strict=True)


def test_empty_and_unset_rules() -> None:
    assert KeepPolicy().is_empty()
    assert not KeepPolicy(keep_yearly=1).is_empty()
    assert BackupRetention().is_unset()
    assert BackupRetention(kinds={"data": KeepPolicy()}).is_unset()
    only_data = BackupRetention(kinds={"data": KeepPolicy(keep_last=1)})
    assert only_data.is_empty() and not only_data.is_unset()


def test_an_empty_rule_set_counts_as_unset_in_the_audit() -> None:
    from ftmanifest.results.audit_rights import _retention_findings

    def rules(backups: object, recipients: list[str]) -> set[str]:
        security = Security.model_validate(
            {"retention": {"backups": backups}, "backup_recipients": recipients}
        )
        manifest = Manifest.model_validate(
            {"ftmanifest": 1, "experiment": {"id": "x"}, "model": {"repo": "a/b"}}
        ).model_copy(update={"security": security})
        return {f.rule for f in _retention_findings(manifest)}

    assert rules({}, ["age1x"]) == {"audit.backup-retention-missing"}
    assert rules({}, []) == set()
    assert rules("30d", []) == {"audit.backup-recipients-missing"}
    assert rules({"keep_daily": 7}, ["age1x"]) == set()


_PARTS = st.builds(
    DurationParts,
    years=st.integers(0, 300),
    months=st.integers(0, 40),
    days=st.integers(0, 4000),
    hours=st.integers(0, 10**6),
).filter(lambda p: p.years or p.months or p.days or p.hours)


@given(_PARTS)
def test_format_then_parse_round_trips(parts: DurationParts) -> None:
    text = format_duration(parts)
    assert parse_duration(text) == parts
    assert Retention(checkpoints=text).checkpoints == text


@given(_PARTS, st.integers(0, 50))
def test_parse_then_format_is_canonical(parts: DurationParts, weeks: int) -> None:
    # a text with weeks and zero parts parses to the same value as its canonical form
    text = (
        f"{parts.years}y{parts.months}m{weeks}w{parts.days}d{parts.hours}h"
        if weeks
        else format_duration(parts)
    )
    canonical = format_duration(parse_duration(text))
    assert parse_duration(canonical) == parse_duration(text)
    assert format_duration(parse_duration(canonical)) == canonical


@given(st.datetimes(min_value=datetime(1000, 1, 1), timezones=st.just(UTC)), _PARTS)
def test_subtract_never_moves_forward(t: datetime, parts: DurationParts) -> None:
    assert subtract(t, parts) < t
