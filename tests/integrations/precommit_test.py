"""The real pre-commit runs our hook from a real git repository at a commit.

One test installs the hook as a user's config names it (pre-commit builds its
virtualenv with pip, so it needs the package index); the others run the hook
as ``.pre-commit-hooks.yaml`` defines it (its name and file filters) from this
checkout, offline, through ``git commit`` with the hook installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLF, EXTRACT, GIT_ENV, ROOT


def _git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def _snapshot_of_this_project(dest: Path) -> str:
    """A git repo holding this working tree (tracked and untracked, not ignored)."""
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-qm", "snapshot")
    return _git(dest, "rev-parse", "HEAD")


def _skip_unless_index_reachable(dest: Path) -> None:
    """Skip when pip cannot fetch this project's build backend.

    The real pre-commit installs the hook (``language: python``) into a fresh
    virtualenv with pip, from whatever index pip is configured for; without
    one that answers, the test would fail for a reason that is not ours.
    """
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--dest", str(dest)]
    cmd += ["--timeout", "5", "--retries", "0", "--quiet", *requires]
    try:
        got = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        why = "timed out"
    else:
        if got.returncode == 0:
            return
        why = ((got.stderr or got.stdout).strip().splitlines() or ["no output"])[-1]
    pytest.skip(
        f"package index unreachable: pip cannot download {', '.join(requires)} ({why}); "
        "the real pre-commit installs the hook with pip"
    )


def test_pre_commit_rejects_unpinned_and_passes_pinned(tmp_path: Path) -> None:
    _skip_unless_index_reachable(tmp_path / "build-backend")
    hook_repo = tmp_path / "ftmanifest-repo"
    hook_repo.mkdir()
    rev = _snapshot_of_this_project(hook_repo)

    user = tmp_path / "user-repo"
    user.mkdir()
    _git(user, "init", "-q")
    (user / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hook_repo}\n    rev: {rev}\n    hooks:\n      - id: ftmanifest-lint\n"
    )
    (user / "exp.yaml").write_text(CLF.read_text())  # where init and the README put it
    (user / "notes.yaml").write_text("not: a manifest\n")  # passed to the hook, passed over
    _git(user, "add", "-A")

    env = {**os.environ, **GIT_ENV, "PRE_COMMIT_HOME": str(tmp_path / "pc-home")}
    env.pop("FTMANIFEST_DEBUG", None)

    def pre_commit() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "run", "--all-files"],
            cwd=user,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )

    passed = pre_commit()
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "ftmanifest lint" in passed.stdout and "Passed" in passed.stdout

    text = CLF.read_text()
    (user / "exp.yaml").write_text(text.replace("  revision: ", "  revision: main  # ", 1))
    _git(user, "add", "-A")
    failed = pre_commit()
    assert failed.returncode == 1, failed.stdout + failed.stderr
    line_no = next(i for i, t in enumerate(text.splitlines(), 1) if t.startswith("  revision: "))
    assert f"exp.yaml:{line_no}:3: FTM001" in failed.stdout
    assert "notes.yaml" not in failed.stdout


def test_hook_entry_point_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    from ftmanifest.integrations.precommit import lint_main

    assert lint_main([]) == 0  # pre-commit matched no manifest
    assert lint_main([str(CLF)]) == 0
    assert lint_main(["--format", "json", str(CLF)]) == 0
    assert '"findings": []' in capsys.readouterr().out
    assert lint_main(["--format=xml", str(CLF)]) == 2
    assert lint_main(["--fix", str(CLF)]) == 2
    assert "unknown option --fix" in capsys.readouterr().err


# --- the hook as .pre-commit-hooks.yaml defines it, run by `git commit` offline ----

WORKFLOW = """\
on: push
jobs:
  ftmanifest:            # a job named like the tool: a key, but not the manifest's
    runs-on: ubuntu-latest
    steps:
      - run: ftmanifest lint exp.yaml
"""
PACKAGE_JSON = '{"name": "web", "ftmanifest": {"strict": true}}\n'  # another tool's settings
MODEL_CONFIG = '{"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 2}\n'


def _local_hook() -> dict[str, object]:
    """Our hook entry as .pre-commit-hooks.yaml has it (name, types_or, files),
    run with this Python from this checkout instead of an installed copy."""
    import shlex

    import yaml
    from pre_commit import all_languages

    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    as_is = "unsupported" if "unsupported" in all_languages.languages else "system"
    entry = f"{shlex.quote(sys.executable)} {shlex.quote(str(ROOT / 'hooks' / 'ftmanifest-lint'))}"
    return {**hook, "language": as_is, "entry": entry, "verbose": True}


@pytest.fixture
def user_repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A git repository with our hook installed by the real pre-commit, and the
    environment a commit in it runs with."""
    import yaml

    user = tmp_path / "user"
    user.mkdir()
    _git(user, "init", "-q")
    config = {"repos": [{"repo": "local", "hooks": [_local_hook()]}]}
    (user / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = {**os.environ, **GIT_ENV, "PRE_COMMIT_HOME": str(tmp_path / "pc-home")}
    env["PYTHONPATH"] = str(ROOT)
    env.pop("FTMANIFEST_DEBUG", None)
    subprocess.run(
        [sys.executable, "-m", "pre_commit", "install"],
        cwd=user, env=env, check=True, capture_output=True,
    )  # fmt: skip
    return user, env


def _commit(user: Path, env: dict[str, str], message: str) -> subprocess.CompletedProcess[str]:
    """``git add -A; git commit``; the hook's report (git prints it on stderr) in stdout."""
    subprocess.run(["git", "add", "-A"], cwd=user, env=env, check=True)
    return subprocess.run(
        ["git", "commit", "-m", message],
        cwd=user, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=300,
    )  # fmt: skip


def _unpinned(text: str) -> str:
    return text.replace("  revision: ", "  revision: main  # ", 1)


def _init_template(where: Path) -> str:
    from ftmanifest.cli import main

    assert main(["init", str(where), "--force"]) == 0
    return where.read_text()


def test_commit_passes_pinned_manifests_and_other_config_files(
    user_repo: tuple[Path, dict[str, str]],
) -> None:
    user, env = user_repo
    (user / "exp.yaml").write_text(CLF.read_text())
    (user / "manifests").mkdir()
    (user / "manifests" / "extract.yaml").write_text(EXTRACT.read_text())
    (user / ".github" / "workflows").mkdir(parents=True)
    (user / ".github" / "workflows" / "ci.yml").write_text(WORKFLOW)
    (user / "package.json").write_text(PACKAGE_JSON)
    (user / "model").mkdir()
    (user / "model" / "config.json").write_text(MODEL_CONFIG)
    done = _commit(user, env, "pinned")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ftmanifest lint" in done.stdout and "Passed" in done.stdout
    # both were linted (pre-commit may split the files among parallel runs of the hook)
    assert sum(map(int, re.findall(r"(\d+) manifest\(s\) pinned", done.stdout))) == 2

    # control: with no manifest staged, the other files alone pass without a word
    (user / ".github" / "workflows" / "ci.yml").write_text(WORKFLOW + "# again\n")
    (user / "model" / "config.json").write_text(MODEL_CONFIG.replace("8", "16"))
    again = _commit(user, env, "ci")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "manifest(s)" not in again.stdout and "FTM" not in again.stdout


@pytest.mark.parametrize("where", ["exp.yaml", "manifests/exp.yaml"])
def test_commit_refuses_an_unpinned_manifest_where_init_puts_it(
    user_repo: tuple[Path, dict[str, str]], where: str
) -> None:
    user, env = user_repo
    (user / "manifests").mkdir()
    (user / ".github" / "workflows").mkdir(parents=True)
    (user / ".github" / "workflows" / "ci.yml").write_text(WORKFLOW)
    (user / "config.json").write_text(MODEL_CONFIG)
    template = _init_template(user / where)  # as `ftmanifest init` writes it
    refused = _commit(user, env, "template")
    assert refused.returncode != 0, refused.stdout + refused.stderr
    assert "Failed" in refused.stdout
    assert f"{where}:" in refused.stdout and "FTM0" in refused.stdout  # the file and the rule
    for other in (".pre-commit-config.yaml", "ci.yml", "config.json"):
        assert other not in refused.stdout
    assert (
        subprocess.run(
            ["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=user, capture_output=True
        ).returncode
        != 0
    )  # nothing was committed
    assert "FILL" in template

    (user / where).write_text(_unpinned(CLF.read_text()))  # filled in, one pin missing
    refused = _commit(user, env, "a branch for a revision")
    assert refused.returncode != 0
    assert f"{where}:" in refused.stdout and "FTM001" in refused.stdout

    (user / where).write_text(CLF.read_text())  # control: pinned
    done = _commit(user, env, "pinned")
    assert done.returncode == 0, done.stdout + done.stderr


def test_two_manifests_are_both_linted(user_repo: tuple[Path, dict[str, str]]) -> None:
    user, env = user_repo
    (user / "manifests").mkdir()
    (user / "exp.yaml").write_text(_unpinned(CLF.read_text()))
    (user / "manifests" / "extract.yaml").write_text(_unpinned(EXTRACT.read_text()))
    refused = _commit(user, env, "two")
    assert refused.returncode != 0
    assert "exp.yaml:" in refused.stdout and "manifests/extract.yaml:" in refused.stdout
    assert sum(map(int, re.findall(r"problem\(s\) in (\d+) of", refused.stdout))) == 2


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("exp.ftm.yaml", "experiment: [never closed\n"),  # named as a manifest
        ("exp.yaml", "ftmanifest: 1\nexperiment: [never closed\n"),  # the key, broken YAML
        ("manifests/exp.yaml", "experiment: [never closed\n"),  # in manifests/, broken
        ("exp.json", '{"ftmanifest": 1, "experiment": }\n'),  # the key, broken JSON
    ],
)
def test_a_broken_file_meant_as_a_manifest_fails_the_commit(
    user_repo: tuple[Path, dict[str, str]], name: str, text: str
) -> None:
    user, env = user_repo
    (user / "manifests").mkdir()
    (user / name).write_text(text)
    refused = _commit(user, env, "broken")
    assert refused.returncode != 0, refused.stdout + refused.stderr
    assert f"{name}:" in refused.stdout and "FTM000" in refused.stdout
