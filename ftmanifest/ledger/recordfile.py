"""One ledger record as a file: its form, id, name, time and signature.

Layer: judging rooms - pure core (no I/O: ``store`` reads and writes the files,
``judge`` weighs them).  A record is a JSON object; its id is ``sha256:`` of its
canonical JSON (RFC 8785), and it names the ledger's heads when it was written
(``prev``: the records no other record links to yet) and its depth (``seq``: one more
than the deepest of those).  Its file is ``<at>-<first 20 hex of its id>.json`` holding
``{"record": ..., "signature": ...}``; the signature, when there is one, is a DSSE
statement of type ``PREDICATE`` over the record's id.  ``Entry`` is one record read
back, ``Contents`` a whole folder's, ``Problem`` what is wrong with a file.

A record's time is the writer's clock (``now``); one dated beyond ``FUTURE_SKEW`` is
in the future (``is_future``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ftmanifest.findings import Finding
from ftmanifest.manifest.canonical import canonical_json, sha256_digest
from ftmanifest.signing.attest import sign_statement
from ftmanifest.signing.intoto import Subject

FORMAT = 1
PREDICATE = "https://ftmanifest.dev/ledger-record/v1"
KEY_ENV = "FTMANIFEST_LEDGER_KEY"
MAX_RECORD_BYTES = 4 << 20  # a record carries at most a manifest's body: 4 MiB is plenty
MAX_RECORDS = 1_000_000
NAME_RE = re.compile(r"^(\d{8}T\d{6}\.\d{6}Z)-([0-9a-f]{20})\.json$")
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
MIN_HEAD_HEX = 12  # a known head given as a prefix: long enough to name one record
HEAD_RE = re.compile(rf"[0-9a-f]{{{MIN_HEAD_HEX},64}}")
FUTURE_SKEW = timedelta(minutes=5)  # clocks of one team's machines agree this well (NTP)


@dataclass(frozen=True)
class Problem:
    """Something wrong with the ledger's files: ``ledger check`` prints these."""

    rule: str
    file: str
    message: str
    expected: str | None = None
    observed: str | None = None
    hint: str | None = None

    def finding(self) -> Finding:
        """The same as the record every command's JSON lists under ``findings``."""
        return Finding(kind="ledger", rule=self.rule, message=self.message, path=self.file,
                       expected=self.expected, observed=self.observed, hint=self.hint)  # fmt: skip


@dataclass(frozen=True)
class Entry:
    """One record read back: its id, body, file and signature envelope (if any)."""

    id: str
    record: dict[str, Any]
    file: Path
    signature: dict[str, Any] | None = None

    @property
    def seq(self) -> int:
        value = self.record.get("seq")
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    @property
    def prev(self) -> list[str]:
        value = self.record.get("prev")
        return [p for p in value if isinstance(p, str)] if isinstance(value, list) else []

    @property
    def at(self) -> str:
        return str(self.record.get("at", ""))

    @property
    def short(self) -> str:
        return self.id.removeprefix("sha256:")[:12]


@dataclass
class Contents:
    """Everything read from a ledger folder: good entries (in order) and problems."""

    entries: list[Entry] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def by_id(self) -> dict[str, Entry]:
        return {e.id: e for e in self.entries}

    def heads(self) -> list[Entry]:
        linked = {p for e in self.entries for p in e.prev}
        return [e for e in self.entries if e.id not in linked]


def record_id(record: Mapping[str, Any]) -> str:
    return sha256_digest(canonical_json(dict(record)))


def file_name(record: Mapping[str, Any], rid: str) -> str:
    when = parse_at(str(record.get("at", "")))
    stamp = when.strftime("%Y%m%dT%H%M%S.%fZ") if when else "00000000T000000.000000Z"
    return f"{stamp}-{rid.removeprefix('sha256:')[:20]}.json"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def parse_at(text: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when.astimezone(timezone.utc)


def is_future(at: str, now: datetime | None) -> bool:
    """Whether the time ``at`` lies beyond ``now`` plus the allowed skew."""
    when = parse_at(at)
    return when is not None and now is not None and when > now + FUTURE_SKEW


def sign_record(rid: str, key: Any) -> dict[str, Any]:
    subject = Subject(name="ledger-record", digest={"sha256": rid.removeprefix("sha256:")})
    envelope = sign_statement([subject], PREDICATE, {"record": rid}, key)
    parsed: dict[str, Any] = json.loads(envelope.to_bytes())
    return parsed


def plain_unicode(value: Any) -> Any:
    """``value`` with every string valid Unicode, so the record has a canonical
    form: bytes that were not UTF-8 in a command line or a reason (decoded by
    Python as lone surrogates) are kept as ``\\xNN`` escapes."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            pass
        try:
            return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a surrogate that is not an escaped byte
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, list):
        return [plain_unicode(v) for v in value]
    if isinstance(value, dict):
        return {plain_unicode(k): plain_unicode(v) for k, v in value.items()}
    return value
