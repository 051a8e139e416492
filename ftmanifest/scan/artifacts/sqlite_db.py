"""SQLite databases (experiment trackers' ``runs.db``, optuna and mlflow stores).

Layer: judging rooms - edge of the scanner (reads one file).  Opened read-only and
immutable (``mode=ro&immutable=1``: no journal is replayed, nothing is written), with
``trusted_schema`` off so a hostile schema cannot make a read call functions, and
``cell_size_check`` on.  Every row of every ordinary table is read; text and blob values
go to the text scanner.  Views and triggers are not run.  A file SQLite refuses, or a
table it cannot read (a virtual table whose module is not here), is an error finding
naming it, never clean.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ftmanifest.findings import Finding
from ftmanifest.scan.unscanned import REEXPORT_HINT, malformed, part_not_scanned

MAGIC = b"SQLite format 3\x00"
CHUNK = 1 << 20  # characters handed to the scanner at a time


def scan_sqlite(path: Path, text_scanner: Any) -> list[Finding]:
    """Findings for one SQLite file; see the module docstring."""
    where = str(path)
    uri = f"file:{quote(str(path.absolute()))}?mode=ro&immutable=1"
    try:
        db = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        return [_unreadable(where, str(exc))]
    out: list[Finding] = []
    try:
        db.execute("PRAGMA trusted_schema=OFF")
        db.execute("PRAGMA cell_size_check=ON")
        tables = [name for (name,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")]  # fmt: skip
    except sqlite3.Error as exc:
        db.close()
        return [_unreadable(where, str(exc))]
    try:
        for table in tables:
            out += _table(db, where, table, text_scanner)
    finally:
        db.close()
    return out


def _table(db: sqlite3.Connection, where: str, table: str, scanner: Any) -> list[Finding]:
    member = f"table {table}"
    quoted = '"' + table.replace('"', '""') + '"'
    out: list[Finding] = []
    reported: set[tuple[str, str | None]] = set()
    pieces: list[str] = []
    size = 0

    def flush() -> None:
        if scanner is not None and pieces:
            for f in scanner("\n".join(pieces), path=where, extra={"member": member}):
                if (f.rule, f.fingerprint) not in reported:
                    reported.add((f.rule, f.fingerprint))
                    out.append(f)

    try:
        for row in db.execute(f"SELECT * FROM {quoted}"):  # noqa: S608 - a quoted identifier
            for value in row:
                if isinstance(value, bytes):
                    value = value.decode("utf-8", "replace")
                if isinstance(value, str):
                    pieces.append(value)
                    size += len(value)
            if size >= CHUNK:
                flush()
                pieces, size = [], 0
    except sqlite3.Error as exc:
        flush()
        why = f"{member} cannot be read: {exc}"
        return out + [part_not_scanned(where, why, member, "sqlite.unreadable", REEXPORT_HINT)]
    flush()
    return out


def _unreadable(where: str, why: str) -> Finding:
    return malformed(where, "sqlite.unreadable", f"SQLite refuses it: {why}",
                     expected="an SQLite 3 database", hint=REEXPORT_HINT)  # fmt: skip
