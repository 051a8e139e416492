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
    schema = text.splitlines()[0].split("$schema=", 1)[1]
    assert not schema.startswith("http")
    path = Path(schema.removeprefix("file://")) if schema.startswith("file:") else tmp_path / schema
    assert json.loads(path.read_text())["title"]  # the packaged schema, read offline
    payload = json.loads(result.stdout)
    assert {"field": "experiment.hypothesis"}.items() <= payload["fill"][0].items()


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
