"""The cache the loader reads is the cache verified, side files included.

Each attack is shown first with the real loader (transformers' ``from_pretrained``
or huggingface_hub's ``hf_hub_download`` in a child process with the same
environment): what loads is not the pinned file.  Then verify must refuse,
naming the file, the field, expected, observed and the fix; a control beside
each (the same environment, untouched) passes.

* the hub cache is resolved as huggingface_hub resolves it: ``HF_HUB_CACHE``,
  then the legacy ``HUGGINGFACE_HUB_CACHE``, then ``HF_HOME`` / ``XDG_CACHE_HOME``
  / ``~``, with ``~`` and ``$VAR`` expanded;
* a ``.no_exist/<commit>/<file>`` marker for a file of the snapshot makes a load
  by repo id skip it;
* remote code (``trust_remote_code``) runs from transformers' modules cache:
  an edited copy, a package ``__init__.py`` on its path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ftmanifest.findings import Finding
from ftmanifest.hfcache import LEGACY_TRANSFORMERS_CACHE_VARS
from ftmanifest.verify import verify_manifest
from ftmanifest.verify.lock import lock_manifest
from tests.support.hubcache import build_hub_cache

REPO = "org/tiny-remote"
HF_VARS = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME",
           "HF_MODULES_CACHE", "HOME", "GROOT", *LEGACY_TRANSFORMERS_CACHE_VARS)  # fmt: skip
MANIFEST = f"""\
ftmanifest: 1
experiment: {{id: hub-cache}}
model:
  repo: {REPO}
  revision: main   # lock pins the commit
data:
  - {{name: train, role: train, path: train.jsonl, license: test}}
"""
CONFIGURATION = """\
from transformers import PretrainedConfig

from .marks_tiny import MARK


class TinyConfig(PretrainedConfig):
    model_type = "tinyremote"

    def __init__(self, hidden=4, **kwargs):
        self.hidden = hidden
        self.marker = MARK
        super().__init__(**kwargs)
"""


# --- helpers -------------------------------------------------------------------


class Project:
    """A hub cache holding one snapshot of ``REPO``, and a manifest locked on it."""

    def __init__(self, tmp: Path, files: dict[str, bytes]) -> None:
        self.tmp = tmp
        src = tmp / "src"
        src.mkdir()
        for rel, data in files.items():
            (src / rel).write_bytes(data)
        self.home = tmp / "g-home"  # the cache verified: HF_HOME=g-home
        self.cache = self.home / "hub"
        self.commit = build_hub_cache(self.cache, REPO, {"v1": src}, {"main": "v1"})["v1"]
        self.repo_dir = self.cache / ("models--" + REPO.replace("/", "--"))
        self.snapshot = self.repo_dir / "snapshots" / self.commit
        work = tmp / "project"
        work.mkdir()
        (work / "train.jsonl").write_text('{"text": "a"}\n')
        self.manifest = work / "exp.yaml"
        self.manifest.write_text(MANIFEST)

    def env(self, **values: str) -> dict[str, str]:
        """This process's environment without HF variables, plus ``values``."""
        env = {k: v for k, v in os.environ.items() if k not in HF_VARS}
        env.update(HOME=str(self.tmp / "nohome"), HF_HUB_OFFLINE="1",
                   FTMANIFEST_CACHE_DIR=str(self.tmp / "ftm-cache"))  # fmt: skip
        env.update(values)
        return env

    def use(self, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
        """Make ``env`` this process's environment (verify reads it)."""
        for name in HF_VARS:
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)

    def load(self, env: dict[str, str], code: str) -> str:
        """The last line the real loader prints, in a fresh interpreter with ``env``."""
        code = code.replace("REPO", repr(REPO)).replace("COMMIT", repr(self.commit))
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
            cwd=self.tmp,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.strip().splitlines()[-1]

    def verify(self) -> list[tuple[str, str | None, str | None]]:
        report = verify_manifest(self.manifest, signature=False)
        return [(f.rule, f.field, f.path) for f in report.findings]


def _verify_rows(project: Project) -> list[Finding]:
    return verify_manifest(project.manifest, signature=False).findings


# --- the hub cache: HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME, XDG, ~ ---------------

CONFIG_LOADER = """
from huggingface_hub import hf_hub_download
from transformers import AutoConfig
path = hf_hub_download(REPO, "config.json", revision=COMMIT, local_files_only=True)
config = AutoConfig.from_pretrained(REPO, revision=COMMIT, local_files_only=True)
print(config.n_layer)
"""


@pytest.fixture
def two_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    """The pinned snapshot in g-home/hub (n_layer 2), locked; the same commit with another
    config.json in x-hub (n_layer 7); ~ and XDG_CACHE_HOME folders that lead to g-home."""
    project = Project(tmp_path, {"config.json": b'{"model_type": "gpt2", "n_layer": 2}'})
    other = tmp_path / "x-hub"
    shutil.copytree(project.cache, other, symlinks=True)
    blob = (other / project.snapshot.relative_to(project.cache) / "config.json").resolve()
    blob.unlink()
    blob.write_bytes(b'{"model_type": "gpt2", "n_layer": 7}')
    for parent in (tmp_path / "xdg", tmp_path / "home-g" / ".cache"):
        parent.mkdir(parents=True)
        (parent / "huggingface").symlink_to(project.home)
    project.use(monkeypatch, project.env(HF_HOME=str(project.home)))
    lock_manifest(project.manifest)
    return project


CASES: dict[str, Callable[[Path], dict[str, str]]] = {
    # the loader reads x-hub: verify must hash x-hub and refuse
    "HF_HOME and HUGGINGFACE_HUB_CACHE": lambda t: {
        "HF_HOME": str(t / "g-home"), "HUGGINGFACE_HUB_CACHE": str(t / "x-hub")},
    "XDG_CACHE_HOME and HUGGINGFACE_HUB_CACHE": lambda t: {
        "XDG_CACHE_HOME": str(t / "xdg"), "HUGGINGFACE_HUB_CACHE": str(t / "x-hub")},
    "HF_HUB_CACHE over HUGGINGFACE_HUB_CACHE": lambda t: {
        "HF_HUB_CACHE": str(t / "x-hub"), "HUGGINGFACE_HUB_CACHE": str(t / "g-home" / "hub")},
    "$VAR in HF_HOME, and HUGGINGFACE_HUB_CACHE": lambda t: {
        "GROOT": str(t), "HF_HOME": "$GROOT/g-home", "HUGGINGFACE_HUB_CACHE": "$GROOT/x-hub"},
    # the loader reads g-home/hub: verify must pass
    "HF_HOME": lambda t: {"HF_HOME": str(t / "g-home")},
    "XDG_CACHE_HOME": lambda t: {"XDG_CACHE_HOME": str(t / "xdg")},
    "~ by default": lambda t: {"HOME": str(t / "home-g")},
    "~ in HF_HUB_CACHE": lambda t: {
        "HOME": str(t / "home-g"), "HF_HUB_CACHE": "~/.cache/huggingface/hub"},
    "$VAR in HF_HOME": lambda t: {"GROOT": str(t), "HF_HOME": "${GROOT}/g-home"},
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_verify_hashes_the_hub_cache_the_loader_reads(
    case: str, two_caches: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = two_caches
    env = project.env(**CASES[case](project.tmp))
    loaded = project.load(env, CONFIG_LOADER)
    assert loaded in ("2", "7")
    project.use(monkeypatch, env)
    rows = project.verify()
    if loaded == "7":  # the loader read the other cache: the pinned config.json is not it
        assert [r[:2] for r in rows] == [("drift.model-file", "model.files[0]")], rows
    else:
        assert rows == [], rows


def test_the_refusal_names_the_cache_it_read(
    two_caches: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = two_caches
    other = project.tmp / "x-hub"
    project.use(monkeypatch, project.env(HF_HOME=str(project.home),
                                         HUGGINGFACE_HUB_CACHE=str(other)))  # fmt: skip
    (row,) = _verify_rows(project)
    assert row.message == "model file config.json changed"
    shutil.rmtree(other / project.repo_dir.name / "snapshots")
    (row, *_rest) = _verify_rows(project)
    assert str(other) in (row.hint or "")


def test_run_judges_the_cache_the_command_reads(two_caches: Project) -> None:
    """``run`` verified with this process's variables; a command started with other
    ones (``env HUGGINGFACE_HUB_CACHE=...``) loads from the cache they name."""
    project = two_caches
    work = project.manifest.parent
    code = CONFIG_LOADER.replace("REPO", repr(REPO)).replace("COMMIT", repr(project.commit))
    (work / "load.py").write_text(code)
    env = project.env(HF_HOME=str(project.home))
    other = str(project.tmp / "x-hub")
    command = ["env", f"HUGGINGFACE_HUB_CACHE={other}", sys.executable, "load.py"]
    assert project.load({**env, "HUGGINGFACE_HUB_CACHE": other}, code) == "7"

    def run(*cmd: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "ftmanifest", "run", str(project.manifest),
                "--no-signature", "--", *cmd]  # fmt: skip
        return subprocess.run(argv, env=env, cwd=work, capture_output=True, text=True,
                              timeout=300)  # fmt: skip

    refused = run(*command)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    said = refused.stdout + refused.stderr
    row = next(line for line in said.splitlines() if line.startswith("model.repo "))
    assert row.split()[1:3] == [str(project.cache), other]  # expected, observed
    assert "start the command with the HF_HUB_CACHE" in " ".join(said.split())  # any COLUMNS
    same = run("env", f"HF_HOME={project.home}", sys.executable, "load.py")
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.strip().splitlines()[-1] == "2"


def test_a_guard_sees_caches_fixed_before_the_environment_changed(two_caches: Project) -> None:
    """huggingface_hub fixes its cache at import: a script that sets HF_HUB_CACHE after
    importing it passes verify in-process and still loads from the first cache."""
    project = two_caches
    script = f"""
import json, os
import huggingface_hub.constants
os.environ["HF_HUB_CACHE"] = {str(project.cache)!r}
from transformers import AutoConfig
from ftmanifest.verify import verify_manifest
from ftmanifest.verify.model_cache import imported_cache_rows
report = verify_manifest({str(project.manifest)!r}, signature=False)
rows = imported_cache_rows(report.observed.model)
config = AutoConfig.from_pretrained(REPO, revision=COMMIT, local_files_only=True)
print(json.dumps([report.ok, config.n_layer, [[r.rule, r.expected, r.observed] for r in rows]]))
"""
    env = project.env(HF_HUB_CACHE=str(project.tmp / "x-hub"))
    ok, n_layer, rows = json.loads(project.load(env, script))
    assert (ok, n_layer) == (True, 7)  # verify hashed g-home; the loader read x-hub
    assert rows == [["drift.model-cache", str(project.cache), str(project.tmp / "x-hub")]]


# --- .no_exist markers ----------------------------------------------------------

TEMPLATE_LOADER = """
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(REPO, revision=COMMIT, local_files_only=True)
print(repr(tok.chat_template))
"""


@pytest.fixture
def with_template(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    from ftmanifest.examples.tiny import build_tokenizer, default_corpus

    tok = tmp_path / "tok"
    build_tokenizer(tok, default_corpus(0))
    files = {p.name: p.read_bytes() for p in tok.iterdir()}
    files["chat_template.jinja"] = b"{% for m in messages %}PINNED {{ m['content'] }}{% endfor %}"
    files["config.json"] = b'{"model_type": "gpt2"}'
    project = Project(tmp_path, files)
    project.use(monkeypatch, project.env(HF_HOME=str(project.home)))
    lock_manifest(project.manifest)
    return project


def test_a_no_exist_marker_for_a_pinned_file_is_drift(
    with_template: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = with_template
    env = project.env(HF_HOME=str(project.home))
    assert "PINNED" in project.load(env, TEMPLATE_LOADER)
    assert project.verify() == []
    marker = project.repo_dir / ".no_exist" / project.commit / "chat_template.jinja"
    marker.parent.mkdir(parents=True)
    marker.touch()
    assert project.load(env, TEMPLATE_LOADER) == "None"  # the pinned template is skipped
    report = verify_manifest(project.manifest, signature=False)
    (row,) = report.findings
    files = [f.path for f in report.loaded.manifest.model.files]
    assert (row.rule, row.field) == (
        "drift.model-no-exist",
        f"model.files[{files.index('chat_template.jinja')}]",
    )
    assert row.path == str(marker) and row.observed == f"marker {marker}"
    assert row.expected == "no marker (chat_template.jinja is pinned)"
    assert str(row.hint).startswith(f"delete {marker}")
    marker.unlink()
    assert project.verify() == []


def test_a_marker_for_a_file_the_snapshot_lacks_changes_nothing(
    with_template: Project,
) -> None:
    """huggingface_hub writes these for every optional file the hub lacks; offline, a
    file missing from the snapshot is missing with or without its marker."""
    project = with_template
    env = project.env(HF_HOME=str(project.home))
    before = project.load(env, TEMPLATE_LOADER)
    marks = project.repo_dir / ".no_exist" / project.commit
    marks.mkdir(parents=True)
    for name in ("generation_config.json", "added_tokens.json", "special_tokens_map.json"):
        (marks / name).touch()
    assert project.load(env, TEMPLATE_LOADER) == before
    assert project.verify() == []


# --- remote code: transformers' modules cache -------------------------------------

REMOTE_LOADER = """
from transformers import AutoConfig
config = AutoConfig.from_pretrained(TARGET, revision=COMMIT, local_files_only=True,
                                    trust_remote_code=True)
print(config.marker)
"""


@pytest.fixture
def remote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    """A model whose config class is remote code (auto_map), with a relative import."""
    config = {"model_type": "tinyremote", "hidden": 4,
              "auto_map": {"AutoConfig": "configuration_tiny.TinyConfig"}}  # fmt: skip
    files = {
        "config.json": json.dumps(config).encode(),
        "configuration_tiny.py": CONFIGURATION.encode(),
        "marks_tiny.py": b'MARK = "pinned"\n',
    }
    project = Project(tmp_path, files)
    project.use(monkeypatch, project.env(HF_HOME=str(project.home)))
    lock_manifest(project.manifest)
    return project


def _remote(project: Project, target: str) -> str:
    env = project.env(HF_HOME=str(project.home))
    return project.load(env, REMOTE_LOADER.replace("TARGET", repr(target)))


def test_lock_pins_the_remote_code_files(remote: Project) -> None:
    from ftmanifest.manifest import load_manifest

    files = {f.path for f in load_manifest(remote.manifest).manifest.model.files}
    assert {"configuration_tiny.py", "marks_tiny.py", "config.json"} <= files


def test_an_edited_copy_loaded_by_repo_id_is_drift(remote: Project) -> None:
    assert _remote(remote, REPO) == "pinned"
    assert remote.verify() == []  # the copies transformers made are the pinned files
    folder = (remote.home / "modules" / "transformers_modules" / "org" / "tiny_hyphen_remote"
              / remote.commit)  # fmt: skip
    copy = folder / "marks_tiny.py"
    copy.write_text('MARK = "edited"\n')
    assert _remote(remote, REPO) == "edited"  # transformers imports the copy, not the pin
    rows = verify_manifest(remote.manifest, signature=False).findings
    assert [(r.rule, r.path) for r in rows] == [("drift.model-code-copy", str(copy))]
    assert str(rows[0].field).startswith("model.files[")
    assert str(rows[0].expected).startswith("sha256:")
    assert str(rows[0].observed).startswith("sha256:")
    assert rows[0].expected != rows[0].observed
    assert rows[0].hint == f"delete {folder} (transformers copies the pinned files there again)"
    shutil.rmtree(folder)
    assert _remote(remote, REPO) == "pinned"
    assert remote.verify() == []


def test_an_edited_copy_loaded_from_the_folder_is_drift_when_transformers_keeps_it(
    remote: Project,
) -> None:
    """A folder load (``load_pinned``'s) copies a file again when its size or mtime
    differ from the source's; a same-size edit with the mtime put back is imported."""
    target = str(remote.snapshot)
    assert _remote(remote, target) == "pinned"
    (copy,) = (remote.home / "modules" / "transformers_modules" / remote.commit).glob(
        "*/marks_tiny.py"
    )
    source = os.stat(remote.snapshot / "marks_tiny.py")
    copy.write_text('MARK = "edited"\n')  # the size of 'MARK = "pinned"\n'
    assert _remote(remote, target) == "pinned"  # the new mtime: copied again
    assert remote.verify() == []
    copy.write_text('MARK = "edited"\n')
    os.utime(copy, ns=(source.st_atime_ns, source.st_mtime_ns))
    assert _remote(remote, target) == "edited"
    assert [r[0::2] for r in remote.verify()] == [("drift.model-code-copy", str(copy))]
    copy.write_text('MARK = "edited!"\n')  # transformers will replace this one: no row
    assert remote.verify() == []


def test_code_in_a_package_init_on_the_copies_path_is_drift(remote: Project) -> None:
    assert _remote(remote, REPO) == "pinned"
    init = remote.home / "modules" / "transformers_modules" / "__init__.py"
    init.write_text('MARK = "edited"\nprint("INIT RAN")\n')
    env = remote.env(HF_HOME=str(remote.home))
    out = subprocess.run(
        [sys.executable, "-c", REMOTE_LOADER.replace("TARGET", repr(REPO))
         .replace("COMMIT", repr(remote.commit))],
        env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "INIT RAN" in out  # importing the remote code ran it
    rows = verify_manifest(remote.manifest, signature=False).findings
    assert [(r.rule, r.field, r.path) for r in rows] == [
        ("drift.model-code-copy", "model.files", str(init))
    ]
    assert rows[0].expected == "an empty file (transformers creates it so)"
    init.unlink()
    assert remote.verify() == []


def test_an_extension_module_beside_the_copy_is_drift(remote: Project) -> None:
    import importlib.machinery

    assert _remote(remote, REPO) == "pinned"
    folder = (remote.home / "modules" / "transformers_modules" / "org" / "tiny_hyphen_remote"
              / remote.commit)  # fmt: skip
    shadow = folder / ("marks_tiny" + importlib.machinery.EXTENSION_SUFFIXES[0])
    shadow.write_bytes(b"\x7fELF")
    assert [r[0::2] for r in remote.verify()] == [("drift.model-code-copy", str(shadow))]


def test_the_modules_cache_follows_hf_modules_cache(
    remote: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    mods = remote.tmp / "mods"
    env = remote.env(HF_HOME=str(remote.home), HF_MODULES_CACHE=str(mods))
    code = REMOTE_LOADER.replace("TARGET", repr(REPO))
    assert remote.load(env, code) == "pinned"
    copy = mods / "transformers_modules" / "org" / "tiny_hyphen_remote" / remote.commit
    (copy / "marks_tiny.py").write_text('MARK = "edited"\n')
    assert remote.load(env, code) == "edited"
    assert remote.verify() == []  # this process's HF_HOME/modules holds no copy
    remote.use(monkeypatch, env)
    assert [r[0] for r in remote.verify()] == ["drift.model-code-copy"]


# --- transformers 4's own cache variables -------------------------------------------


def test_transformers_4_reads_transformers_cache_first(remote: Project) -> None:
    """transformers 4 loads from TRANSFORMERS_CACHE (and its older names) before
    huggingface_hub's cache; transformers 5 reads none of them.  The version here
    is 5, so the judge is shown with the version a transformers 4 would report."""
    from ftmanifest.manifest import load_manifest
    from ftmanifest.snapshot import observe_model
    from ftmanifest.verify.model_cache import side_rows

    m = load_manifest(remote.manifest).manifest
    env = remote.env(HF_HOME=str(remote.home), TRANSFORMERS_CACHE=str(remote.tmp / "t4"))
    state = observe_model(m, remote.manifest.parent, use_cache=False, allow_outside=False,
                          environ=env)  # fmt: skip
    (row,) = side_rows(m, state, "4.46.1")
    assert (row.rule, row.field) == ("drift.model-cache", "model.repo")
    assert row.observed == f"TRANSFORMERS_CACHE={remote.tmp / 't4'}"
    assert row.expected == str(remote.cache)
    assert str(row.hint).startswith("unset TRANSFORMERS_CACHE")
    assert list(side_rows(m, state, "5.0.0")) == []
    same = remote.env(HF_HOME=str(remote.home), TRANSFORMERS_CACHE=str(remote.cache))
    state = observe_model(m, remote.manifest.parent, use_cache=False, allow_outside=False,
                          environ=same)  # fmt: skip
    assert list(side_rows(m, state, "4.46.1")) == []


GUARDED_AFTER_IMPORT = """
import json, os
import huggingface_hub.constants
CHANGE
import ftmanifest
from ftmanifest.verify.guard import GuardRefusedError
try:
    report = ftmanifest.guard(MANIFEST, signature=False)
    rows = report.findings
except GuardRefusedError as exc:
    rows = exc.report.findings
from transformers import AutoConfig
config = AutoConfig.from_pretrained(REPO, revision=COMMIT, local_files_only=True)
cache_rows = [[r.rule, r.observed] for r in rows if r.rule == "drift.model-cache"]
print(json.dumps([config.n_layer, cache_rows]))
"""


def test_the_guard_refuses_a_cache_fixed_before_the_environment_changed(
    two_caches: Project,
) -> None:
    """``ftmanifest.guard`` in the script itself: verify hashes the cache the
    environment names now, the imported huggingface_hub reads the one named at its
    import; the guard names that one. Control: nothing changed, no cache row."""
    project = two_caches
    other = str(project.tmp / "x-hub")
    script = GUARDED_AFTER_IMPORT.replace("MANIFEST", repr(str(project.manifest)))
    changed = script.replace("CHANGE", f"os.environ['HF_HUB_CACHE'] = {str(project.cache)!r}")
    n_layer, rows = json.loads(project.load(project.env(HF_HUB_CACHE=other), changed))
    assert n_layer == 7  # the loader read x-hub, not the cache verify hashed
    assert rows == [["drift.model-cache", other]]
    same = script.replace("CHANGE", "")
    n_layer, rows = json.loads(project.load(project.env(HF_HUB_CACHE=str(project.cache)), same))
    assert (n_layer, rows) == (2, [])
