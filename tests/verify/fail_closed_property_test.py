"""Property: after any single change to what would be loaded, verify never says OK.

A locked example (local model folder, a data folder of shards, single data
files, pinned scripts) and a hub-cache example are copied fresh for every
Hypothesis example, verified once (which fills the stat cache, as a user's
earlier run would), mutated once, and verified again through the cache.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ftmanifest.errors import FtManifestError
from ftmanifest.verify import verify_manifest
from ftmanifest.verify.lock import lock_manifest
from tests.conftest import ENV, HUB_MANIFEST, git, write_project
from tests.support.hubcache import build_hub_cache

Mutation = Callable[[Path, st.DataObject], None]


def _local_template(root: Path) -> Path:
    shards: dict[str, str | None] = {
        "data/train.jsonl": None,
        "model/tokenizer.json": '{"version": "1.0"}\n',
        "data/shards/part0.jsonl": "".join(f'{{"text": "a{i}"}}\n' for i in range(4)),
        "data/shards/part1.jsonl": "".join(f'{{"text": "b{i}"}}\n' for i in range(3)),
    }
    return write_project(root, shards, train="data/shards")


def _hub_template(root: Path) -> Path:
    for name, weights in (("v1", b"weights one" * 100), ("v2", b"weights two" * 100)):
        folder = root / "src" / name
        folder.mkdir(parents=True)
        (folder / "config.json").write_text('{"model_type": "llama"}')
        (folder / "model.safetensors").write_bytes(weights)
    build_hub_cache(
        root / "hf-cache",
        "org/tiny",
        {"v1": root / "src" / "v1", "v2": root / "src" / "v2"},
        {"main": "v2"},
    )
    (root / "train.jsonl").write_text('{"text": "a"}\n{"text": "b"}\n')
    (root / "exp.yaml").write_text(HUB_MANIFEST)
    os.environ["HF_HUB_CACHE"] = str(root / "hf-cache")
    lock_manifest(root / "exp.yaml")
    return root / "exp.yaml"


@pytest.fixture(scope="module")
def templates() -> Iterator[dict[str, Path]]:
    names = (*ENV, "HF_HUB_CACHE", "HF_HUB_OFFLINE", "FTMANIFEST_CACHE_DIR")
    keep = {k: os.environ.get(k) for k in names}
    os.environ.update(ENV)
    os.environ["HF_HUB_OFFLINE"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "local").mkdir()
        (base / "hub").mkdir()
        yield {"local": _local_template(base / "local"), "hub": _hub_template(base / "hub")}
    for k, v in keep.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


# --- mutations ----------------------------------------------------------------


def _regular_files(root: Path, under: str) -> list[Path]:
    top = root / under
    return sorted(p for p in top.rglob("*") if p.is_file() and not p.is_symlink())


def _pick(data: st.DataObject, items: list[Path]) -> Path:
    return data.draw(st.sampled_from(items))


def _flip_byte(root: Path, data: st.DataObject, files: list[Path]) -> None:
    """One bit flipped in place, mtime and atime put back (ctime cannot be)."""
    path = _pick(data, files)
    st_before = path.stat()
    raw = bytearray(path.read_bytes())
    i = data.draw(st.integers(0, len(raw) - 1))
    raw[i] ^= 1 << data.draw(st.integers(0, 7))
    with path.open("r+b") as fh:
        fh.write(raw)
    os.utime(path, ns=(st_before.st_atime_ns, st_before.st_mtime_ns))


def local_mutations(root: Path) -> dict[str, Mutation]:
    pinned = ["model", "data", "scripts", "eval"]

    def flip(r: Path, d: st.DataObject) -> None:
        _flip_byte(r, d, [p for u in pinned for p in _regular_files(r, u)])

    def append_record(r: Path, d: st.DataObject) -> None:
        path = _pick(d, _regular_files(r, "data"))
        with path.open("a") as fh:
            fh.write('{"text": "planted"}\n')

    def swap(r: Path, d: st.DataObject) -> None:
        a, b = r / "data/eval.jsonl", r / "data/test.jsonl"
        if d.draw(st.booleans()):
            a, b = r / "data/shards/part0.jsonl", r / "data/shards/part1.jsonl"
        tmp = a.with_suffix(".swap")
        a.rename(tmp)
        b.rename(a)
        tmp.rename(b)

    def special(r: Path, d: st.DataObject) -> None:
        folder = r / d.draw(st.sampled_from(["data/shards", "model"]))
        name = d.draw(st.sampled_from(["part9.jsonl", "extra.bin", ".hidden"]))
        os.mkfifo(folder / name)

    def new_shard(r: Path, d: st.DataObject) -> None:
        (r / "data/shards" / d.draw(st.sampled_from(["part2.jsonl", ".x.jsonl"]))).write_text(
            '{"text": "new"}\n'
        )

    def remove(r: Path, d: st.DataObject) -> None:
        _pick(d, [p for u in pinned for p in _regular_files(r, u)]).unlink()

    def symlink_swap(r: Path, d: st.DataObject) -> None:
        target = r / "data/eval.jsonl"
        target.unlink()
        target.symlink_to("test.jsonl")

    def duplicate_name(r: Path, d: st.DataObject) -> None:
        m = r / "exp.yaml"
        m.write_text(m.read_text().replace("  - name: eval\n", "  - name: train\n", 1))

    def loose_pin(r: Path, d: st.DataObject) -> None:
        m = r / "exp.yaml"
        text = m.read_text()
        line = next(t for t in text.splitlines() if t.strip().startswith("torch:"))
        spec = d.draw(st.sampled_from([">=1", "~=2.13", "*", "2.13.0", "!=1.0"]))
        m.write_text(text.replace(line, f"    torch: '{spec}'", 1))

    def code_change(r: Path, d: st.DataObject) -> None:
        (r / "train.py").write_text("print('changed')\n")
        if d.draw(st.booleans()):
            git(r, "add", "train.py")
            git(r, "commit", "-qm", "more code")

    return {
        "flip": flip,
        "append": append_record,
        "swap": swap,
        "special": special,
        "new-shard": new_shard,
        "remove": remove,
        "symlink-swap": symlink_swap,
        "duplicate-name": duplicate_name,
        "loose-pin": loose_pin,
        "code": code_change,
    }


def hub_mutations(root: Path) -> dict[str, Mutation]:
    repo = root / "hf-cache" / "models--org--tiny"

    def snapshot(r: Path) -> Path:
        text = (r / "exp.yaml").read_text()
        commit = next(t for t in text.splitlines() if "revision:" in t).split()[1]
        return repo / "snapshots" / commit

    def flip_blob(r: Path, d: st.DataObject) -> None:
        _flip_byte(r, d, [p.resolve() for p in snapshot(r).iterdir()])

    def relink(r: Path, d: st.DataObject) -> None:
        other = next(p for p in (repo / "snapshots").iterdir() if p != snapshot(r))
        link = snapshot(r) / "model.safetensors"
        target = os.readlink(other / "model.safetensors")
        link.unlink()
        link.symlink_to(target)

    def extra_weight(r: Path, d: st.DataObject) -> None:
        (snapshot(r) / "adapter_model.safetensors").write_bytes(b"x" * 64)

    def drop_snapshot(r: Path, d: st.DataObject) -> None:
        shutil.rmtree(snapshot(r))

    def flip_data(r: Path, d: st.DataObject) -> None:
        _flip_byte(r, d, [r / "train.jsonl"])

    return {
        "flip-blob": flip_blob,
        "relink": relink,
        "extra-weight": extra_weight,
        "drop-snapshot": drop_snapshot,
        "flip-data": flip_data,
    }


# --- the property -------------------------------------------------------------


def _verdict(manifest: Path) -> bool:
    """True when verify says OK; any refusal or clean error is False."""
    out: dict[str, Any] = {}

    def work() -> None:
        try:
            out["ok"] = verify_manifest(manifest, signature=False).ok
        except FtManifestError:
            out["ok"] = False

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "verify blocked"
    return bool(out["ok"])


LOCAL_KINDS = sorted(local_mutations(Path()))
HUB_KINDS = sorted(hub_mutations(Path()))


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    which=st.sampled_from([("local", k) for k in LOCAL_KINDS] + [("hub", k) for k in HUB_KINDS]),
    data=st.data(),
)
def test_verify_never_says_ok_after_a_mutation(
    templates: dict[str, Path], which: tuple[str, str], data: st.DataObject
) -> None:
    example, kind = which
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "work"
        shutil.copytree(templates[example].parent, root, symlinks=True)
        os.environ["FTMANIFEST_CACHE_DIR"] = str(Path(tmp) / "cache")
        if example == "hub":
            os.environ["HF_HUB_CACHE"] = str(root / "hf-cache")
        manifest = root / "exp.yaml"
        assert _verdict(manifest), "the unmutated copy must verify"
        mutations = local_mutations(root) if example == "local" else hub_mutations(root)
        mutations[kind](root, data)
        assert not _verdict(manifest), f"verify said OK after {kind}"
