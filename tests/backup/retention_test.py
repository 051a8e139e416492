"""Which backups prune keeps: restic's ``forget`` rules, as a pure function."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ftmanifest.backup.retention import (
    FUTURE,
    NEWEST,
    Decision,
    EmptyPolicyError,
    Item,
    is_empty,
    policy_for,
    select,
)
from ftmanifest.errors import EXIT_REFUSED
from ftmanifest.manifest.retention import BACKUP_KINDS, BackupRetention, KeepPolicy

UTC = timezone.utc
GROUP = ("exp", "run")


def _items(*times: str, group: tuple[str, str] = GROUP) -> list[Item]:
    """One item per ISO time, named b1, b2... in the order given."""
    return [
        Item(f"b{n}", group, datetime.fromisoformat(t).replace(tzinfo=UTC))
        for n, t in enumerate(times, 1)
    ]


def _kept(decisions: list[Decision]) -> list[str]:
    return sorted(d.item.backup_id for d in decisions if d.keep)


def _run(items: list[Item], **rules: object) -> list[Decision]:
    policy = KeepPolicy.model_validate(rules)
    return select(items, lambda kind: policy)


# Eight days of backups, two on some days; b10 is the newest.
WEEK = _items(
    "2026-11-20T08:00",  # b1  Fri, ISO week 47
    "2026-11-21T08:00",  # b2  Sat
    "2026-11-22T09:00",  # b3  Sun (still week 47)
    "2026-11-22T23:30",  # b4  Sun, newest of the 22nd
    "2026-11-23T00:10",  # b5  Mon, ISO week 48
    "2026-11-25T10:00",  # b6  Wed
    "2026-11-25T10:30",  # b7  Wed (same hour)
    "2026-11-25T11:00",  # b8  Wed
    "2026-11-27T06:00",  # b9  Fri
    "2026-11-30T12:00",  # b10 Mon, ISO week 49
)


@pytest.mark.parametrize(
    ("rules", "kept"),
    [
        ({"keep_last": 1}, ["b10"]),
        ({"keep_last": 3}, ["b10", "b8", "b9"]),
        ({"keep_last": 50}, [f"b{n}" for n in range(1, 11)]),
        # newest of each of the last 4 days that have a backup: 30th, 27th, 25th, 23rd
        ({"keep_daily": 4}, ["b10", "b5", "b8", "b9"]),
        # the 22nd had two backups: the later one is kept
        ({"keep_daily": 5}, ["b10", "b4", "b5", "b8", "b9"]),
        ({"keep_hourly": 3}, ["b10", "b8", "b9"]),
        ({"keep_hourly": 4}, ["b10", "b7", "b8", "b9"]),  # 10:30 is the newest of 10:xx
        # ISO weeks 49, 48, 47: Sunday 22nd 23:30 and Monday 23rd 00:10 fall in two weeks
        ({"keep_weekly": 3}, ["b10", "b4", "b9"]),
        ({"keep_monthly": 2}, ["b10"]),  # one month only
        ({"keep_yearly": 5}, ["b10"]),
        # within 3d of the newest (Nov 30 12:00): strictly after Nov 27 12:00
        ({"keep_within": "3d"}, ["b10"]),
        ({"keep_within": "3d6h"}, ["b10"]),  # b9 is exactly at the cut: not after it
        ({"keep_within": "3d7h"}, ["b10", "b9"]),
        ({"keep_within": "1w"}, ["b10", "b6", "b7", "b8", "b9"]),
        ({"keep_last": 2, "keep_daily": 3, "keep_weekly": 3}, ["b10", "b4", "b8", "b9"]),
        ({"keep_within": "1w", "keep_weekly": 2}, ["b10", "b6", "b7", "b8", "b9"]),
    ],
)
def test_rules_over_a_week(rules: dict[str, object], kept: list[str]) -> None:
    assert _kept(_run(WEEK, **rules)) == sorted(kept)


def test_restic_forum_example_keep_daily_4() -> None:
    # forum.restic.net "Keep vs keep-within": a1..a5, --keep-daily 4 keeps a1, a3, a4, a5
    items = _items(
        "2023-05-01T08:00",
        "2023-05-02T08:00",
        "2023-05-02T11:00",
        "2023-05-04T09:00",
        "2023-05-05T10:00",
    )
    assert _kept(_run(items, keep_daily=4)) == ["b1", "b3", "b4", "b5"]


def test_monthly_and_yearly_across_years() -> None:
    items = _items(
        "2024-01-31T10:00",  # b1
        "2024-12-01T00:00",  # b2
        "2024-12-31T23:59",  # b3 newest of 2024 and of Dec 2024
        "2025-02-28T10:00",  # b4
        "2025-03-01T00:00",  # b5
        "2025-03-31T22:00",  # b6 newest of Mar 2025
        "2026-01-01T00:00",  # b7 newest
    )
    assert _kept(_run(items, keep_monthly=3)) == ["b4", "b6", "b7"]
    assert _kept(_run(items, keep_yearly=3)) == ["b3", "b6", "b7"]
    assert _kept(_run(items, keep_yearly=1, keep_monthly=2)) == ["b6", "b7"]


def test_buckets_are_utc_whatever_zone_the_time_was_given_in() -> None:
    plus2 = timezone(timedelta(hours=2))
    items = [  # both on Nov 30 in UTC, though the first reads Dec 1 in +02:00
        Item("late", GROUP, datetime(2026, 12, 1, 1, 0, tzinfo=plus2)),
        Item("early", GROUP, datetime(2026, 11, 30, 9, 0, tzinfo=UTC)),
        Item("old", GROUP, datetime(2026, 11, 29, 9, 0, tzinfo=UTC)),
    ]
    decisions = _run(items, keep_daily=2)
    assert _kept(decisions) == ["late", "old"]
    assert decisions[0].reasons == ("daily 2026-11-30", NEWEST)


def test_reasons_name_every_rule_that_keeps_a_backup() -> None:
    d = {x.item.backup_id: x for x in _run(WEEK, keep_last=2, keep_daily=3, keep_within="1w")}
    assert d["b10"].reasons == ("last 2", "daily 2026-11-30", "within 1w", NEWEST)
    assert d["b9"].reasons == ("last 2", "daily 2026-11-27", "within 1w")
    assert d["b7"].reasons == ("within 1w",)
    assert d["b1"] == Decision(WEEK[0], keep=False, reasons=())


def test_weekly_reason_names_the_iso_week() -> None:
    reasons = [r for x in _run(WEEK, keep_weekly=3) for r in x.reasons]
    assert {"weekly 2026-W49", "weekly 2026-W48", "weekly 2026-W47"} <= set(reasons)


def test_newest_is_kept_even_when_no_rule_would_keep_it() -> None:
    # every non-empty rule keeps the newest anyway (restic's too); the reason
    # says that prune would keep it regardless of the rules
    (only,) = _run(_items("2026-11-30T12:00"), keep_monthly=1)
    assert only.keep and only.reasons == ("monthly 2026-11", NEWEST)


def test_ties_are_broken_by_backup_id() -> None:
    t = "2026-11-30T12:00"
    items = _items(t, t, t)
    decisions = _run(items, keep_last=1)
    assert [x.item.backup_id for x in decisions] == ["b3", "b2", "b1"]
    assert _kept(decisions) == ["b3"]


def test_groups_are_judged_independently_and_by_their_kind() -> None:
    retention = BackupRetention(keep_last=1, kinds={"data": KeepPolicy(keep_last=2)})
    items = (
        _items("2026-11-01", "2026-11-02", "2026-11-03", group=("exp", "run"))
        + _items("2026-11-04", "2026-11-05", "2026-11-06", group=("exp", "data"))
        + _items("2026-10-01", "2026-10-02", group=("other", "run"))
    )
    items = [Item(f"{i.group[0]}-{i.group[1]}-{i.backup_id}", i.group, i.created) for i in items]
    decisions = select(items, lambda kind: policy_for(retention, kind))
    assert _kept(decisions) == ["exp-data-b2", "exp-data-b3", "exp-run-b3", "other-run-b2"]
    assert [x.item.group for x in decisions] == sorted(x.item.group for x in decisions)


def test_policy_for_a_bare_duration_and_an_override() -> None:
    assert policy_for("30d", "logs") == KeepPolicy(keep_within="30d")
    retention = BackupRetention(keep_daily=7, kinds={"adapter": KeepPolicy(keep_yearly=3)})
    assert policy_for(retention, "adapter") == KeepPolicy(keep_yearly=3)
    assert policy_for(retention, "logs") == KeepPolicy(keep_daily=7)


def test_an_empty_policy_is_refused_naming_the_kind() -> None:
    retention = BackupRetention(keep_daily=7, kinds={"checkpoint": KeepPolicy()})
    assert is_empty(policy_for(retention, "checkpoint"))
    items = _items("2026-11-30", group=("exp", "checkpoint"))
    with pytest.raises(EmptyPolicyError) as info:
        select(items, lambda kind: policy_for(retention, kind))
    assert isinstance(info.value, ValueError) and info.value.kind == "checkpoint"
    assert "'checkpoint'" in str(info.value) and info.value.exit_code == EXIT_REFUSED
    # no items of that kind: nothing to refuse
    assert select(_items("2026-11-30"), lambda kind: policy_for(retention, kind))[0].keep


def test_bad_items_are_refused() -> None:
    with pytest.raises(ValueError, match="time zone"):
        Item("b1", GROUP, datetime(2026, 11, 30))
    twice = _items("2026-11-30", "2026-11-29")
    with pytest.raises(ValueError, match="twice"):
        _run([twice[0], Item("b1", GROUP, twice[1].created)], keep_last=1)


# --- properties -----------------------------------------------------------

_TIMES = st.datetimes(datetime(2020, 1, 1), datetime(2027, 12, 31), timezones=st.just(UTC))


@st.composite
def _backups(draw: st.DrawFn) -> list[Item]:
    groups = draw(
        st.lists(
            st.tuples(st.sampled_from(["", "a", "b"]), st.sampled_from(BACKUP_KINDS)),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    # coarse times on purpose: many share an hour, a day, a second
    times = st.one_of(_TIMES, _TIMES.map(lambda t: t.replace(minute=0, second=0, microsecond=0)))
    raw = draw(st.lists(st.tuples(st.sampled_from(groups), times), min_size=1, max_size=30))
    return [Item(f"id{n:02d}", g, t) for n, (g, t) in enumerate(raw)]


_N = st.none() | st.integers(1, 6)
_POLICIES = st.builds(
    KeepPolicy,
    keep_last=_N,
    keep_hourly=_N,
    keep_daily=_N,
    keep_weekly=_N,
    keep_monthly=_N,
    keep_yearly=_N,
    keep_within=st.none() | st.sampled_from(["1h", "2d", "1w", "1m", "1y", "1y2m3d4h"]),
).filter(lambda p: not p.is_empty())


@st.composite
def _retentions(draw: st.DrawFn) -> BackupRetention:
    default = draw(_POLICIES)
    kinds = draw(st.dictionaries(st.sampled_from(BACKUP_KINDS), _POLICIES, max_size=3))
    return BackupRetention(**default.model_dump(), kinds=kinds)


@given(_backups(), _retentions())
def test_newest_of_each_group_is_always_kept(items: list[Item], r: BackupRetention) -> None:
    decisions = select(items, lambda kind: policy_for(r, kind))
    newest = {}
    for i in sorted(items, key=lambda i: (i.created, i.backup_id)):
        newest[i.group] = i.backup_id
    kept = {d.item.backup_id: d for d in decisions if d.keep}
    for backup_id in newest.values():
        assert NEWEST in kept[backup_id].reasons


@given(_backups(), _retentions())
def test_kept_items_have_reasons_and_dropped_ones_none(
    items: list[Item], r: BackupRetention
) -> None:
    decisions = select(items, lambda kind: policy_for(r, kind))
    assert sorted(d.item.backup_id for d in decisions) == sorted(i.backup_id for i in items)
    for d in decisions:
        assert bool(d.reasons) == d.keep


@given(_backups(), _retentions())
def test_select_is_idempotent(items: list[Item], r: BackupRetention) -> None:
    kept = [d.item for d in select(items, lambda kind: policy_for(r, kind)) if d.keep]
    again = select(kept, lambda kind: policy_for(r, kind))
    assert all(d.keep for d in again)


@given(_backups(), _retentions(), st.randoms(use_true_random=False))
def test_result_does_not_depend_on_input_order(
    items: list[Item], r: BackupRetention, rnd: random.Random
) -> None:
    shuffled = list(items)
    rnd.shuffle(shuffled)
    assert select(shuffled, lambda kind: policy_for(r, kind)) == select(
        items, lambda kind: policy_for(r, kind)
    )


def test_weekly_uses_iso_weeks_across_the_new_year() -> None:
    # Thu 2026-12-31 and Fri 2027-01-01 are both in ISO week 2026-W53
    items = _items("2026-12-24T12:00", "2026-12-31T12:00", "2027-01-01T12:00")
    decisions = _run(items, keep_weekly=2)
    assert _kept(decisions) == ["b1", "b3"]
    assert decisions[0].reasons == ("weekly 2026-W53", NEWEST)
    assert decisions[2].reasons == ("weekly 2026-W52",)


def test_keep_within_is_measured_from_now_and_the_future_takes_no_part() -> None:
    # one backup dated two years ahead must not push the rest out
    items = _items("2026-11-01T00:00", "2026-11-20T00:00", "2028-11-20T00:00")
    now = datetime(2026, 11, 30, tzinfo=UTC)
    d = {x.item.backup_id: x for x in select(items, lambda kind: KeepPolicy(keep_within="15d"),
                                             now=now)}  # fmt: skip
    assert d["b3"].keep and d["b3"].reasons == (FUTURE,)
    assert d["b2"].keep and NEWEST in d["b2"].reasons and "within 15d" in d["b2"].reasons
    assert not d["b1"].keep
    slack = select(_items("2026-11-30T00:04"), lambda kind: KeepPolicy(keep_last=1), now=now)
    assert slack[0].reasons == ("last 1", NEWEST)  # within the clock slack: counted


def test_equal_times_are_ordered_by_the_sequence_not_the_id() -> None:
    t = datetime(2026, 11, 30, 12, 0, 0, 500, tzinfo=UTC)
    items = [Item("a-newer", GROUP, t, sequence=2), Item("z-older", GROUP, t, sequence=1)]
    assert _kept(select(items, lambda kind: KeepPolicy(keep_last=1))) == ["a-newer"]
