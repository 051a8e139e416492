"""Helpers shared by the ledger tests: a clean environment, ledgers filled
through the library, records rewritten the way someone without the signing
key can rewrite them, and ``ftmanifest ledger ...`` through the real CLI.

Every test's ledger lives under its own ``tmp_path``; ``$FTMANIFEST_LEDGER``,
``$FTMANIFEST_LEDGER_KEY`` and ``$FTMANIFEST_TRUST_FILE`` of the caller's shell
never leak in (the CLI subprocesses inherit ``os.environ``, which the
autouse fixture cleans).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.ledger import Entry, Ledger
from ftmanifest.ledger.recordfile import file_name, record_id
from tests.conftest import run_cli

LEDGER_ENVS = ("FTMANIFEST_LEDGER", "FTMANIFEST_LEDGER_KEY", "FTMANIFEST_TRUST_FILE")


@pytest.fixture(autouse=True)
def _no_ledger_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ledger, its key and the trust file come from the test, never the caller's shell."""
    for name in LEDGER_ENVS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("FTMANIFEST_DEBUG", raising=False)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Where a test's ledger goes (not created: the first append makes it)."""
    return tmp_path / "ledger"


def fill(store: Ledger, n: int, *, attempt: str = "a", **fields: Any) -> list[Entry]:
    """Append ``n`` records (attempt ids ``<attempt>0``, ``<attempt>1``...); returns them."""
    return [
        store.append({"status": "planned", "attempt": f"{attempt}{i}", "note": f"r{i}", **fields})
        for i in range(n)
    ]


def body(path: Path) -> dict[str, Any]:
    """A record file's JSON: ``{"record": ..., "signature": ...}``."""
    data: dict[str, Any] = json.loads(path.read_bytes())
    return data


def rewrite(entry: Entry, signature: Any = "keep", **changes: Any) -> Path:
    """Rewrite ``entry`` with ``changes`` (None drops a field) the way anyone with
    write access can: recompute its id and file name, remove the old file.
    ``signature`` "keep" keeps the old envelope, else the one given (None: none)."""
    old = body(entry.file)
    record = dict(old["record"])
    for key, value in changes.items():
        if value is None:
            record.pop(key, None)
        else:
            record[key] = value
    envelope = old.get("signature") if signature == "keep" else signature
    target = entry.file.parent / file_name(record, record_id(record))
    entry.file.unlink()
    target.write_text(json.dumps({"record": record, "signature": envelope}, indent=1))
    return target


def ledger_cli(
    folder: Path, action: str, *args: str, **kw: Any
) -> subprocess.CompletedProcess[str]:
    """``ftmanifest ledger ACTION --ledger FOLDER ARGS...`` in a fresh interpreter,
    with tables wide enough that no rule or id is wrapped."""
    kw["env"] = {"COLUMNS": "1000", **kw.get("env", {})}
    return run_cli("ledger", action, "--ledger", str(folder), *args, **kw)


def check_json(folder: Path, *args: str, cwd: Path | None = None) -> tuple[int, dict[str, Any]]:
    """``ledger check --format json`` (run in ``cwd``): its exit status and report."""
    out = ledger_cli(folder, "check", "--format", "json", *args, cwd=cwd)
    assert out.returncode in (0, 1), out.stdout + out.stderr
    report: dict[str, Any] = json.loads(out.stdout)
    return out.returncode, report


def rules(report: dict[str, Any]) -> list[str]:
    return sorted(p["rule"] for p in report["problems"])


def ftmanifest_cmd(*args: str) -> list[str]:
    """The argv that runs the real console entry point (for ``Popen``)."""
    return [sys.executable, "-m", "ftmanifest", *args]


@dataclass(frozen=True)
class KeyPair:
    key: Path
    trust: Path


def keygen(folder: Path, name: str) -> KeyPair:
    """A key made by the real ``ftmanifest keygen`` and an allowed-signers file
    holding the line it prints."""
    key = folder / name
    out = run_cli("keygen", "-f", str(key), "--no-passphrase", "--comment", name)
    assert out.returncode == 0, out.stdout + out.stderr
    (line,) = [ln.strip() for ln in out.stdout.splitlines() if 'namespaces="ftmanifest"' in ln]
    trust = folder / f"{name}.allowed_signers"
    trust.write_text(line + "\n")
    return KeyPair(key, trust)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[KeyPair, KeyPair]:
    """The project's key, and another made the same way that nobody trusts."""
    folder = tmp_path_factory.mktemp("ledger-keys")
    return keygen(folder, "me"), keygen(folder, "stranger")
