"""The one not-scanned finding: always an error, the file's or the part's shape."""

from __future__ import annotations

from pathlib import Path

from ftmanifest.scan.unscanned import CAP_HINT, not_scanned, part_not_scanned


def test_file_not_scanned() -> None:
    f = not_scanned(Path("a.bin"), "unknown binary format (binary)", "a hint")
    assert (f.kind, f.rule, f.severity) == ("not-scanned", "scan.not-scanned", "error")
    assert f.message == "not scanned: unknown binary format (binary)"
    assert (f.path, f.hint, f.field, dict(f.extra)) == ("a.bin", "a hint", None, {})


def test_part_not_scanned_names_the_member() -> None:
    f = part_not_scanned("m.zip", "member x is over the size cap", "x")
    assert (f.kind, f.rule, f.severity) == ("not-scanned", "scan.over-cap", "error")
    assert (f.message, f.field, dict(f.extra), f.hint) == (
        "member x is over the size cap",
        "x",
        {"member": "x"},
        CAP_HINT,
    )


def test_part_not_scanned_of_the_whole_file() -> None:
    f = part_not_scanned("m.pt", "cannot read file: gone", rule="scan.unreadable", hint=None)
    assert (f.rule, f.field, f.hint, f.severity) == ("scan.unreadable", None, None, "error")
