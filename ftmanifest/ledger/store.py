"""The ledger on disk: one file per record, hash-linked, append-only.

Layer: judging rooms - edge (reads and writes one folder; ``recordfile`` says what a
record file holds, ``judge`` weighs the records read).  Each record is written once
(temp file, fsync, hard link: never replaced), so

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
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ftmanifest.errors import InputError
from ftmanifest.fsutil import atomic_write_bytes
from ftmanifest.ledger.judge import judge
from ftmanifest.ledger.recordfile import (
    FORMAT,
    KEY_ENV,
    MAX_RECORD_BYTES,
    MAX_RECORDS,
    NAME_RE,
    Contents,
    Entry,
    Problem,
    file_name,
    is_future,
    now,
    parse_at,
    plain_unicode,
    record_id,
    sign_record,
)
from ftmanifest.signing.keys import load_private_key


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
            limit = parse_at(at)
            latest = max((h.at for h in heads if not is_future(h.at, limit)), default="")
            if latest and at <= latest:  # a clock behind the newest record: keep order
                at = latest
            record = {
                "format": FORMAT,
                "seq": 1 + max((h.seq for h in heads), default=0),
                "prev": sorted(h.id for h in heads),
                "at": at,
                **{k: v for k, v in fields.items() if k not in ("format", "seq", "prev", "at")},
            }
            record = plain_unicode(json.loads(json.dumps(record, default=str)))  # plain JSON only
            rid = record_id(record)
            signature = None if key is None else sign_record(rid, key)
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
        """Read the ledger and judge it as a whole (``judge.judge``); returns
        (contents, all problems)."""
        contents = self.read()
        problems = judge(
            contents,
            str(self.root),
            trust=trust,
            require_signed=require_signed,
            heads=heads,
            at=at,
        )
        return contents, problems


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
