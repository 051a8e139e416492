"""``ledger list`` shows preflight records apart from attempts: a
preflight is a check before a run, and counting it as an attempt with status
"preflight" made a project that had run nothing look as if it had tried."""

from __future__ import annotations

import json
from pathlib import Path

from ftmanifest.ledger import Ledger
from tests.ledger.conftest import ledger_cli


def _ledger(tmp_path: Path) -> Path:
    folder = tmp_path / "ledger"
    store = Ledger(folder)
    store.append({"status": "planned", "attempt": "a1", "experiment": {"id": "exp-1"}})
    store.append({"status": "started", "attempt": "a1", "experiment": {"id": "exp-1"}})
    for ok in (False, True):
        store.append({
            "status": "preflight", "ok": ok, "experiment": {"id": "exp-1"},
            "rows": [{"name": "stack", "ok": True}, {"name": "overfit", "ok": ok}],
        })  # fmt: skip
    return folder


def test_preflights_are_listed_apart_and_not_counted_as_attempts(tmp_path: Path) -> None:
    folder = _ledger(tmp_path)
    out = ledger_cli(folder, "list", "--format", "json")
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    assert [a["attempt"] for a in listed["attempts"]] == ["a1"]
    assert "preflight" not in listed["counts"]
    checks = listed["preflights"]
    assert [(c["ok"], c["failed"]) for c in checks] == [(False, ["overfit"]), (True, [])]
    assert all(c["experiment"] == "exp-1" for c in checks)

    text = ledger_cli(folder, "list").stdout
    head, _, tail = text.partition("preflight checks (not attempts):")
    assert "1 attempt(s)" in head and "preflight" not in head.split("1 attempt(s)")[0]
    assert "FAILED" in tail and "overfit" in tail and "passed" in tail
