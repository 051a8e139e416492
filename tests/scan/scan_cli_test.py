from __future__ import annotations

import argparse
import json

import pytest

from ftmanifest.cli import scan as cli

GHP = "ghp_SulEETldq8b8Vw2zbJYAxyL1aCcTlN99mhWp"


def run(argv: list[str], capsys) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["scan", *argv])
    code = args.func(args)
    return code, capsys.readouterr().out


def test_exit_codes_and_json(tmp_path, capsys) -> None:
    clean = tmp_path / "clean.txt"
    clean.write_text("nothing here")
    assert run([str(clean)], capsys)[0] == 0
    dirty = tmp_path / "dirty.jsonl"
    dirty.write_text(f'{{"t": "{GHP}"}}\n')
    code, out = run([str(dirty), "--format", "json"], capsys)
    doc = json.loads(out)
    assert code == 1 and doc["findings"][0]["rule"] == "secret.github-pat"
    assert GHP not in out and doc["summary"]["counts"] == {"secret": 1}


def test_not_scanned_fails_unless_allowed(tmp_path, capsys) -> None:
    blob = tmp_path / "x.dat"
    blob.write_bytes(bytes(range(256)))
    assert run([str(blob)], capsys)[0] == 1
    assert run([str(blob), "--allow-not-scanned"], capsys)[0] == 0


def test_baseline_roundtrip_bound_to_the_file(tmp_path, capsys) -> None:
    data = tmp_path / "d.txt"
    data.write_text(f"key {GHP}\n")
    base = tmp_path / "base.json"
    assert run([str(data), "--write-baseline", str(base)], capsys)[0] == 0
    doc = json.loads(base.read_text())
    assert doc["version"] == 2 and doc["entries"][0]["rule"] == "secret.github-pat"
    assert run([str(data), "--baseline", str(base)], capsys)[0] == 0
    data.write_text(f"\n\nmoved down: {GHP}\n")  # a changed file is judged again
    assert run([str(data), "--baseline", str(base)], capsys)[0] == 1
    data.write_text("secret removed\n")
    code, out = run([str(data), "--baseline", str(base), "--format", "json"], capsys)
    assert code == 0 and json.loads(out)["findings"][0]["rule"] == "scan.baseline-stale"
    base.write_text("{not json")
    with pytest.raises(ValueError):
        run([str(data), "--baseline", str(base)], capsys)


def test_redact_to_keeps_structure(tmp_path, capsys) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "d.jsonl").write_text(
        json.dumps({"t": f"k {GHP}", "m": "ana.silva@uni-lisboa.pt"}) + "\n" + '{"t": "ok"}\n'
    )
    (src / "d.csv").write_text(f"id,note\n1,{GHP}\n")
    out = tmp_path / "out"
    assert run([str(src), "--redact-to", str(out)], capsys)[0] == 1
    rows = [json.loads(x) for x in (out / "d.jsonl").read_text().splitlines()]
    assert GHP not in rows[0]["t"] and "REDACTED" in rows[0]["t"] and rows[1] == {"t": "ok"}
    assert "ana.silva" not in rows[0]["m"]
    assert (out / "d.csv").read_text().splitlines()[1].startswith("1,[REDACTED:")
    with pytest.raises(Exception, match="overwrite"):
        run([str(src), "--redact-to", str(out)], capsys)
    with pytest.raises(ValueError, match="inside a scanned tree"):
        run([str(src), "--redact-to", str(src / "x")], capsys)
