"""Helpers for the init --from tests: a hub cache, a project, running init.

Layer: tests (support).  The hub cache is laid out as huggingface_hub writes
it (``tests.support.hubcache``); nothing touches the network.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.hubcache import build_hub_cache

CARD = b"---\nlicense: apache-2.0\nlibrary_name: transformers\n---\n# tiny\n"


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """org/tiny in a hub cache (main -> v1), HF_HUB_CACHE pointing at it, offline."""
    src = tmp_path / "src-v1"
    src.mkdir()
    (src / "config.json").write_text('{"model_type": "llama"}')
    (src / "model.safetensors").write_bytes(b"weights" * 64)
    (src / "README.md").write_bytes(CARD)
    cache = tmp_path / "hf-cache"
    commits = build_hub_cache(cache, "org/tiny", {"v1": src}, {"main": "v1"})
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "ftm-cache"))
    return commits


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder with train and test JSONL files."""
    work = tmp_path / "project"
    (work / "data").mkdir(parents=True)
    (work / "data" / "train.jsonl").write_text(
        '{"instruction": "a", "output": "b"}\n{"instruction": "c", "output": "d"}\n'
    )
    (work / "data" / "test.jsonl").write_text('{"instruction": "e", "output": "f"}\n')
    return work


def init_from(
    capsys: pytest.CaptureFixture[str], manifest: Path, *sources: str | Path
) -> tuple[int, dict[str, Any], str]:
    """Run ``init MANIFEST --from SOURCES --format json``: (exit code, payload, stderr)."""
    from ftmanifest.cli import main

    capsys.readouterr()
    rc = main(["init", str(manifest), "--force", "--format", "json", "--from", *map(str, sources)])
    out = capsys.readouterr()
    payload = json.loads(out.out) if out.out.strip() else {}
    return rc, payload, out.err


def derived(payload: dict[str, Any]) -> dict[str, Any]:
    """field -> value of what init derived."""
    return {d["field"]: d["value"] for d in payload["derived"]}


def fills(payload: dict[str, Any]) -> list[str]:
    return [f["field"] for f in payload["fill"]]
