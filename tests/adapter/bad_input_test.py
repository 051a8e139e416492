"""bind and check-adapter against every bad input of the CLI's bad-input table.

The same manifests as ``tests/cli/cli_bad_input_test.py`` (its ``bad`` fixture and
``MANIFEST_INPUTS``), and bad adapter folders: a user mistake is exit 1 or 2
with a message, never exit 3 or a traceback.  In-process, one fixture for all
rows, so the table costs seconds.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ftmanifest.cli import main
from tests.cli.cli_bad_input_test import MANIFEST_INPUTS, bad, template  # noqa: F401 (fixtures)
from tests.conftest import within


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    def call() -> int:
        try:
            return main(argv)
        except SystemExit as exc:  # argparse
            return int(exc.code or 0)

    rc = within(30, call)
    out = capsys.readouterr()
    return rc, out.out + out.err


def test_bad_manifests(
    bad: dict[str, Path],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("FTMANIFEST_DEBUG", raising=False)
    key = bad["missing"].with_name("no-key")
    for name in MANIFEST_INPUTS:
        m = str(bad[name])
        for argv in (
            ["bind", str(bad["dir"]), "--manifest", m, "--key", str(key)],
            ["check-adapter", str(bad["dir"]), "--manifest", m],
        ):
            rc, text = _run(capsys, argv)
            assert rc in (1, 2) and "internal error" not in text, (name, argv[0], rc, text)


def test_bad_adapter_folders(
    models: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import shutil

    monkeypatch.delenv("FTMANIFEST_DEBUG", raising=False)
    monkeypatch.setenv("FTMANIFEST_TRUST_FILE", str(tmp_path / "no-trust"))
    cases: dict[str, Path] = {"missing": tmp_path / "absent", "file": tmp_path / "f"}
    cases["file"].write_text("x")

    def adapter(name: str, rel: str, data: bytes | None) -> None:
        folder = shutil.copytree(models["gpt2-adapter"], tmp_path / name)
        target = folder / rel
        target.unlink(missing_ok=True)
        if data is None:
            os.mkfifo(target)
        else:
            target.write_bytes(data)
        cases[name] = folder

    adapter("config-garbage", "adapter_config.json", b"\xff\x00{")
    adapter("config-list", "adapter_config.json", b"[1, 2]")
    adapter("config-fifo", "adapter_config.json", None)
    adapter("weights-garbage", "adapter_model.safetensors", b"\x10\x00\x00\x00\x00\x00\x00\x00{")
    adapter("weights-fifo", "adapter_model.safetensors", None)
    adapter("envelope-garbage", "ftmanifest-binding.sig.json", b"{not json")
    adapter("envelope-fifo", "ftmanifest-binding.sig.json", None)
    adapter("trust-missing", "ftmanifest-binding.sig.json", b'{"payload": ""}')
    for name, folder in cases.items():
        for base in (models["gpt2-a"], tmp_path / "no-base"):
            rc, text = _run(capsys, ["check-adapter", str(folder), "--base", str(base)])
            assert rc in (1, 2) and "internal error" not in text, (name, rc, text)
    rc, text = _run(capsys, ["check-adapter", str(models["gpt2-adapter"]), "--base-repo", "o/x",
                             "--revision", "0" * 40])  # fmt: skip
    assert rc == 2 and "o/x" in text, text
