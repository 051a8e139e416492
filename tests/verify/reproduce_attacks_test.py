"""``reproduce`` fed a hostile manifest.

The requirements file is read by pip, which takes any line starting with ``-``
as an option (``--extra-index-url``, ``-e git+...``) and splits lines wherever
``str.splitlines`` does; the printed commands are pasted into a shell.  So a
package name must be a PEP 508 name, a value one line holding a PEP 440
version or specifier, ``model.repo`` a hub repo id, and every printed command
is quoted for the shell - whoever signed the manifest: a trusted key signs
what a colleague meant, not what pip or a shell makes of it.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path

import pytest

from tests.conftest import hub_project, run_cli

REV = "0123456789abcdef0123456789abcdef01234567"
TRAIN = "data:\n  - {name: train, role: train, path: train.jsonl, license: test}\n"


def _manifest(folder: Path, packages: dict[str, str], repo: str = "org/tiny") -> Path:
    """A manifest whose ``environment.packages`` is ``packages`` (as JSON strings,
    so any character survives YAML)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.jsonl").write_text('{"text": "a"}\n')
    lines = "".join(f"    {json.dumps(k)}: {json.dumps(v)}\n" for k, v in packages.items())
    path = folder / "exp.yaml"
    path.write_text(
        f"ftmanifest: 1\nexperiment: {{id: x}}\nmodel: {{repo: {json.dumps(repo)}, "
        f"revision: {REV}}}\n{TRAIN}environment:\n  packages:\n{lines}"
    )
    return path


def _refused(path: Path, field: str) -> str:
    """Lint and reproduce refuse the manifest as unusable (exit 2, a schema problem)
    naming ``field``, with no traceback and no requirements file written; reproduce's
    stderr."""
    lint = run_cli("lint", str(path), "--format", "json")
    assert lint.returncode == 2, lint.stdout + lint.stderr
    fields = [p["field"] for p in json.loads(lint.stdout)["findings"] if p["rule"] == "FTM000"]
    assert any(str(f).startswith(field) for f in fields), fields
    result = run_cli("reproduce", str(path), "--no-signature")
    assert result.returncode == 2, result.stdout + result.stderr
    assert field in result.stderr and "Traceback" not in result.stderr
    assert not path.with_name("exp.requirements.txt").exists()
    return result.stderr


@pytest.mark.parametrize(
    "name",
    [
        "--extra-index-url https://evil.example/simple #",
        "-e git+https://evil.example/x",
        "numpy; python_version > '3'",
        "numpy\n-i https://evil.example/simple",
        "nu mpy",
    ],
)
def test_a_package_name_that_is_no_pep508_name_is_refused(tmp_path: Path, name: str) -> None:
    path = _manifest(tmp_path / "p", {name: "==1.0", "numpy": "==2.4.6"})
    stderr = _refused(path, "environment.packages")
    assert "PEP 508" in stderr


@pytest.mark.parametrize(
    "value",
    [
        "==1.0\n-e git+https://evil.example/x",
        "==1.0\r--index-url https://evil.example/simple",
        ">=1\u2028-e git+https://evil.example/x",  # str.splitlines() breaks here too
        ">=1\x85-e git+https://evil.example/x",
        ">=1\x1e-e git+https://evil.example/x",
    ],
)
def test_a_value_that_breaks_out_of_its_line_is_refused(tmp_path: Path, value: str) -> None:
    path = _manifest(tmp_path / "p", {"numpy": value})
    _refused(path, "environment.packages.numpy")


@pytest.mark.parametrize(
    "value",
    [
        "--index-url https://evil.example/simple",
        "==1.0 --hash=sha256:" + "0" * 64,
        "==not-a-version",
        ">=1.0 # --extra-index-url https://evil.example/simple",
    ],
)
def test_a_value_that_is_no_version_is_refused_before_anything_is_written(
    tmp_path: Path, value: str
) -> None:
    """One line, but no PEP 440 version or specifier: reproduce names the field,
    what it expected, what it saw (escaped) and the fix, and writes nothing."""
    path = _manifest(tmp_path / "p", {"numpy": value, "packaging": "==24.0"})
    result = run_cli("reproduce", str(path), "--no-signature", "--format", "json")
    assert result.returncode == 2, result.stdout + result.stderr
    error = json.loads(result.stdout)["error"]
    assert error["field"] == "environment.packages.numpy", error
    assert "PEP 440" in error["expected"] and error["observed"] == repr(value)
    assert "ftmanifest lock" in error["hint"]
    assert not path.with_name("exp.requirements.txt").exists()
    text = run_cli("reproduce", str(path), "--no-signature")
    assert text.returncode == 2 and "environment.packages.numpy" in text.stderr
    assert "Traceback" not in text.stderr


@pytest.mark.parametrize(
    "repo",
    [
        "org/tiny --local-dir /tmp/x; touch pwned",
        "org/tiny$(touch pwned)",
        "org/tiny\nrm -rf ~",
        "-h",
    ],
)
def test_a_model_repo_that_is_no_hub_id_is_refused(tmp_path: Path, repo: str) -> None:
    path = _manifest(tmp_path / "p", {"numpy": "==2.4.6"}, repo=repo)
    stderr = _refused(path, "model.repo")
    assert "org/name" in stderr
    assert not (tmp_path / "p" / "pwned").exists()


def test_every_printed_command_is_quoted_for_the_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paths with spaces and shell words in them (the --requirements path, the
    manifest's lock file) come out as one shell word each."""
    lock_name = "locks/my lock;touch pwned.txt"
    lock_text = "numpy==2.4.6\n"
    manifest = (
        "ftmanifest: 1\nexperiment: {id: hub-exp}\n"
        f"model: {{repo: org/tiny, revision: {REV}}}\n{TRAIN}"
        f"environment:\n  lock: {{path: {json.dumps(lock_name)}, digest: "
        f"'sha256:{hashlib.sha256(lock_text.encode()).hexdigest()}'}}\n"
    )
    path, _ = hub_project(tmp_path, monkeypatch, {"v1": {"config.json": b"{}"}}, "v1", manifest)
    (path.parent / "locks").mkdir()
    (path.parent / lock_name).write_text(lock_text)
    req = tmp_path / "req dir $(touch pwned)" / "a;b.txt"
    req.parent.mkdir()
    result = run_cli(
        "reproduce", str(path), "--no-signature", "--requirements", str(req), "--format", "json"
    )
    assert result.returncode == 1, result.stdout + result.stderr
    commands = json.loads(result.stdout)["commands"]
    assert [shlex.split(c) for c in commands] == [
        ["pip", "install", "-r", str(req)],
        ["pip", "install", "-r", str(path.parent / lock_name)],
        ["hf", "download", "org/tiny", "--revision", REV],
    ], commands
    text = run_cli("reproduce", str(path), "--no-signature", "--requirements", str(req))
    assert f"  pip install -r {shlex.quote(str(req))}\n" in text.stdout, text.stdout
