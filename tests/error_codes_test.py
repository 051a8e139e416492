"""Every error has a stable reason code, and exit 3 is left to real bugs."""

from __future__ import annotations

import ast
import importlib
import json
import os
import pkgutil
import re
import signal
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

import ftmanifest
from ftmanifest import cli
from ftmanifest.data import contain, parallel
from ftmanifest.errors import EXIT_BUG, EXIT_RESOURCE, FtManifestError, WorkerDiedError

PACKAGE = Path(ftmanifest.__file__).parent
CODE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
# Building the root class is right in two places only: a rank's error whose class
# is not on the wire's allow-list (that rank's bug, shown as one), and the shard
# table's placeholder for a file not hashed yet, which is never raised.
ROOT_BUILT_IN = {"wire.py", "distributed/shard.py"}


def every_error_class() -> list[type[FtManifestError]]:
    for info in pkgutil.walk_packages([str(PACKAGE)], "ftmanifest."):
        if info.name.endswith("__main__") or info.name.endswith("_child"):
            continue  # scripts run by path: importing them runs them
        importlib.import_module(info.name)
    found: list[type[FtManifestError]] = []
    todo: list[type[FtManifestError]] = [FtManifestError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return sorted({c for c in found if c.__module__.startswith("ftmanifest.")}, key=str)


def without_reason(classes: list[type[FtManifestError]]) -> list[str]:
    return [f"{c.__module__}.{c.__qualname__}" for c in classes if "reason" not in vars(c)]


def test_every_error_class_names_its_own_reason_code() -> None:
    classes = every_error_class()
    assert len(classes) > 50  # the walk reached the rooms, not just ftmanifest.errors
    missing = without_reason(classes)
    assert missing == [], "give each a `reason` class attribute (a stable kebab-case code)"
    bad = [c.reason for c in classes if not CODE.match(c.reason)]
    assert bad == []


def test_the_walk_sees_a_class_without_its_own_reason() -> None:
    class Unnamed(FtManifestError):
        """A class a test defines without a reason."""

    assert without_reason([Unnamed, WorkerDiedError]) == [f"{__name__}.{Unnamed.__qualname__}"]


def root_constructions(root: Path) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "FtManifestError"
                and rel not in ROOT_BUILT_IN
            ):
                out.append(f"{rel}:{node.lineno}")
    return out


def test_the_package_never_raises_the_root_error_whose_exit_is_a_bug() -> None:
    assert FtManifestError.exit_code == EXIT_BUG
    assert root_constructions(PACKAGE) == []


def test_the_scan_sees_a_root_error_built(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text("raise FtManifestError('x')\n", encoding="utf-8")
    assert root_constructions(tmp_path) == ["mod.py:1"]


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's out-of-memory killer ends a worker


@pytest.mark.parametrize("result", [parallel.Workers._result, contain._result])
def test_a_killed_worker_is_a_resource_error_not_a_bug(result: object) -> None:
    with ProcessPoolExecutor(max_workers=1) as pool:
        future = pool.submit(_die)
        with pytest.raises(WorkerDiedError) as caught:
            result(None, future)  # type: ignore[operator]
    assert caught.value.exit_code == EXIT_RESOURCE == 4
    assert caught.value.reason == "worker-died"
    assert "--jobs 1" in (caught.value.hint or "")


def test_out_of_memory_exits_4_with_its_reason(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import ftmanifest.cli.lint as lint_command

    def exhausted(args: object) -> int:
        raise MemoryError

    monkeypatch.delenv("FTMANIFEST_DEBUG", raising=False)
    monkeypatch.setattr(lint_command, "run", exhausted)
    code = cli.main(["lint", "--format", "json", "missing.yaml"])
    assert code == EXIT_RESOURCE
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["reason"] == "resource-exhausted"
    assert error["exit_code"] == 4
    assert "bug" not in error["message"]


def test_an_error_json_always_carries_its_reason() -> None:
    assert WorkerDiedError("w").to_dict()["reason"] == "worker-died"
    assert FtManifestError("a bug").to_dict()["reason"] == "internal-error"


def test_the_reasons_page_lists_the_package_codes_only() -> None:
    """A class a test defines (this one) is no code of ftmanifest's: the page stays as generated."""
    from ftmanifest.cli.reference import codes
    from ftmanifest.errors import RefusedError

    class DefinedByATest(RefusedError):
        reason = "defined-by-a-test"

    page = codes.reasons_page()
    assert "defined-by-a-test" not in page
    assert "`worker-died`" in page  # control: the package's own codes are listed
