"""The in-process guard judges the interpreter that trains, not only the files verify reads.

Each attack leaves the manifest's pins looking unchanged (same versions, same
committed source, ``git status`` clean) while the training process runs other
code: the test proves it first (the real interpreter prints the attacker's
marker), then expects ``ftmanifest.guard`` in that very process to refuse with
the rule, the file and the fix.  Beside each, a control with the same setup
minus the attack (or with the manifest pinning it on purpose) trains.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ENV, GIT_ENV, write_project
from tests.support.pins import pin

TRAIN = """\
import importlib, json, os, sys
for name in sys.argv[2:]:
    module = importlib.import_module(name)
    print("MARK", name, getattr(module, "MARK", None))
import ftmanifest
if os.environ.get("ONLY_VERIFY"):  # what the guard judged before: the manifest's files
    ok = ftmanifest.verify_manifest(sys.argv[1], signature=False).ok
    print("VERIFY-OK" if ok else "VERIFY-REFUSED")
    sys.exit(0)
try:
    ftmanifest.guard(sys.argv[1], signature=False)
except ftmanifest.GuardRefusedError as exc:
    print("REFUSED " + json.dumps([f.to_dict() for f in exc.findings]))
    sys.exit(exc.exit_code)
print("GUARD-OK")
"""
HELPER_A = "MARK = 'committed'\n"
HELPER_B = "MARK = 'attacker!'\n"  # the same size as HELPER_A
SITE = f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"
_STARTUP = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "LD_PRELOAD",
            "LD_LIBRARY_PATH", "LD_AUDIT")  # fmt: skip


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed training repository with a locked manifest and a guarded train.py."""
    root = tmp_path_factory.mktemp("interp") / "repo"
    files: dict[str, str | None] = {
        "train.py": TRAIN,
        "helper.py": HELPER_A,
        ".gitignore": "out/\n__pycache__/\nlocal_*.py\n",
    }
    saved = {k: os.environ.get(k) for k in ENV}
    os.environ.update(ENV)
    try:
        return write_project(root, files)
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


@pytest.fixture
def repo(locked: Path, tmp_path: Path) -> Path:
    """A private copy of the locked repository (each test may damage its own)."""
    shutil.copytree(locked.parent, tmp_path / "repo", symlinks=True)
    return tmp_path / "repo"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _STARTUP}
    return {**env, **ENV, **extra}


def _train(repo: Path, *modules: str, python: str = sys.executable,
           env: dict[str, str] | None = None) -> tuple[int, str, list[dict]]:  # fmt: skip
    """Run train.py in ``repo`` with ``python``: (exit code, stdout+stderr, refusal rows)."""
    done = subprocess.run(
        [python, "train.py", "exp.yaml", *modules],
        cwd=repo,
        env=env or _env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout + done.stderr
    refused = [line for line in done.stdout.splitlines() if line.startswith("REFUSED ")]
    found = json.loads(refused[0][len("REFUSED ") :]) if refused else []
    return done.returncode, out, found


def _passes(repo: Path, *modules: str, **kw: object) -> str:
    code, out, found = _train(repo, *modules, **kw)  # type: ignore[arg-type]
    assert code == 0 and "GUARD-OK" in out, (code, found, out[-2000:])
    return out


def _refused(repo: Path, rule: str, *modules: str, verify_sees: bool = False,
             **kw: object) -> tuple[str, list[dict]]:  # fmt: skip
    """Train under the guard: refused with a ``rule`` row.  Unless ``verify_sees``, the same
    process passes ``verify`` alone first (the attack gets past the manifest's files)."""
    if not verify_sees:
        env = {**(kw.get("env") or _env()), "ONLY_VERIFY": "1"}  # type: ignore[dict-item]
        _code, said, _found = _train(repo, *modules, **{**kw, "env": env})  # type: ignore[arg-type]
        assert "VERIFY-OK" in said, said[-2000:]
    code, out, found = _train(repo, *modules, **kw)  # type: ignore[arg-type]
    assert code == 1, (code, out[-2000:])
    assert "Traceback" not in out, out[-2000:]
    rows = [f for f in found if f["rule"] == rule]
    assert rows, f"no {rule} row: {[f['rule'] for f in found]} {out[-1500:]}"
    for row in rows:  # every refusal names the field, expected, observed and the fix
        assert row["field"] and row["expected"] and row["observed"] and row["hint"], row
    return out, rows


# --- the training repository's own modules -----------------------------------------


def _forge_pyc(source: Path, code_text: str, prefix: Path | None = None) -> Path:
    """Compile ``code_text`` into ``source``'s pyc (under ``prefix``, as
    PYTHONPYCACHEPREFIX puts it, when given), stamped with the real file's mtime and
    size: the loader checks only those, so it runs the forged code."""
    from importlib._bootstrap_external import _code_to_timestamp_pyc  # type: ignore[attr-defined]

    st = source.stat()
    code = compile(code_text, str(source), "exec", dont_inherit=True)
    saved, sys.pycache_prefix = sys.pycache_prefix, None if prefix is None else str(prefix)
    try:
        pyc = Path(importlib.util.cache_from_source(str(source)))
    finally:
        sys.pycache_prefix = saved
    pyc.parent.mkdir(parents=True, exist_ok=True)
    pyc.write_bytes(bytes(_code_to_timestamp_pyc(code, int(st.st_mtime), st.st_size)))
    return pyc


def test_the_unchanged_repository_trains(repo: Path) -> None:
    out = _passes(repo, "helper")
    assert "MARK helper committed" in out


def test_forged_bytecode_of_a_committed_module_is_refused(repo: Path) -> None:
    pyc = _forge_pyc(repo / "helper.py", HELPER_B)
    env = {**os.environ, **GIT_ENV}
    status = ["git", "status", "--porcelain"]
    git_status = subprocess.run(status, cwd=repo, env=env, capture_output=True, text=True).stdout
    assert git_status.split() == ["M", "exp.yaml"]  # only the lock: no code change seen
    out, rows = _refused(repo, "drift.bytecode", "helper")
    assert "MARK helper attacker!" in out  # the interpreter ran the forged code
    assert rows[0]["path"] == str(pyc) and rows[0]["field"] == "environment.code.commit"
    assert "rm " in rows[0]["hint"]


def test_forged_bytecode_under_a_pycache_prefix_is_refused(repo: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "pycache"
    pyc = _forge_pyc(repo / "helper.py", HELPER_B, prefix)
    out, rows = _refused(
        repo, "drift.bytecode", "helper", env=_env(PYTHONPYCACHEPREFIX=str(prefix))
    )
    assert "MARK helper attacker!" in out
    assert rows[0]["path"] == str(pyc)


def test_the_real_bytecode_of_a_committed_module_trains(repo: Path) -> None:
    import py_compile

    py_compile.compile(str(repo / "helper.py"), doraise=True)  # what the interpreter writes
    assert "MARK helper committed" in _passes(repo, "helper")


@pytest.mark.parametrize("name", ["local_settings", "extra"])
def test_an_imported_module_the_commit_does_not_have_is_refused(repo: Path, name: str) -> None:
    (repo / f"{name}.py").write_text("MARK = 'not committed'\n")
    # verify's code check already sees an untracked file, never an ignored one
    out, rows = _refused(repo, "drift.module-untracked", name, verify_sees=name == "extra")
    assert f"MARK {name} not committed" in out
    assert rows[0]["path"].endswith(f"{name}.py")
    words = "ignored" if name.startswith("local_") else "untracked"
    assert words in rows[0]["observed"]


def test_an_edited_committed_module_is_refused(repo: Path) -> None:
    (repo / "helper.py").write_text(HELPER_B)
    out, rows = _refused(repo, "drift.module-code", "helper", verify_sees=True)
    assert "MARK helper attacker!" in out
    assert rows[0]["expected"].startswith("blob ")


# --- start-up: sitecustomize, variables -------------------------------------------


def test_sitecustomize_on_pythonpath_is_refused(repo: Path, tmp_path: Path) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text("print('MARK sitecustomize ran')\n")
    out, rows = _refused(repo, "drift.sitecustomize", env=_env(PYTHONPATH=str(hook)))
    assert "MARK sitecustomize ran" in out
    assert rows[0]["path"] == str(hook / "sitecustomize.py")
    _out, var = _refused(repo, "drift.startup-variable", env=_env(PYTHONPATH=str(hook)))
    assert var[0]["field"] == "environment.env_vars.PYTHONPATH"


def test_sitecustomize_allowed_and_pythonpath_pinned_trains(repo: Path, tmp_path: Path) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text("print('MARK sitecustomize ran')\n")
    pin(repo / "exp.yaml", env_vars={"PYTHONPATH": str(hook)}, allow=[str(hook)])
    assert "MARK sitecustomize ran" in _passes(repo, env=_env(PYTHONPATH=str(hook)))


def test_pythonpath_set_but_not_pinned_is_refused_and_pinned_trains(
    repo: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    _out, rows = _refused(repo, "drift.startup-variable", env=_env(PYTHONPATH=str(empty)))
    assert rows[0]["observed"] == repr(str(empty)) and "env_vars" in rows[0]["hint"]
    pin(repo / "exp.yaml", env_vars={"PYTHONPATH": str(empty)})
    _passes(repo, env=_env(PYTHONPATH=str(empty)))


def _libm() -> str:
    with open("/proc/self/maps") as fh:
        found = [line.split()[-1] for line in fh if "/libm" in line and ".so" in line]
    if not found:
        pytest.skip("no libm mapped into this interpreter")
    return found[0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD of glibc's loader")
def test_ld_preload_is_refused_unless_pinned(repo: Path) -> None:
    lib = _libm()  # harmless: already loaded by Python; the variable alone must be judged
    _out, rows = _refused(repo, "drift.startup-variable", env=_env(LD_PRELOAD=lib))
    assert rows[0]["field"] == "environment.env_vars.LD_PRELOAD"
    pin(repo / "exp.yaml", env_vars={"LD_PRELOAD": lib})
    _passes(repo, env=_env(LD_PRELOAD=lib))


# --- installed packages: a venv of the test's own ------------------------------------


def _wheel(folder: Path, name: str, files: dict[str, bytes], version: str = "1.0") -> Path:
    """A wheel as a build backend writes it (RECORD with each file's sha256)."""
    info = f"{name}-{version}.dist-info"
    files = {
        **files,
        f"{info}/METADATA": _metadata(name, version),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = "".join(f"{p},{_record_hash(b)},{len(b)}\n" for p, b in files.items())
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for rel, data in files.items():
            zf.writestr(rel, data)
        zf.writestr(f"{info}/RECORD", record + f"{info}/RECORD,,\n")
    return path


def _metadata(name: str, version: str) -> bytes:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A fresh venv whose site-packages holds, installed by pip from wheels: a bridge
    (a RECORD-listed ``.pth`` putting this venv's packages and ftmanifest on its path)
    and ``ftm_tinypkg`` 1.0.  Returns its python."""
    import site

    folder = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    ours = [p for p in site.getsitepackages() if p.endswith("site-packages")]
    ftm = Path(importlib.util.find_spec("ftmanifest").origin).parents[1]  # type: ignore[union-attr,arg-type]
    bridge = ("\n".join([*ours, str(ftm)]) + "\n").encode()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    built = [
        _wheel(wheels, "ftm_test_bridge", {"ftm_test_bridge.pth": bridge}),
        _wheel(wheels, "ftm_tinypkg", {"ftm_tinypkg/__init__.py": b"MARK = 'original'\n"}),
    ]
    python = folder / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         "--no-index", "--no-compile", "--disable-pip-version-check", *map(str, built)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return python


def _site(python: Path) -> Path:
    return python.parents[1] / SITE


def test_a_venv_with_installed_pth_files_trains(repo: Path, venv: Path) -> None:
    """The control of the start-up attacks: a .pth file pip installed (listed with its
    hash in its RECORD, like setuptools' distutils-precedence.pth) is no refusal."""
    out = _passes(repo, "ftm_tinypkg", python=str(venv))
    assert "MARK ftm_tinypkg original" in out


def test_a_pth_file_dropped_into_site_packages_is_refused(repo: Path, venv: Path) -> None:
    (_site(venv) / "zz_evil.pth").write_text("import sys; print('MARK pth ran', file=sys.stderr)\n")
    out, rows = _refused(repo, "drift.pth", python=str(venv))
    assert "MARK pth ran" in out  # site ran its import line at start-up
    assert rows[0]["path"].endswith("zz_evil.pth") and "line(s) 1" in rows[0]["message"]


def test_an_installed_file_edited_with_its_version_unchanged_is_refused(
    repo: Path, venv: Path
) -> None:
    (_site(venv) / "ftm_tinypkg" / "__init__.py").write_text("MARK = 'tampered'\n")
    out, rows = _refused(repo, "drift.module-record", "ftm_tinypkg", python=str(venv))
    assert "MARK ftm_tinypkg tampered" in out
    assert "RECORD of ftm_tinypkg 1.0" in rows[0]["expected"]
    assert "--force-reinstall" in rows[0]["hint"]


def test_a_file_added_to_an_installed_package_is_refused(repo: Path, venv: Path) -> None:
    (_site(venv) / "ftm_tinypkg" / "extra.py").write_text("MARK = 'added'\n")
    out, _rows = _refused(repo, "drift.module-unrecorded", "ftm_tinypkg.extra", python=str(venv))
    assert "MARK ftm_tinypkg.extra added" in out


def _editable_fork(site_dir: Path, fork: Path, name: str, version: str) -> None:
    """What pip writes for ``pip install -e fork`` (PEP 660 and PEP 610): a dist-info with
    ``direct_url.json`` saying editable, and a RECORD-listed ``.pth`` putting the fork first."""
    info = site_dir / f"{name}-{version}.dist-info"
    info.mkdir()
    pth = f"__editable__.{name}-{version}.pth"
    files = {
        pth: f"{fork}\n".encode(),
        f"{info.name}/METADATA": _metadata(name, version),
        f"{info.name}/INSTALLER": b"pip\n",
        f"{info.name}/direct_url.json": json.dumps(
            {"url": fork.as_uri(), "dir_info": {"editable": True}}
        ).encode(),
    }
    for rel, data in files.items():
        (site_dir / rel).write_bytes(data)
    record = "".join(f"{p},{_record_hash(b)},{len(b)}\n" for p, b in files.items())
    (info / "RECORD").write_text(record + f"{info.name}/RECORD,,\n")


def test_a_same_version_editable_install_of_a_fork_is_refused(
    repo: Path, venv: Path, tmp_path: Path
) -> None:
    site_dir = _site(venv)
    shutil.rmtree(site_dir / "ftm_tinypkg")
    shutil.rmtree(site_dir / "ftm_tinypkg-1.0.dist-info")
    fork = tmp_path / "fork"
    (fork / "ftm_tinypkg").mkdir(parents=True)
    (fork / "ftm_tinypkg" / "__init__.py").write_text("MARK = 'fork'\n")
    _editable_fork(site_dir, fork, "ftm_tinypkg", "1.0")
    pin(repo / "exp.yaml", packages={"ftm-tinypkg": "==1.0"})
    out, rows = _refused(repo, "drift.editable", "ftm_tinypkg", python=str(venv))
    assert "MARK ftm_tinypkg fork" in out  # the pinned version, another package's code
    assert rows[0]["field"] == "environment.packages.ftm-tinypkg"
    assert str(fork) in rows[0]["observed"]


def test_this_venv_s_own_pth_files_are_installed_ones(locked: Path) -> None:
    """The control in the test venv itself: setuptools' distutils-precedence.pth and the
    editable install's __editable__ .pth run import lines at every start, and each is
    listed with its hash in its distribution's RECORD."""
    from ftmanifest.manifest import load_manifest
    from ftmanifest.probe.interpreter import observe
    from ftmanifest.verify.interpreter import judge_interpreter

    seen = observe()
    names = {Path(e["path"]).name for e in seen["pth_files"]}
    if not names:
        pytest.skip("no .pth file in this venv")
    verdict = judge_interpreter(seen, load_manifest(locked).manifest, locked)
    assert [r for r in verdict.rows if r.rule in ("drift.pth", "drift.editable")] == []
