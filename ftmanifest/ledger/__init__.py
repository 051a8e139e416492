"""The experiment ledger: every attempt, its outcome and reason, its budget,
and every use of the sealed test split.

Layer: judging rooms (after scan, before adapter and verify).  ``store`` is
the edge (one folder of hash-linked record files; ``recordfile`` says what
each holds, ``judge`` weighs them as a whole);
``attempts`` is the pure view of it; ``folder`` picks the folder;
``evidence`` says which records count in a ledger that signs.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from ftmanifest.ledger.folder import ledger_dir
from ftmanifest.ledger.recordfile import Entry
from ftmanifest.ledger.store import Ledger

__all__ = ["Entry", "Ledger", "ledger_dir", "new_attempt", "open_ledger"]


def open_ledger(manifest_path: Path | None, option: Path | str | None = None) -> Ledger:
    return Ledger(ledger_dir(manifest_path, option))


def new_attempt() -> str:
    """A fresh attempt id: 12 hex characters, unique across machines."""
    return secrets.token_hex(6)
