"""The ledger judged as a whole: links, order, times, signatures and known heads.

Layer: judging rooms - pure core (the records ``store`` read in, problems out).  Each
record must link only to records that are there, sit one deeper than the deepest it
links to, be no older than those, and not be dated in the future; a signed one must be
signed over its own id by a trusted key.

What hash links cannot show is the removal of the newest records (nothing links to
them yet) or a rewrite of a whole chain.  Signed records (the project's signing key,
``FTMANIFEST_LEDGER_KEY``) and ``ledger check --head ID`` (an id known from a report or
a handoff) cover those.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from ftmanifest.errors import FtManifestError
from ftmanifest.ledger.recordfile import (
    DIGEST_RE,
    FORMAT,
    FUTURE_SKEW,
    HEAD_RE,
    KEY_ENV,
    MIN_HEAD_HEX,
    PREDICATE,
    Contents,
    Entry,
    Problem,
    is_future,
    parse_at,
)
from ftmanifest.manifest.canonical import canonical_json
from ftmanifest.signing.attest import verify_statement


def judge(
    contents: Contents,
    root: str,
    *,
    trust: Any = None,
    require_signed: bool = False,
    heads: Sequence[str] = (),
    at: datetime | None = None,
) -> list[Problem]:
    """Every problem of the ledger read into ``contents`` (from the folder ``root``):
    its files', each record's links, time and signature, and each known head that is
    gone (records dated after ``at``, default now, plus ``FUTURE_SKEW`` are problems)."""
    problems = list(contents.problems)
    by_id = contents.by_id()
    when = at if at is not None else datetime.now(timezone.utc)
    for entry in contents.entries:
        problems += _links(entry, by_id, when)
        problems += signature_problems(entry, trust, require_signed)
    for wanted in heads:
        problems += _head_problems(contents, root, wanted)
    return problems


def _head_problems(contents: Contents, root: str, wanted: str) -> Iterator[Problem]:
    bare = wanted.strip().lower().removeprefix("sha256:")
    if not HEAD_RE.fullmatch(bare):  # "" or "a" would match any record: no check at all
        yield Problem(
            "ledger.head-missing",
            root,
            "a known head must be a record id or a prefix of one",
            expected=f"at least {MIN_HEAD_HEX} hex digits (sha256:... or bare)",
            observed=repr(wanted)[:80],
            hint="copy the id from `ledger check` or the report that named it",
        )
        return
    if not any(e.id.removeprefix("sha256:").startswith(bare) for e in contents.entries):
        yield Problem(
            "ledger.head-missing",
            root,
            "a record known to be in the ledger is gone",
            expected=wanted,
            observed="not found",
            hint="the newest records were removed or the ledger was rewritten; "
            "restore it from version control",
        )


def _links(entry: Entry, by_id: Mapping[str, Entry], now: datetime) -> Iterator[Problem]:
    rec = entry.record
    where = str(entry.file)
    if rec.get("format") != FORMAT:
        yield Problem("ledger.format", where, "unknown record format",
                      expected=str(FORMAT), observed=repr(rec.get("format")))  # fmt: skip
    prev = rec.get("prev")
    if not isinstance(prev, list) or not all(isinstance(p, str) and DIGEST_RE.match(p)
                                             for p in prev):  # fmt: skip
        yield Problem("ledger.bad-link", where, "'prev' is not a list of record ids",
                      observed=repr(prev)[:80])  # fmt: skip
        return
    if prev != sorted(set(prev)):
        yield Problem("ledger.bad-link", where, "'prev' is not sorted and unique")
    parents = []
    for p in prev:
        if p in by_id:
            parents.append(by_id[p])
        else:
            yield Problem(
                "ledger.record-missing",
                where,
                "links to a record that is not in the ledger: a record was removed",
                expected=p,
                observed="no such record",
                hint="restore the removed record from version control",
            )
    want = 1 + max((p.seq for p in parents), default=0)
    if len(parents) == len(prev) and rec.get("seq") != want:
        yield Problem(
            "ledger.order",
            where,
            "the record's position does not follow from its links: reordered",
            expected=f"seq {want}",
            observed=f"seq {rec.get('seq')!r}",
        )
    when = parse_at(entry.at)
    if when is None:
        yield Problem("ledger.order", where, "the record has no valid time",
                      expected="ISO 8601 with a zone", observed=repr(entry.at)[:60])  # fmt: skip
        return
    if is_future(entry.at, now):
        yield Problem(
            "ledger.future",
            where,
            "the record is dated in the future: the clock of the machine that wrote it runs ahead",
            expected=f"at or before {(now + FUTURE_SKEW).isoformat(timespec='seconds')}",
            observed=entry.at,
            hint="set that machine's clock right (NTP); do not trust the record's time "
            "(records written after it keep their own)",
        )
    for parent in parents:
        before = parse_at(parent.at)
        if before is not None and when < before and not is_future(parent.at, now):
            yield Problem(
                "ledger.order",
                where,
                "the record is older than a record it follows: reordered or backdated",
                expected=f"at or after {parent.at}",
                observed=entry.at,
            )


def signature_problems(entry: Entry, trust: Any, require_signed: bool) -> Iterator[Problem]:
    """What is wrong with ``entry``'s signature judged by ``trust`` (a
    ``TrustStore``; None: only whether one is there when ``require_signed``)."""
    where = str(entry.file)
    if entry.signature is None:
        if require_signed:
            yield Problem(
                "ledger.unsigned",
                where,
                "the record is not signed",
                expected="a signature by a trusted key",
                observed="none",
                hint=f"set ${KEY_ENV} to the signing key of whoever runs experiments",
            )
        return
    if trust is None:
        return

    try:
        # the envelope's one byte form (as signed), not json.dumps': the record
        # file stores it as a JSON object, re-indented with the record
        raw = canonical_json(entry.signature) + b"\n"
    except (ValueError, RecursionError):
        yield Problem("ledger.bad-signature", where, "the signature envelope is not JSON data")
        return
    try:
        verified = verify_statement(raw, trust=trust, expected_predicate_type=PREDICATE,
                                    subject_count=1, path=where)  # fmt: skip
    except FtManifestError as exc:
        yield Problem("ledger.bad-signature", where, exc.message,
                      expected=exc.expected, observed=exc.observed)  # fmt: skip
        return
    subject = verified.subjects[0]
    if subject.digest.get("sha256") != entry.id.removeprefix("sha256:"):
        yield Problem(
            "ledger.bad-signature",
            where,
            "the signature is over another record",
            expected=entry.id,
            observed="sha256:" + str(subject.digest.get("sha256")),
        )
