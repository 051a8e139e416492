"""``init`` without --from: the template's content, and init starts without torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli


def test_the_template_names_what_a_user_must_write(tmp_path: Path) -> None:
    manifest = tmp_path / "exp.yaml"
    result = run_cli("init", str(manifest), "--format", "json")
    assert result.returncode == 0, result.stderr
    text = manifest.read_text()
    needed_lines = ("  optimizer:", "modules_to_save:", "  code:", "pip-compile", "uv pip compile")
    for needed in (*needed_lines, "pip freeze > requirements.lock"):
        assert needed in text, needed
    payload = json.loads(result.stdout)
    assert {"field": "experiment.hypothesis"}.items() <= payload["fill"][0].items()


@pytest.mark.parametrize("from_", [False, True])
def test_schema_is_the_published_id_never_a_path_of_this_machine(
    tmp_path: Path, from_: bool
) -> None:
    from ftmanifest.manifest.schema import SCHEMA_ID

    (tmp_path / "args.json").write_text('{"output_dir": "o", "per_device_train_batch_size": 1}')
    manifest = tmp_path / "exp.yaml"
    more = ["--from", str(tmp_path / "args.json")] if from_ else []
    result = run_cli("init", str(manifest), *more)
    assert result.returncode == 0, result.stderr
    text = manifest.read_text()
    assert text.splitlines()[0] == f"# yaml-language-server: $schema={SCHEMA_ID}"
    assert str(tmp_path) not in text  # the --from paths are named relative to the manifest
    assert "site-packages" not in text and "file:" not in text


@pytest.mark.parametrize("from_", [False, True])
def test_schema_is_the_repositorys_committed_copy_by_a_relative_path(
    tmp_path: Path, from_: bool
) -> None:
    from tests.conftest import git

    git(tmp_path, "init", "-q")
    (tmp_path / "schema").mkdir()
    (tmp_path / "schema" / "ftmanifest.schema.json").write_text(run_cli("schema").stdout)
    (tmp_path / "manifests").mkdir()
    (tmp_path / "args.json").write_text('{"output_dir": "o", "per_device_train_batch_size": 1}')
    manifest = tmp_path / "manifests" / "exp.yaml"
    more = ["--from", str(tmp_path / "args.json")] if from_ else []
    assert run_cli("init", str(manifest), *more).returncode == 0
    line = manifest.read_text().splitlines()[0]
    assert line == "# yaml-language-server: $schema=../schema/ftmanifest.schema.json"
    schema = manifest.parent / line.split("$schema=", 1)[1]
    assert json.loads(schema.read_text())["title"]  # what an editor opens, offline


@pytest.mark.parametrize("from_", [False, True])
def test_init_does_not_import_torch(tmp_path: Path, from_: bool) -> None:
    (tmp_path / "args.json").write_text('{"output_dir": "o", "per_device_train_batch_size": 1}')
    argv = ["init", str(tmp_path / "m.yaml")] + (
        ["--from", str(tmp_path / "args.json")] if from_ else []
    )
    code = (
        "import sys\nfrom ftmanifest.cli import main\n"
        f"rc = main({argv!r})\n"
        "print('RC', rc, sorted(m for m in ('torch', 'transformers', 'peft', 'trl') "
        "if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "RC 0 []" in out.stdout, out.stdout + out.stderr
