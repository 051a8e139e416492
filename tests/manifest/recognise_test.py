"""Which of the files pre-commit hands over are manifests: by content, or plainly meant.

Each kind of file a project commits beside its manifests (pre-commit's own
config, CI workflows, a model's config.json, package.json, pyproject.toml,
Kubernetes manifests in a manifests/ folder) is passed over; a manifest is
recognised wherever it lies, and a broken file meant as one is still linted.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from ftmanifest.manifest.recognise import is_manifest, manifests_among
from tests.conftest import CLF, ROOT

NOT_MANIFESTS = {
    ".pre-commit-config.yaml": "repos:\n  - repo: local\n    hooks:\n      - id: ftmanifest-lint\n",
    ".github/workflows/ci.yml": "jobs:\n  ftmanifest:\n    steps:\n      - run: ftmanifest lint\n",
    "model/config.json": '{"model_type": "llama", "hidden_size": 8}\n',
    "package.json": '{"name": "web", "ftmanifest": {"strict": true}}\n',
    "pyproject.toml": '[project]\nname = "x"\n[tool.ftmanifest]\nftmanifest = 1\n',
    "manifests/k8s.yaml": "apiVersion: v1\nkind: Pod\n---\napiVersion: v1\nkind: Service\n",
    "manifests/tagged.yaml": "Resources:\n  Bucket: !Ref Name\n",
    "notes.yaml": "broken: [yaml\n",  # broken, but nothing says it is a manifest
    "data.json": '[{"text": "ftmanifest: 1"}]\n',  # the words, inside a value
    "binary.yaml": "",  # written as bytes below
}
MANIFESTS = {
    "exp.yaml": CLF.read_text(),
    "manifests/exp.yaml": CLF.read_text(),
    "deep/in/the/tree/exp.yml": CLF.read_text(),
    "exp.json": '{"experiment": {"id": "x"}, "ftmanifest": 1}\n',
    "exp.toml": 'ftmanifest = 1\n[experiment]\nid = "x"\n',
    "quoted.yaml": '"ftmanifest": "1"\n',  # a wrong version is lint's to report
    "sections.yaml": "ftmanifest:\nexperiment: {id: x}\nmodel: {repo: a/b}\n",
    # meant as one, broken or incomplete: lint reports why
    "exp.ftm.yaml": "not: a manifest\n",
    "exp.ftm.json": "{broken\n",
    "broken.yaml": "ftmanifest: 1\nexperiment: [never closed\n",
    "broken.json": '{\n  "ftmanifest": 1,\n  "experiment": \n}\n',
    "broken.toml": "ftmanifest = 1\n[experiment\n",
    "twice.yaml": "ftmanifest: 1\nftmanifest: 1\n",  # duplicate keys
    "manifests/broken.yaml": "experiment: [never closed\n",
    "manifests/no-version.yaml": "experiment: {id: x}\nmodel: {repo: a/b}\n",
    "manifests/latin1.yaml": "",  # written as bytes below
}


@pytest.fixture
def files(tmp_path: Path) -> Path:
    for name, text in {**NOT_MANIFESTS, **MANIFESTS}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "binary.yaml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    (tmp_path / "manifests" / "latin1.yaml").write_bytes(b"experiment: caf\xe9\n")
    return tmp_path


@pytest.mark.parametrize("name", sorted(NOT_MANIFESTS))
def test_other_files_are_passed_over(files: Path, name: str) -> None:
    assert not is_manifest(str(files / name))


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_manifests_and_files_meant_as_one_are_linted(files: Path, name: str) -> None:
    assert is_manifest(str(files / name))


def test_an_unreadable_file_is_left_to_lint_to_report(tmp_path: Path) -> None:
    assert is_manifest(str(tmp_path / "gone.yaml"))


def test_the_order_is_kept_and_relative_paths_work(
    files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(files)
    names = ["package.json", "manifests/exp.yaml", "notes.yaml", "exp.yaml"]
    assert manifests_among(names) == ["manifests/exp.yaml", "exp.yaml"]


def test_each_file_costs_well_under_100_ms(files: Path) -> None:
    names = sorted({**NOT_MANIFESTS, **MANIFESTS})
    is_manifest(str(files / "exp.yaml"))  # the YAML and TOML parsers imported once
    is_manifest(str(files / "exp.toml"))
    for name in names:
        start = time.perf_counter()
        is_manifest(str(files / name))
        assert time.perf_counter() - start < 0.1, name


def test_the_hook_imports_no_torch_and_no_pydantic(files: Path) -> None:
    """As pre-commit runs it: every kind of file at once, in a fresh interpreter."""
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['ftmanifest-lint', *{sorted(NOT_MANIFESTS)!r}, 'exp.yaml']\n"
        "try:\n"
        f"    runpy.run_path({str(ROOT / 'hooks' / 'ftmanifest-lint')!r}, run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "heavy = sorted(m for m in ('torch', 'pydantic', 'numpy') if m in sys.modules)\n"
        "print(code, heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=files, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stdout + done.stderr
