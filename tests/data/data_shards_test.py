"""A changed shard in a folder of data is named, not only its folder.

A data folder is pinned by one tree digest.  Its file list, kept in the user
cache under that digest (the folder cache's state, ``ftmanifest.foldercache``,
read by ``ftmanifest.treelist``), is trusted only because it hashes to the
signed digest: verify names the shards that changed, were added
or went missing from it, and without it (or with a forged one) still refuses
the folder and says why nothing is named.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ftmanifest import foldercache, treelist
from ftmanifest.hashing.tree import hash_tree
from ftmanifest.manifest import load_manifest
from ftmanifest.verify import verify_manifest
from tests.conftest import ENV, git, write_project


def _shards(n: int) -> dict[str, str | None]:
    return {
        f"data/train/part-{i:04d}.jsonl": f'{{"text": "doc {i}", "label": "billing"}}\n'
        for i in range(n)
    }


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def _locked(env: Path, n: int) -> Path:
    manifest = write_project(env / "repo", _shards(n), train="data/train")
    git(manifest.parent, "add", "-A")
    git(manifest.parent, "commit", "-qm", "locked")
    return manifest


def _pinned_list(manifest: Path) -> Path:
    digest = load_manifest(manifest).manifest.data[0].digest
    (listing,) = foldercache.find(env_cache(), digest or "")
    return listing


def env_cache() -> Path:
    return Path(os.environ["FTMANIFEST_CACHE_DIR"])


def test_the_list_kept_is_what_the_tree_digest_hashes(env: Path) -> None:
    manifest = _locked(env, 7)
    listing = _pinned_list(manifest)
    assert listing.is_file() and listing.stat().st_mode & 0o077 == 0
    assert not list((env_cache() / "trees").glob("*.gz"))  # one copy of the list, not two
    tree = hash_tree(manifest.parent / "data/train", use_cache=False)
    assert treelist.read(tree.digest) == {r: f.digest for r, f in tree.files.items()}
    assert f"{tree.digest}" == load_manifest(manifest).manifest.data[0].digest


def test_changed_added_and_missing_shards_are_named(env: Path) -> None:
    manifest = _locked(env, 30)
    assert verify_manifest(manifest, signature=False).ok
    train = manifest.parent / "data" / "train"
    (train / "part-0005.jsonl").write_text('{"text": "changed", "label": "billing"}\n')
    (train / "part-0010.jsonl").unlink()
    (train / "sub").mkdir()
    (train / "sub" / "part-0099.jsonl").write_text('{"text": "new", "label": "billing"}\n')
    report = verify_manifest(manifest, signature=False)
    shards = {f.path: f for f in report.findings if f.rule == "drift.data-shard"}
    assert set(shards) == {
        "data/train/part-0005.jsonl",
        "data/train/part-0010.jsonl",
        "data/train/sub/part-0099.jsonl",
    }, [(f.rule, f.path, f.message) for f in report.findings]
    assert "changed" in shards["data/train/part-0005.jsonl"].message
    assert "missing" in shards["data/train/part-0010.jsonl"].message
    assert "not in the pin" in shards["data/train/sub/part-0099.jsonl"].message
    assert all(f.field == "data[0].digest" for f in shards.values())  # one --accept covers them
    assert any(f.rule == "drift.data" for f in report.findings)  # the folder row stays
    assert not report.ok


def test_past_fifty_shards_the_rest_are_counted(env: Path) -> None:
    manifest = _locked(env, 80)
    train = manifest.parent / "data" / "train"
    for i in range(70):
        (train / f"part-{i:04d}.jsonl").write_text(f'{{"text": "x{i}", "label": "billing"}}\n')
    rows = [f for f in verify_manifest(manifest, signature=False).findings
            if f.rule == "drift.data-shard"]  # fmt: skip
    assert len(rows) == treelist.MAX_NAMED + 1
    assert "20 more files of data/train differ" in rows[-1].message


def test_without_the_pinned_list_the_folder_is_refused_and_says_why(env: Path) -> None:
    manifest = _locked(env, 5)
    _pinned_list(manifest).unlink()  # another machine, or a cleared cache
    (manifest.parent / "data/train/part-0001.jsonl").write_text("{}\n")
    report = verify_manifest(manifest, signature=False)
    rows = [f for f in report.findings if f.field == "data[0].digest"]
    assert [f.rule for f in rows] == ["drift.data"]
    assert "cannot be named" in (rows[0].hint or "")
    assert not report.ok


@pytest.mark.parametrize("forge", ["renamed", "truncated", "garbage", "fifo", "symlink"])
def test_a_list_that_is_not_the_pinned_one_names_nothing(env: Path, forge: str) -> None:
    manifest = _locked(env, 5)
    listing = _pinned_list(manifest)
    raw = listing.read_bytes()
    state = foldercache.read(listing)
    assert state is not None
    listing.unlink()
    if forge == "renamed":  # names part-0003 where the pin has part-0002, digest kept
        names = state.names.replace(b"part-0002", b"part-0003", 1)
        foldercache.store(env_cache(), foldercache.State(**{**vars(state), "names": names}))
        assert listing.is_file()
    elif forge == "truncated":
        listing.write_bytes(raw[:-9])
    elif forge == "garbage":
        listing.write_bytes(b"junk" + raw)
    elif forge == "fifo":
        os.mkfifo(listing)
    else:
        real = env / "elsewhere.tree"
        real.write_bytes(raw)
        listing.symlink_to(real)  # the right bytes, but not a file of the cache
    (manifest.parent / "data/train/part-0001.jsonl").write_text("{}\n")
    report = verify_manifest(manifest, signature=False)
    assert not [f for f in report.findings if f.rule == "drift.data-shard"]
    assert [f.rule for f in report.findings if f.field == "data[0].digest"] == ["drift.data"]
    assert not report.ok
