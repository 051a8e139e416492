from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftmanifest.output import findings_sarif
from ftmanifest.scan.engine import scan_paths

SCHEMA = Path(__file__).parents[1] / "fixtures" / "sarif-2.1.0.json"


def test_scan_sarif_validates(tmp_path) -> None:
    import jsonschema

    p = tmp_path / "d.jsonl"
    p.write_text('{"t": "ghp_SulEETldq8b8Vw2zbJYAxyL1aCcTlN99mhWp +49 30 1234 5678"}\n')
    (tmp_path / "x.dat").write_bytes(bytes(range(256)))
    log = json.loads(findings_sarif(scan_paths([tmp_path]).findings))
    schema = json.loads(SCHEMA.read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(log)
    assert len(log["runs"][0]["results"]) == 3


def test_sarif_schema_check_can_fail(tmp_path) -> None:
    import jsonschema

    p = tmp_path / "d.jsonl"
    p.write_text('{"t": "ghp_SulEETldq8b8Vw2zbJYAxyL1aCcTlN99mhWp"}\n')
    log = json.loads(findings_sarif(scan_paths([tmp_path]).findings))
    log["runs"][0]["results"][0]["level"] = "fatal"
    schema = json.loads(SCHEMA.read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validators.validator_for(schema)(schema).validate(log)
