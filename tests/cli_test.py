"""End-to-end: the real console entry point in a fresh interpreter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftmanifest import __version__
from ftmanifest.cli import main
from tests.conftest import CLF, EXAMPLES, ROOT, run_cli


def test_lint_examples_exit_0() -> None:
    result = run_cli("lint", *map(str, EXAMPLES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""
    assert f"{len(EXAMPLES)} manifest(s) pinned" in result.stderr


def test_unpinned_revision_exits_1_naming_the_line(mutate) -> None:  # type: ignore[no-untyped-def]
    path = mutate("  revision: ", "  revision: main  # was: ")
    result = run_cli("lint", str(path))
    assert result.returncode == 1
    line_no = next(
        i for i, t in enumerate(path.read_text().splitlines(), 1) if "revision: main" in t
    )
    assert result.stdout.startswith(f"{path}:{line_no}:3: FTM001 model.revision:")
    assert "observed main" in result.stdout and "(fix: " in result.stdout


def test_unknown_field_exits_2_naming_it(mutate) -> None:  # type: ignore[no-untyped-def]
    path = mutate("  seq_len: 1024", "  seq_length: 1024")
    result = run_cli("lint", str(path))
    assert result.returncode == 2
    assert "training.seq_length: unknown field 'seq_length'" in result.stdout
    assert "did you mean 'seq_len'?" in result.stdout
    assert "Traceback" not in result.stderr


def test_lint_json_output(mutate) -> None:  # type: ignore[no-untyped-def]
    path = mutate("  grad_accum: 4\n", "")
    result = run_cli("lint", "--format", "json", str(path), str(CLF))
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["files"] == 2 and report["unusable"] == 0
    [finding] = report["findings"]
    assert finding["rule"] == "FTM060" and finding["field"] == "training.grad_accum"
    assert finding["path"] == str(path) and finding["line"] > 1


def test_lint_sarif_output(mutate) -> None:  # type: ignore[no-untyped-def]
    import jsonschema

    path = mutate("    records: 2000\n", "", source=CLF)
    result = run_cli("lint", "--format", "sarif", str(path))
    log = json.loads(result.stdout)
    schema = json.loads((ROOT / "tests" / "fixtures" / "sarif-2.1.0.json").read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(log)
    assert log["runs"][0]["results"][0]["ruleId"] == "FTM040"


def test_missing_file_exits_2(tmp_path: Path) -> None:
    result = run_cli("lint", str(tmp_path / "absent.yaml"))
    assert result.returncode == 2
    assert "manifest not found" in result.stdout


def test_schema_command_prints_the_committed_schema() -> None:
    result = run_cli("schema")
    assert result.returncode == 0
    assert result.stdout == (ROOT / "schema" / "ftmanifest.schema.json").read_text("utf-8")


def test_digest_ignores_comments_and_changes_with_values(tmp_path: Path) -> None:
    copy = tmp_path / "c.yaml"
    copy.write_text(CLF.read_text().replace("# every department", "# edited comment"))
    first = run_cli("digest", str(CLF)).stdout.split()[0]
    assert run_cli("digest", str(copy)).stdout.split()[0] == first
    copy.write_text(CLF.read_text().replace("data_order: 42", "data_order: 43"))
    assert run_cli("digest", str(copy)).stdout.split()[0] != first
    assert first.startswith("sha256:") and len(first) == 71


def test_init_template_is_valid_but_refused_by_lint(tmp_path: Path) -> None:
    path = tmp_path / "new-exp.yaml"
    assert run_cli("init", str(path)).returncode == 0
    result = run_cli("lint", str(path))
    assert result.returncode == 1, result.stdout
    rules = {line.split()[1] for line in result.stdout.splitlines()}
    assert {"FTM001", "FTM010", "FTM030", "FTM041", "FTM050", "FTM070"} <= rules
    assert "experiment:\n  id: new-exp" in path.read_text()
    again = run_cli("init", str(path))
    assert again.returncode == 2 and "not overwriting" in again.stderr


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"ftmanifest {__version__}"


def test_usage_error_exits_2() -> None:
    result = run_cli("lint")
    assert result.returncode == 2 and "usage:" in result.stderr


@pytest.mark.parametrize("command", [["lint"], ["digest"], ["scan"], ["signers"]])
def test_fast_commands_do_not_import_heavy_frameworks(command: list[str]) -> None:
    code = (
        "import sys\n"
        "from ftmanifest.cli import main\n"
        f"rc = main({command + [str(CLF)]!r})\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules)\n"
        "print('HEAVY', heavy)\n"
    )
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr


def test_lint_does_not_build_pydantic_models() -> None:
    code = (
        "import sys\n"
        "from ftmanifest.cli import main\n"
        f"main(['lint', {str(CLF)!r}])\n"
        "print('MODEL', 'ftmanifest.manifest.model' in sys.modules)\n"
    )
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "MODEL False" in out.stdout, out.stdout + out.stderr
