"""A baseline entry accepts one finding of one file's content, never a rule or import everywhere."""

from __future__ import annotations

import argparse
import json
import pickle
from pathlib import Path

import pytest

from ftmanifest.cli import scan as cli
from ftmanifest.errors import InputError


def run(argv: list[str], capsys) -> tuple[int, dict]:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["scan", "--no-cache", "--format", "json", *argv])
    code = args.func(args)
    return code, json.loads(capsys.readouterr().out)


class _Payload:
    """Pickles as ``argparse.Namespace`` (an import an ordinary file also has), then exec."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


def _ordinary(path: Path) -> None:
    path.write_bytes(pickle.dumps({"args": argparse.Namespace(lr=0.1)}, protocol=4))


def _rules(doc: dict, path: Path) -> set[str]:
    return {f["rule"] for f in doc["findings"] if f["path"] == str(path)}


def test_an_accepted_import_is_accepted_in_that_file_only(tmp_path: Path, capsys) -> None:
    models = tmp_path / "models"
    models.mkdir()
    ordinary = models / "ordinary.pkl"
    _ordinary(ordinary)
    base = tmp_path / "scan-baseline.json"
    assert run([str(models), "--write-baseline", str(base)], capsys)[0] == 0
    # control: the accepted file, unchanged, passes
    code, doc = run([str(models), "--baseline", str(base)], capsys)
    assert code == 0 and doc["summary"]["suppressed"] == 1
    # the same import in another file is not accepted there
    other = models / "elsewhere.pkl"
    other.write_bytes(ordinary.read_bytes())
    code, doc = run([str(models), "--baseline", str(base)], capsys)
    assert code == 1 and _rules(doc, other) == {"pickle.unsafe-import"}
    assert _rules(doc, ordinary) == set()


def test_a_changed_file_gets_its_accepted_finding_back(tmp_path: Path, capsys) -> None:
    model = tmp_path / "model.pkl"
    _ordinary(model)
    base = tmp_path / "b.json"
    assert run([str(model), "--write-baseline", str(base)], capsys)[0] == 0
    marker = tmp_path / "ran"
    model.write_bytes(pickle.dumps([argparse.Namespace(lr=0.1), _Payload(marker)], protocol=4))
    pickle.loads(model.read_bytes())  # the real loader runs it
    assert marker.read_text() == "ran"
    code, doc = run([str(model), "--baseline", str(base)], capsys)
    imports = {f["observed"] for f in doc["findings"] if f["rule"] == "pickle.unsafe-import"}
    assert code == 1 and imports == {"argparse.Namespace", "builtins.exec"}
    stale = [f for f in doc["findings"] if f["rule"] == "scan.baseline-stale"]
    assert stale and "changed since it was accepted" in stale[0]["message"]


def test_entries_name_path_digest_and_location(tmp_path: Path, capsys) -> None:
    model = tmp_path / "m" / "model.pkl"
    model.parent.mkdir()
    _ordinary(model)
    base = tmp_path / "b.json"
    run([str(model), "--write-baseline", str(base)], capsys)
    [entry] = json.loads(base.read_text())["entries"]
    assert entry["path"] == "m/model.pkl" and entry["digest"].startswith("sha256:")
    assert entry["rule"] == "pickle.unsafe-import" and entry["location"]["offset"] > 0
    # the same baseline read from another working folder matches the same file
    entry["reason"] = "our own training args"
    base.write_text(json.dumps({"version": 2, "entries": [entry]}))
    assert run([str(model), "--baseline", str(base)], capsys)[0] == 0
    run([str(model), "--write-baseline", str(base)], capsys)  # reasons are kept
    assert json.loads(base.read_text())["entries"][0]["reason"] == "our own training args"


def test_old_baselines_are_refused_and_can_be_rewritten(tmp_path: Path, capsys) -> None:
    model = tmp_path / "model.pkl"
    _ordinary(model)
    old = tmp_path / "old.json"
    entry = {"fingerprint": "sha256:00", "rule": "pickle.unsafe-import", "path": "x", "reason": "r"}
    old.write_text(json.dumps({"version": 1, "entries": [entry]}))
    with pytest.raises(InputError, match="version 1") as info:
        run([str(model), "--baseline", str(old)], capsys)
    assert "--write-baseline" in (info.value.hint or "")
    assert run([str(model), "--write-baseline", str(old)], capsys)[0] == 0
    assert json.loads(old.read_text())["version"] == 2
    assert run([str(model), "--baseline", str(old)], capsys)[0] == 0
