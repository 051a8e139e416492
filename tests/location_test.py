"""One location type from loading to findings to edits.

Every drift row carries its manifest location as a tuple; the loader can place
it in the file; text is never parsed back into a location (a key may contain a
dot).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ftmanifest.errors import InputError
from ftmanifest.findings import Finding
from ftmanifest.location import format_loc
from ftmanifest.manifest import load_manifest
from ftmanifest.verify import verify_manifest
from ftmanifest.verify.lock import lock_manifest


def test_format_loc() -> None:
    assert format_loc(("data", 0, "cleaning", 1)) == "data[0].cleaning[1]"
    assert format_loc(("environment", "packages", "zope.interface")) == (
        "environment.packages.zope.interface"
    )
    assert format_loc(()) == ""


def test_finding_at_sets_both_the_location_and_its_text() -> None:
    f = Finding.at(("data", 2, "digest"), kind="drift", rule="drift.data", message="m")
    assert f.loc == ("data", 2, "digest") and f.field == "data[2].digest"
    assert "loc" not in f.to_dict()  # the JSON shape is unchanged: "field" is the text


def _drifted(project: Path) -> None:
    """A changed data byte, a changed script, a package that is not here with a dot in
    its name, and a missing environment variable."""
    data = project.parent / "data" / "train.jsonl"
    data.write_bytes(data.read_bytes().replace(b"a", b"b", 1))
    script = project.parent / "scripts" / "clean_tickets.py"
    script.write_text(script.read_text() + "\n# changed\n")
    text = project.read_text()
    project.write_text(text.replace("  packages:\n", "  packages:\n    zope.interface: ==6.0\n", 1))


def test_every_drift_row_carries_a_location_the_document_can_place(project: Path) -> None:
    _drifted(project)
    report = verify_manifest(project, signature=False)
    doc = load_manifest(project).document
    assert report.findings
    for f in report.findings:
        assert f.loc is not None, f
        assert format_loc(f.loc) == f.field
    by_loc = {f.loc: f for f in report.findings}
    dotted = ("environment", "packages", "zope.interface")
    assert dotted in by_loc, sorted(map(str, by_loc))
    line, _ = doc.position(dotted)
    assert line is not None and "zope.interface" in project.read_text().splitlines()[line - 1]
    script_rows = [loc for loc in by_loc if loc[:1] == ("data",) and "cleaning" in loc]
    assert script_rows and all(loc[-1] == "digest" for loc in script_rows)


def test_a_lock_error_names_the_line_of_its_field(project: Path) -> None:
    (project.parent / "data" / "train.jsonl").unlink()
    with pytest.raises(InputError) as info:
        lock_manifest(project)
    assert info.value.loc == ("data", 0, "path") and info.value.field == "data[0].path"
