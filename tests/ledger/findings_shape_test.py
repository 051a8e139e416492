"""``ledger check``, ``ledger list`` and the ledger summary list what is wrong as
``findings``, the record every other command's JSON uses (``Finding.to_dict``),
with the older ``problems`` beside it for a release."""

from __future__ import annotations

import json
from pathlib import Path

from ftmanifest.findings import Finding
from ftmanifest.ledger import Ledger
from ftmanifest.ledger.summary import summarize
from tests.ledger.conftest import body, check_json, fill, ledger_cli

SHAPE = set(Finding(kind="k", rule="r", message="m").to_dict())


def _edited(folder: Path) -> tuple[Ledger, Path]:
    store = Ledger(folder)
    entry = fill(store, 3)[1]
    data = body(entry.file)
    data["record"]["note"] = "something else happened"
    entry.file.write_text(json.dumps(data, indent=1))
    return store, entry.file


def test_ledger_check_lists_findings_in_the_common_shape(folder: Path) -> None:
    _, edited = _edited(folder)
    code, report = check_json(folder)
    assert code == 1
    (finding,) = [f for f in report["findings"] if f["rule"] == "ledger.record-edited"]
    assert set(finding) == SHAPE and finding["kind"] == "ledger"
    assert finding["path"] == str(edited) and finding["severity"] == "error"
    assert finding["expected"] and finding["observed"] and finding["hint"]
    old = [(p["rule"], p["file"], p["message"]) for p in report["problems"]]
    assert old == [(f["rule"], f["path"], f["message"]) for f in report["findings"]]


def test_a_clean_ledger_has_no_findings(folder: Path) -> None:
    fill(Ledger(folder), 3)
    code, report = check_json(folder)
    assert (code, report["findings"], report["problems"]) == (0, [], [])


def test_ledger_list_and_the_summary_list_findings(folder: Path) -> None:
    store, edited = _edited(folder)
    out = ledger_cli(folder, "list", "--format", "json")
    listed = json.loads(out.stdout)["findings"]
    assert {f["rule"] for f in listed} >= {"ledger.record-edited"}
    assert all(set(f) == SHAPE for f in listed)
    contents, problems = store.check()
    summary = summarize(contents.entries, problems, experiment="e", parent=None, budget={},
                        sealed=[], ledger=str(folder))  # fmt: skip
    assert [f["path"] for f in summary["findings"]] == [p.file for p in problems]
    assert str(edited) in [f["path"] for f in summary["findings"]]
    assert len(summary["problems"]) == len(summary["findings"])
