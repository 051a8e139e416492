"""Shared helpers for the signing tests (plain functions, no fixtures magic)."""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ftmanifest.signing.keys import public_key_line
from ftmanifest.signing.sign import sign_manifest

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)

CANONICAL: dict[str, Any] = {
    "ftmanifest": 1,
    "experiment": {"id": "exp-1", "task": "classification", "hypothesis": "héllo wörld"},
    "seeds": [1, 2, 3],
    "training": {"lr": 0.0002, "rank": 16, "enabled": True, "note": None},
}


def trust_line(
    key: Ed25519PrivateKey, principal: str = "alice@example.org", options: str | None = None
) -> str:
    opts = 'namespaces="ftmanifest"' if options is None else options
    parts = [principal, opts, public_key_line(key.public_key(), "test key")]
    return " ".join(p for p in parts if p)


def git_init(folder: Path) -> Path:
    """A real (empty) git repository at ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True, timeout=30)
    return folder


def repo(tmp_path: Path, lines: list[str], name: str = "exp.yaml") -> Path:
    """A git repository with a trust file; returns the manifest path (not created)."""
    if not (tmp_path / ".git").exists():
        git_init(tmp_path)
    trust = tmp_path / ".ftmanifest" / "allowed_signers"
    trust.parent.mkdir(exist_ok=True)
    trust.write_text("\n".join(lines) + "\n", encoding="utf-8")
    sub = tmp_path / "manifests"
    sub.mkdir(exist_ok=True)
    return sub / name


def signed(
    tmp_path: Path,
    keys: list[Ed25519PrivateKey],
    trusted: list[str],
    canonical: dict[str, Any] | None = None,
) -> Path:
    manifest = repo(tmp_path, trusted)
    for key in keys:
        sign_manifest(manifest, canonical or CANONICAL, key)
    return manifest
