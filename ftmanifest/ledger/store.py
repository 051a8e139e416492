"""The ledger on disk: one file per record, hash-linked, append-only.

Layer: judging rooms - edge (reads and writes one folder).  A record is a JSON object;
its id is ``sha256:`` of its canonical JSON (RFC 8785), and it names the ledger's heads
when it was written (``prev``: the records no other record links to yet) and its depth
(``seq``: one more than the deepest of those).  Its file is ``<at>-<first 20 hex of its
id>.json`` holding ``{"record": ..., "signature": ...}``, written once (temp file,
fsync, hard link: never replaced), so

- an edited record no longer hashes to its name, a removed one leaves a link
  to nothing, a moved or renamed one names another digest or time;
- two git branches that each added records add different files: they merge
  without conflicts, leaving two heads, which the next record links to;
- processes appending at once each add their own file: nothing is lost.
  They take an exclusive lock on the folder while reading the heads and
  writing, so on one machine the records form a single chain; where locks do
  not reach (NFS), forks appear and are joined by the next record.

A record's time is the writer's clock, kept at or after the heads it links
to, except a head dated in the future (beyond ``FUTURE_SKEW``): one machine
whose clock runs ahead must not stamp every later record with its time;
``check`` names such a record instead.

What hash links cannot show is the removal of the newest records (nothing
links to them yet) or a rewrite of a whole chain.  Signed records (the
project's signing key, ``FTMANIFEST_LEDGER_KEY``) and ``ledger check --head
ID`` (an id known from a report or a handoff) cover those.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ftmanifest.errors import FtManifestError, InputError
from ftmanifest.findings import Finding
from ftmanifest.fsutil import atomic_write_bytes
from ftmanifest.manifest.canonical import canonical_json, sha256_digest
from ftmanifest.signing.attest import sign_statement, verify_statement
from ftmanifest.signing.intoto import Subject
from ftmanifest.signing.keys import load_private_key

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
    when = _parse_at(str(record.get("at", "")))
    stamp = when.strftime("%Y%m%dT%H%M%S.%fZ") if when else "00000000T000000.000000Z"
    return f"{stamp}-{rid.removeprefix('sha256:')[:20]}.json"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _parse_at(text: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when.astimezone(timezone.utc)


class Ledger:
    """The records of one ledger folder."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    # -- writing ---------------------------------------------------------

    def append(self, fields: Mapping[str, Any], *, key: Any = None) -> Entry:
        """Add a record made of ``fields`` linked to the current heads; returns it.

        ``key`` (an Ed25519 private key) signs it; without one, the key named
        by ``$FTMANIFEST_LEDGER_KEY`` does, when set.  Raises ``OSError`` when
        the folder cannot be written (callers decide whether that stops a run).
        """
        key = key if key is not None else _env_key()
        self._make_root()
        fd = os.open(self.root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            _lock(fd)
            contents = self.read()
            heads = contents.heads()
            at = now()
            limit = _parse_at(at)
            latest = max((h.at for h in heads if not _future(h.at, limit)), default="")
            if latest and at <= latest:  # a clock behind the newest record: keep order
                at = latest
            record = {
                "format": FORMAT,
                "seq": 1 + max((h.seq for h in heads), default=0),
                "prev": sorted(h.id for h in heads),
                "at": at,
                **{k: v for k, v in fields.items() if k not in ("format", "seq", "prev", "at")},
            }
            record = _unicode(json.loads(json.dumps(record, default=str)))  # plain JSON only
            rid = record_id(record)
            signature = None if key is None else _sign(rid, key)
            body = {"record": record, "signature": signature}
            data = (json.dumps(body, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()
            target = self.root / file_name(record, rid)
            try:
                atomic_write_bytes(target, data, exclusive=True)
            except FileExistsError:
                pass  # the very same record (same id) is already there
        finally:
            os.close(fd)  # releases the lock
        return Entry(rid, record, target, signature)

    def _make_root(self) -> None:
        try:
            st = os.lstat(self.root)
        except FileNotFoundError:
            self.root.mkdir(parents=True, exist_ok=True)
            return
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(
                20, "the ledger is not a folder (or is a symlink)", str(self.root)
            )

    # -- reading ---------------------------------------------------------

    def exists(self) -> bool:
        return self.root.is_dir()

    def read(self) -> Contents:
        """Every record file, checked one by one (name, size, JSON), in ledger order."""
        out = Contents()
        try:
            names = sorted(os.listdir(self.root))
        except FileNotFoundError:
            return out
        except OSError as exc:
            out.problems.append(
                Problem("ledger.unreadable", str(self.root), f"cannot list the ledger: {exc}")
            )
            return out
        for name in names[:MAX_RECORDS]:
            entry = self._read_one(name, out.problems)
            if entry is not None:
                out.entries.append(entry)
        if len(names) > MAX_RECORDS:
            out.problems.append(
                Problem(
                    "ledger.too-large",
                    str(self.root),
                    "the ledger holds more files than can be judged",
                    expected=f"at most {MAX_RECORDS}",
                    observed=str(len(names)),
                )
            )
        out.entries.sort(key=lambda e: (e.seq, e.at, e.id))
        return out

    def _read_one(self, name: str, problems: list[Problem]) -> Entry | None:
        path = self.root / name
        if name.startswith(".") and name.endswith(".tmp"):
            problems.append(
                Problem(
                    "ledger.leftover",
                    str(path),
                    "a temp file left by an interrupted append",
                    hint="delete it once no ftmanifest process is writing to the ledger",
                )
            )
            return None
        match = NAME_RE.match(name)
        if match is None:
            problems.append(
                Problem(
                    "ledger.stray-file",
                    str(path),
                    "a file that is not a ledger record",
                    expected="<time>-<20 hex>.json",
                    observed=name,
                    hint="ledger folders hold only records; move the file elsewhere",
                )
            )
            return None
        data, why = _read_file(path)
        if data is None:
            problems.append(
                Problem("ledger.unreadable", str(path), f"cannot read the record: {why}")
            )
            return None
        try:
            body = json.loads(data)
        except (ValueError, RecursionError):
            problems.append(
                Problem("ledger.unreadable", str(path), "the record is not JSON (edited or torn)")
            )
            return None
        record = body.get("record") if isinstance(body, dict) else None
        if not isinstance(record, dict):
            problems.append(
                Problem("ledger.unreadable", str(path), "no 'record' object in the file")
            )
            return None
        try:
            rid = record_id(record)
        except (ValueError, RecursionError) as exc:  # NaN, a huge int, a lone surrogate...
            problems.append(
                Problem(
                    "ledger.unreadable",
                    str(path),
                    f"the record has no canonical form, so no id: {exc}"[:300],
                    hint="ftmanifest never writes such a record: it was edited or forged",
                )
            )
            return None
        expected = file_name(record, rid)
        if expected != name:
            problems.append(
                Problem(
                    "ledger.record-edited",
                    str(path),
                    "the record does not match its file name: edited, renamed or moved",
                    expected=name,
                    observed=expected,
                    hint="restore the record from version control (git checkout -- FILE); "
                    "records are never edited, add a new one instead",
                )
            )
            return None
        signature = body.get("signature")
        return Entry(rid, record, path, signature if isinstance(signature, dict) else None)

    # -- judging ---------------------------------------------------------

    def check(
        self,
        *,
        trust: Any = None,
        require_signed: bool = False,
        heads: Sequence[str] = (),
        at: datetime | None = None,
    ) -> tuple[Contents, list[Problem]]:
        """Read the ledger and judge it as a whole (records dated after ``at``,
        default now, plus ``FUTURE_SKEW`` are problems); returns (contents, all
        problems)."""
        contents = self.read()
        problems = list(contents.problems)
        by_id = contents.by_id()
        when = at if at is not None else datetime.now(timezone.utc)
        for entry in contents.entries:
            problems += _links(entry, by_id, when)
            problems += signature_problems(entry, trust, require_signed)
        for wanted in heads:
            bare = wanted.strip().lower().removeprefix("sha256:")
            if not HEAD_RE.fullmatch(bare):  # "" or "a" would match any record: no check at all
                problems.append(
                    Problem(
                        "ledger.head-missing",
                        str(self.root),
                        "a known head must be a record id or a prefix of one",
                        expected=f"at least {MIN_HEAD_HEX} hex digits (sha256:... or bare)",
                        observed=repr(wanted)[:80],
                        hint="copy the id from `ledger check` or the report that named it",
                    )
                )
                continue
            if not any(e.id.removeprefix("sha256:").startswith(bare) for e in contents.entries):
                problems.append(
                    Problem(
                        "ledger.head-missing",
                        str(self.root),
                        "a record known to be in the ledger is gone",
                        expected=wanted,
                        observed="not found",
                        hint="the newest records were removed or the ledger was rewritten; "
                        "restore it from version control",
                    )
                )
        return contents, problems


def _future(at: str, now: datetime | None) -> bool:
    """Whether the time ``at`` lies beyond ``now`` plus the allowed skew."""
    when = _parse_at(at)
    return when is not None and now is not None and when > now + FUTURE_SKEW


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
    when = _parse_at(entry.at)
    if when is None:
        yield Problem("ledger.order", where, "the record has no valid time",
                      expected="ISO 8601 with a zone", observed=repr(entry.at)[:60])  # fmt: skip
        return
    if _future(entry.at, now):
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
        before = _parse_at(parent.at)
        if before is not None and when < before and not _future(parent.at, now):
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


def _sign(rid: str, key: Any) -> dict[str, Any]:
    subject = Subject(name="ledger-record", digest={"sha256": rid.removeprefix("sha256:")})
    envelope = sign_statement([subject], PREDICATE, {"record": rid}, key)
    parsed: dict[str, Any] = json.loads(envelope.to_bytes())
    return parsed


def _unicode(value: Any) -> Any:
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
        return [_unicode(v) for v in value]
    if isinstance(value, dict):
        return {_unicode(k): _unicode(v) for k, v in value.items()}
    return value


def _env_key() -> Any:
    path = os.environ.get(KEY_ENV, "").strip()
    if not path:
        return None

    try:
        return load_private_key(Path(path))
    except OSError as exc:  # not a write failure of the ledger: a missing or unreadable key
        raise InputError(
            f"the ledger signing key cannot be read: {exc.strerror or exc}",
            path=path,
            field=KEY_ENV,
            observed=type(exc).__name__,
            hint=f"point ${KEY_ENV} at a key made by `ftmanifest keygen`, or unset it",
        ) from None


def _read_file(path: Path) -> tuple[bytes | None, str]:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        return None, exc.strerror or str(exc)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "not a regular file"
        if st.st_size > MAX_RECORD_BYTES:
            return None, f"larger than {MAX_RECORD_BYTES} bytes"
        chunks = []
        left = MAX_RECORD_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > MAX_RECORD_BYTES:
            return None, f"larger than {MAX_RECORD_BYTES} bytes"
        return data, ""
    finally:
        os.close(fd)


def _lock(fd: int) -> None:
    try:
        import fcntl
    except ImportError:  # Windows: no lock; concurrent appends fork and are joined later
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        pass  # a filesystem without locks: same as above
