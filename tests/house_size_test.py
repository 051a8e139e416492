"""Modules a reader can hold in mind: none of the package's modules passes 500 lines.

A module past that size has usually grown a second job; split it by what flows
through it (a reader apart from its judge, a format apart from its store), not
into arbitrary halves.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 500


def _lines(path: Path) -> int:
    return len(path.read_text("utf-8").splitlines())


def _too_long(folder: Path) -> list[str]:
    return [
        f"{path.relative_to(folder.parent)}: {n} lines"
        for path in sorted(folder.rglob("*.py"))
        if (n := _lines(path)) > MAX_LINES
    ]


def test_no_module_passes_the_limit() -> None:
    found = _too_long(ROOT / "ftmanifest")
    assert not found, f"split by what flows through it (at most {MAX_LINES} lines):\n" + "\n".join(
        found
    )


def test_the_count_sees_a_long_module(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "short.py").write_text("x = 1\n" * MAX_LINES, "utf-8")
    (package / "long.py").write_text("x = 1\n" * (MAX_LINES + 1), "utf-8")
    assert _too_long(package) == [f"pkg/long.py: {MAX_LINES + 1} lines"]
