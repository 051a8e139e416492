"""Find a model snapshot in a local folder or in the Hugging Face cache.

Layer: file access (reads the disk).  The hub cache is read only through
huggingface_hub's own functions, offline (``local_files_only=True``): a
branch or tag is resolved through the cache's refs to its commit, and
nothing is ever downloaded.

Which cache that is depends on the environment of the process that loads:
``hub_cache_dir(environ)`` and ``modules_cache_dir(environ)`` compute it as
huggingface_hub and transformers do at import (``huggingface_hub.constants``,
``transformers.utils.hub``), for this process's environment or for a child's
(``run``), so verify hashes the cache the loader will read.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from ftmanifest.errors import InputError
from ftmanifest.manifest.patterns import COMMIT_RE as COMMIT_RE  # re-exported for callers
from ftmanifest.untrusted import read_untrusted

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack")


class SnapshotNotFoundError(InputError):
    """The wanted revision is not in the local cache."""

    reason = "snapshot-not-in-cache"


class Snapshot:
    """A model folder and, for the hub cache, its commit and repository folder."""

    __slots__ = ("folder", "commit", "symlink_root", "source")

    def __init__(self, folder: Path, commit: str | None, symlink_root: Path, source: str) -> None:
        self.folder = folder
        self.commit = commit
        self.symlink_root = symlink_root
        self.source = source


def hub_snapshot(
    repo_id: str,
    revision: str | None,
    cache_dir: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Snapshot:
    """The cached snapshot of ``repo_id`` at ``revision`` (commit, branch or tag), in
    ``cache_dir`` or else the cache a process with ``environ`` reads (``hub_cache_dir``)."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError as exc:  # a core dependency; only a broken install lacks it
        raise InputError(
            f"cannot read the Hugging Face cache for {repo_id}: huggingface_hub is not importable",
            loc=("model", "repo"),
            expected="huggingface_hub installed (a dependency of ftmanifest)",
            observed=_first_line(exc),
            hint="pip install 'huggingface-hub>=0.23' (or reinstall ftmanifest)",
        ) from None
    if cache_dir is None:
        cache_dir = hub_cache_path(environ)
    wanted = revision or "main"
    try:
        folder = snapshot_download(
            repo_id, revision=wanted, cache_dir=str(cache_dir), local_files_only=True
        )
    except (LocalEntryNotFoundError, FileNotFoundError, ValueError, OSError) as exc:
        what = (
            f"revision {revision} of {repo_id}"
            if revision
            else f"{repo_id} (model.revision is empty, so its 'main' branch)"
        )
        raise SnapshotNotFoundError(
            f"{what} is not in the local Hugging Face cache",
            loc=("model", "revision"),
            expected=f"a cached snapshot of {repo_id}@{wanted}",
            observed=_first_line(exc),
            hint=f"download it: {download_command(repo_id, wanted)}"
            f" (with huggingface_hub older than 0.34: huggingface-cli download {repo_id}"
            f" --revision {wanted}), or set HF_HUB_CACHE to the cache that holds it"
            f" (looked in {cache_dir})",
        ) from None
    path = Path(folder)
    commit = path.name if COMMIT_RE.match(path.name) else None
    return Snapshot(path, commit, path.parent.parent, "hub-cache")


def branch_commit(snapshot_folder: Path, branch: str = "main") -> str | None:
    """The commit the cache's ``refs/<branch>`` names for the repository holding
    ``snapshot_folder`` (``models--org--name/snapshots/<commit>``), or None.

    What ``from_pretrained("org/name")`` loads offline is that commit's snapshot,
    whatever the manifest pins.
    """
    ref = Path(snapshot_folder).parent.parent / "refs" / branch
    try:
        text = read_untrusted(ref, limit=256, what="hub cache ref", hint="").decode("ascii")
    except (OSError, UnicodeDecodeError, InputError):
        return None
    text = text.strip()
    return text if COMMIT_RE.match(text) else None


def download_command(repo_id: str, revision: str) -> str:
    """The command that puts ``repo_id@revision`` into the cache (the ``hf`` CLI)."""
    return f"hf download {repo_id} --revision {revision}"


def hf_home(environ: Mapping[str, str] | None = None) -> str:
    """``huggingface_hub.constants.HF_HOME`` as a process started with ``environ``
    (default: this one's, read now) computes it: ``HF_HOME``, else
    ``$XDG_CACHE_HOME/huggingface``, else ``~/.cache/huggingface``; ``~`` and
    ``$VAR`` expanded with that environment."""
    env = os.environ if environ is None else environ
    default_home = os.path.join(_expanduser("~", env), ".cache")
    raw = env.get("HF_HOME", os.path.join(env.get("XDG_CACHE_HOME", default_home), "huggingface"))
    return _expandvars(_expanduser(raw, env), env)


def hub_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The hub cache a process started with ``environ`` reads (default: this one's,
    read now): ``huggingface_hub.constants.HF_HUB_CACHE``, whose precedence is
    ``HF_HUB_CACHE``, then the legacy ``HUGGINGFACE_HUB_CACHE``, then
    ``hf_home()/hub``.  A relative path is relative to that process's folder."""
    return Path(hub_cache_path(environ))


def hub_cache_path(environ: Mapping[str, str] | None = None) -> str:
    """``hub_cache_dir`` as the exact string huggingface_hub computes."""
    env = os.environ if environ is None else environ
    legacy = env.get("HUGGINGFACE_HUB_CACHE", os.path.join(hf_home(env), "hub"))
    return _expandvars(_expanduser(env.get("HF_HUB_CACHE", legacy), env), env)


def modules_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where transformers copies and imports remote code (``trust_remote_code``) in a
    process started with ``environ``: ``transformers.utils.hub.HF_MODULES_CACHE``,
    ``HF_MODULES_CACHE`` as given (transformers expands nothing in it), else
    ``hf_home()/modules``."""
    return Path(modules_cache_path(environ))


def modules_cache_path(environ: Mapping[str, str] | None = None) -> str:
    """``modules_cache_dir`` as the exact string transformers computes."""
    env = os.environ if environ is None else environ
    return env.get("HF_MODULES_CACHE", os.path.join(hf_home(env), "modules"))


# transformers 4 read these before huggingface_hub's cache (``TRANSFORMERS_CACHE``
# first); transformers 5 reads none of them.
LEGACY_TRANSFORMERS_CACHE_VARS = (
    "TRANSFORMERS_CACHE",
    "PYTORCH_TRANSFORMERS_CACHE",
    "PYTORCH_PRETRAINED_BERT_CACHE",
)


def legacy_transformers_cache(environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """(variable, value) of the cache transformers 4 loads from instead of the hub
    cache, when ``environ`` sets one; None when it sets none."""
    env = os.environ if environ is None else environ
    for name in LEGACY_TRANSFORMERS_CACHE_VARS:
        if name in env:
            return name, env[name]
    return None


def imported_cache_dirs() -> tuple[Path | None, Path | None]:
    """The hub and modules caches this process's *imported* huggingface_hub and
    transformers use (fixed when they were imported; None when not imported).
    An in-process guard compares them with ``hub_cache_dir()`` and
    ``modules_cache_dir()``: a script that changed ``os.environ`` after the import
    loads from the cache named at import."""
    hub = sys.modules.get("huggingface_hub.constants")
    dyn = sys.modules.get("transformers.dynamic_module_utils") or sys.modules.get(
        "transformers.utils.hub"
    )
    hub_dir = getattr(hub, "HF_HUB_CACHE", None)
    mod_dir = getattr(dyn, "HF_MODULES_CACHE", None)
    return (
        Path(hub_dir) if isinstance(hub_dir, str) else None,
        Path(mod_dir) if isinstance(mod_dir, str) else None,
    )


_VAR = re.compile(r"\$(\w+|\{[^}]*\})", re.ASCII)


def _expanduser(path: str, env: Mapping[str, str]) -> str:
    """``os.path.expanduser`` with ``env`` as the environment (POSIX rules)."""
    if os.name != "posix":  # huggingface_hub's own call; only POSIX is judged exactly
        return os.path.expanduser(path)
    if not path.startswith("~"):
        return path
    i = path.find("/", 1)
    if i < 0:
        i = len(path)
    import pwd

    if i == 1:
        if "HOME" in env:
            home = env["HOME"]
        else:
            try:
                home = pwd.getpwuid(os.getuid()).pw_dir
            except KeyError:
                return path
    else:
        try:
            home = pwd.getpwnam(path[1:i]).pw_dir
        except KeyError:
            return path
    return (home.rstrip("/") + path[i:]) or "/"


def _expandvars(path: str, env: Mapping[str, str]) -> str:
    """``os.path.expandvars`` with ``env`` as the environment (POSIX rules: an unset
    variable is left as written)."""
    if "$" not in path:
        return path
    i = 0
    while True:
        m = _VAR.search(path, i)
        if not m:
            return path
        i, j = m.span(0)
        name = m.group(1)
        if name.startswith("{") and name.endswith("}"):
            name = name[1:-1]
        if name not in env:
            i = j
            continue
        tail = path[j:]
        path = path[:i] + env[name]
        i = len(path)
        path += tail


def local_snapshot(folder: Path) -> Snapshot:
    if not folder.is_dir():
        raise SnapshotNotFoundError(
            "model folder does not exist",
            path=str(folder),
            loc=("model", "path"),
            expected="a folder with the model files",
            observed="absent",
            hint="fix model.path, or build/download the model there",
        )
    return Snapshot(folder, None, folder, "local")


def is_weight_file(relpath: str) -> bool:
    return relpath.lower().endswith(WEIGHT_SUFFIXES)


def _first_line(exc: BaseException, limit: int = 300) -> str:
    """The library's first sentence, whole; cut only at a word, and marked so."""
    text = " ".join(str(exc).split())
    if not text:
        return type(exc).__name__
    end = text.find(". ")
    sentence = text[: end + 1] if end >= 0 else text
    if len(sentence) <= limit:
        return sentence
    return sentence[:limit].rsplit(" ", 1)[0] + " …"


def cached_revisions(repo_id: str) -> list[tuple[str, int]]:
    """(commit, bytes on disk) of every snapshot of ``repo_id`` in the local cache,
    read through huggingface_hub's own cache scanner; empty when none."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    folder = hub_cache_path()
    try:
        info = scan_cache_dir(folder)
    except (CacheNotFound, OSError):
        return []
    out = []
    for repo in info.repos:
        if repo.repo_id == repo_id and repo.repo_type == "model":
            out += [(rev.commit_hash, int(rev.size_on_disk)) for rev in repo.revisions]
    return sorted(out)
