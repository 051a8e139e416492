"""The names scanned below each top: each file and folder once, spelled as the walk
spells it, whatever the top's spelling (cut by length, not ``relpath``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ftmanifest.scan.names import _names, name_findings
from ftmanifest.scan.walk import walk


def _by_relpath(tops: list[Path], files: list[Path]) -> list[tuple[str, str]]:
    """The plain statement of what ``_names`` yields: every folder and file below its
    top, joined part by part from the top, first appearance kept."""
    roots = sorted({os.fspath(Path(t)) for t in tops}, key=len, reverse=True)
    out, seen = [], set()
    for file in files:
        name = os.fspath(file)
        top = next((r for r in roots if name == r or r == "." or name.startswith(r + os.sep)), None)
        if top is None:
            continue
        if name == top:
            where, parts = os.path.dirname(name), [os.path.basename(name)]
        else:
            where = "" if top == "." else top
            parts = os.path.relpath(name, top).split(os.sep)
        for part in parts:
            where = os.path.join(where, part)
            if where not in seen:
                seen.add(where)
                out.append((where, part))
    return out


def _tree(root: Path) -> None:
    for rel in ("a/x.txt", "a/b/y.txt", "a/z.txt", "a/b/c/w.txt", "d/v.txt", "top.txt"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("hello\n")


@pytest.mark.parametrize(
    "spell",
    [
        lambda r: [r],
        lambda r: [Path(str(r) + os.sep)],
        lambda r: [r / "a" / ".." / "a"],
        lambda r: [r / "a", r / "a" / "b"],  # overlapping tops list a file twice
        lambda r: [r / "top.txt", r / "d"],
        lambda r: [Path(".")],
        lambda r: [Path("./a")],
    ],
    ids=["plain", "trailing-sep", "dotdot", "overlap", "file-top", "cwd", "dot-slash"],
)
def test_each_name_once_as_the_walk_spells_it(tmp_path: Path, monkeypatch, spell) -> None:
    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    tops = spell(tmp_path)
    files, _ = walk(tops)
    got = list(_names(tops, files))
    assert got == _by_relpath(tops, files)
    assert len(got) == len(set(got))
    assert {os.path.basename(f) for f in files} <= {part for _, part in got}  # files named
    if len(tops) == 1 and tops[0].is_dir():
        assert any(part == "b" for _, part in got)  # and folders


@pytest.mark.parametrize("top", [".", "./data", "data/", "data"])
def test_a_token_in_a_name_is_found_however_the_top_is_spelled(
    tmp_path: Path, monkeypatch, top: str
) -> None:
    """``scan .`` and ``scan ./data`` judged no name at all: the walk's files are
    spelled by ``Path`` (``data/x``), the top as typed (``./data``)."""
    token = "ghp_" + "Q7wX2mK9pL4vR8sT1uY6zA3bC5dE0fG2hJ4k"
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / f"log-{token}.txt").write_text("hello\n")
    monkeypatch.chdir(tmp_path)
    files, _ = walk([Path(top)])
    found = name_findings([Path(top)], files, secrets=True, pii=False)
    assert [(f.path, f.extra.get("in")) for f in found] == [
        (os.path.join("data", f"log-{token}.txt"), "name")
    ]


def test_a_token_in_a_folder_name_is_found_once_at_the_folder(tmp_path: Path) -> None:
    token = "ghp_" + "Q7wX2mK9pL4vR8sT1uY6zA3bC5dE0fG2hJ4k"
    folder = tmp_path / f"run-{token}"
    for i in range(3):
        (folder / f"part-{i}.jsonl").parent.mkdir(parents=True, exist_ok=True)
        (folder / f"part-{i}.jsonl").write_text("{}\n")
    files, _ = walk([tmp_path])
    found = name_findings([tmp_path], files, secrets=True, pii=False)
    assert [f.path for f in found] == [str(folder)]
    assert found[0].extra.get("in") == "name"


def test_names_scanned_in_blocks_find_what_one_buffer_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ftmanifest.scan.names as names

    token = "ghp_" + "Q7wX2mK9pL4vR8sT1uY6zA3bC5dE0fG2hJ4k"
    for i in range(30):
        tag = f"-{token}" if i in (0, 13, 29) else ""
        (tmp_path / f"d{i % 4}").mkdir(exist_ok=True)
        (tmp_path / f"d{i % 4}" / f"run{i}{tag}.log").write_text("x\n")
    files, _ = walk([tmp_path])
    whole = name_findings([tmp_path], files, secrets=True, pii=True)
    monkeypatch.setattr(names, "BLOCK", 7)
    blocks = name_findings([tmp_path], files, secrets=True, pii=True)
    assert blocks == whole and len(whole) == 3


def test_cached_names_find_what_a_fresh_scan_finds_and_follow_a_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The names' findings are cached by every path judged: a second scan compiles no
    rule and finds the same; a renamed file is judged again (a cleaned name, then a
    token put back)."""
    from ftmanifest.scan import names as names_module
    from ftmanifest.scan.cache import scan_cached

    token = "ghp_" + "Q7wX2mK9pL4vR8sT1uY6zA3bC5dE0fG2hJ4k"
    data, cache = tmp_path / "data", tmp_path / "cache"
    data.mkdir()
    leaky = data / f"log-{token}.txt"
    leaky.write_text("hello\n")

    def names_of(found: list) -> list[str]:
        return [f.path for f in found if f.extra.get("in") == "name"]

    first = scan_cached([data], cache_dir=cache).findings
    assert names_of(first) == [str(leaky)]
    calls: list[int] = []
    real = names_module.scan_buffer
    monkeypatch.setattr(
        names_module, "scan_buffer", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    again = scan_cached([data], cache_dir=cache).findings
    assert again == first and calls == []  # from the cache
    leaky.rename(data / "log.txt")
    assert names_of(scan_cached([data], cache_dir=cache).findings) == [] and calls == [1]
    (data / "log.txt").rename(leaky)
    assert scan_cached([data], cache_dir=cache).findings == first
    assert names_of(scan_cached([data], cache_dir=cache, use_cache=False).findings) == [str(leaky)]
