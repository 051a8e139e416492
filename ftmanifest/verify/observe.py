"""What is here, for one manifest: environment, model files, data, pinned files, disk.

Layer: judging rooms - edge (probes, hashes, reads the disk).  Produces plain
``Observed`` data that ``drift.compare`` judges and ``lock`` writes back; nothing here
decides whether something is wrong.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest import foldercache, statcache, treelist
from ftmanifest.counts import RecordCountError, cache_key, format_of
from ftmanifest.errors import FtManifestError
from ftmanifest.fsutil import locate, path_bound
from ftmanifest.hashing.files import hash_files
from ftmanifest.hashing.listing import Ahead
from ftmanifest.hashing.tree import hash_tree
from ftmanifest.hashing.walk import walk_tree
from ftmanifest.ledger.recordfile import NAME_RE
from ftmanifest.ledger.runrecord import records_path
from ftmanifest.location import Loc
from ftmanifest.manifest.pinned import pinned_files
from ftmanifest.probe import ProbeContext, git_context, probe_all
from ftmanifest.probe.fields import to_environment_fields
from ftmanifest.probe.git_ancestry import descends_with_only, path_allowed, repo_paths, repo_tops
from ftmanifest.probe.git_content import ContentChange, GitFailed
from ftmanifest.probe.other_manifests import in_worktree
from ftmanifest.progress import Progress, ProgressSink
from ftmanifest.signing.locate import DEFAULT_TRUST
from ftmanifest.snapshot import FileState, ModelState, observe_model
from ftmanifest.verify.environment import from_probe

if TYPE_CHECKING:
    from ftmanifest.hashing.listing import Walked
    from ftmanifest.manifest.environment import Environment
    from ftmanifest.manifest.model import Manifest
    from ftmanifest.probe.git_content import ContentChange
    from ftmanifest.snapshot import Hasher


@dataclass
class Observed:
    environment: Environment  # what lock would pin here (``observed_env.from_probe``)
    installed: dict[str, str]
    env_values: dict[str, str | None]
    model: ModelState
    data: list[FileState]  # one per manifest.data entry, in order (names may repeat)
    pinned: dict[Loc, FileState]  # manifest location -> state (lock file, scripts, baseline)
    disk_free: int | None
    disk_path: str
    code_ancestry: Any = None  # probe.git_ancestry.AncestryResult when HEAD != the pin
    code_dirty: tuple[ContentChange, ...] = ()  # what makes the code dirty (probe.git_content)


def folder_format(declared: str | None, listing: Iterable[str]) -> str | None:
    """The record format of a folder of shards, or None when its records are its files.

    ``data[i].format`` decides, as for a file; without one, the shards' common
    suffix does when it is a format with a record count (``part-*.jsonl``).
    """
    if declared is not None:
        return declared if cache_key(declared) else None
    # the suffix as Path.suffix reads it: after the last dot of the name, not a leading one
    kinds = {os.path.splitext(rel)[1].lstrip(".").lower() for rel in listing}
    kind = kinds.pop() if len(kinds) == 1 else None
    return kind if kind and cache_key(kind) else None


def walked_format(declared: str | None, walked: Walked) -> str | None:
    """``folder_format`` of a walked folder, without a string a file when every name
    ends in the first one's suffix (a folder of shards)."""
    if declared is not None or not walked.count:
        return folder_format(declared, ())
    first = walked.names[: walked.names.index(b"\0")].decode("utf-8")
    suffix = os.path.splitext(first)[1].encode("utf-8")
    only_dots = re.compile(rb"(?:^|[/\0])\.*" + re.escape(suffix) + rb"\0")
    if suffix and walked.names.count(suffix + b"\0") == walked.count:
        if not only_dots.search(walked.names):  # ".jsonl" alone has no suffix
            return folder_format(None, (first,))
    return folder_format(None, walked.rels())


def _known(path: Path, base: Path, use_cache: bool) -> bool:
    """Whether the folder cache holds a state for ``path`` (then the walk only stats)."""
    if not use_cache:
        return False
    root, boundary = os.path.abspath(path), str(path_bound(base))
    return foldercache.known(statcache.cache_dir(), root, boundary)


def hash_path(
    path: Path,
    base: Path,
    *,
    use_cache: bool,
    fmt: str | None = None,
    count: bool = False,
    settle: bool = False,
    hasher: Hasher | None = None,
    progress: ProgressSink | None = None,
) -> FileState:
    """Digest of a file, or tree digest of a folder, and with ``count`` its records.

    Records are counted in the same read as the hash (JSONL, CSV and text;
    JSON and Parquet take a second read) and cached with the digest: a folder
    of shards in a known format counts the records of all shards, any other
    folder its files.  Errors become state, not exceptions.  ``hasher``: a
    function with ``hashing.hash_files``'s signature (default: that one);
    ``progress`` counts the bytes read.
    """
    state = FileState(str(path))
    try:
        if path.is_dir():
            # once, for the format and the hash; a first hash reads as it walks
            ahead = (
                Ahead(count, fmt) if hasher is None and not _known(path, base, use_cache) else None
            )
            # a link in a data folder may lead where the manifest's own paths may
            bound = path_bound(base)
            walked = walk_tree(path, symlink_root=bound, read=ahead)
            kind = walked_format(fmt, walked) if count else None
            tree = hash_tree(
                path,
                use_cache=use_cache,
                symlink_root=bound,
                count=kind,
                settle=settle,
                hasher=hasher,
                walked=walked,
                progress=progress,
            )
            state.digest = tree.digest
            state.size = tree.size
            state.tree = tree.files
            if count:
                state.records = tree.records if kind else len(tree.files)
        else:
            result = (hasher or hash_files)(
                [path],
                use_cache=use_cache,
                count=format_of(path, fmt) if count else None,
                settle=settle,
                progress=progress,
            )[path]
            if isinstance(result, FtManifestError):
                raise result
            found = result
            state.digest, state.size, state.records = found.digest, found.size, found.records
    except RecordCountError as exc:
        if exc.digest is not None:
            state.digest, state.size = exc.digest.digest, exc.digest.size
        state.error = f"cannot count records: {exc.message}"
    except FtManifestError as exc:
        state.error = exc.message
    return state


def observe_data(
    manifest: Manifest,
    base: Path,
    *,
    use_cache: bool,
    allow_outside: bool,
    settle: bool = False,
    hasher: Hasher | None = None,
    progress: ProgressSink | None = None,
) -> list[FileState]:
    """Digest and record count of every data entry, in the manifest's order.

    One read per changed file: the count comes from the hashing read (or, for
    an unchanged file, from the cache beside its digest).  A folder's file list
    is kept in the cache under its tree digest (``treelist``); one that differs
    from its pin is diffed against the pinned list, when the cache holds it, so
    that verify names the files that changed.
    """
    out: list[FileState] = []
    for i, entry in enumerate(manifest.data):
        path, problem = locate(base, entry.path, ("data", i, "path"), allow_outside)
        if path is None:
            out.append(FileState(entry.path, error=problem))
            continue
        state = hash_path(
            path,
            base,
            use_cache=use_cache,
            fmt=entry.format,
            count=True,
            settle=settle,
            hasher=hasher,
            progress=progress,
        )
        state.path = entry.path
        if state.tree is not None and state.error is None:
            state.differs = _tree_diff(entry.digest, state)
        out.append(state)
    return out


def _tree_diff(pinned: str | None, state: FileState) -> Any:
    """Keep the folder's list; ``treelist.diff`` against the pinned one, or None (the
    same, nothing pinned, or the pinned list not in the cache)."""
    assert state.tree is not None
    treelist.keep(state.digest, state.tree)
    if pinned is None or state.digest == pinned:
        return None
    listed = treelist.read(pinned)
    if listed is None:
        return None
    return treelist.diff(listed, ((rel, f.digest) for rel, f in state.tree.items()))


def observe_pinned(
    manifest: Manifest,
    base: Path,
    *,
    use_cache: bool,
    allow_outside: bool,
    settle: bool = False,
    hasher: Hasher | None = None,
    progress: ProgressSink | None = None,
) -> dict[Loc, FileState]:
    out: dict[Loc, FileState] = {}
    for loc, rel, _digest in pinned_files(manifest):
        path, problem = locate(base, rel, loc, allow_outside)
        if path is None:
            out[loc] = FileState(rel, error=problem)
            continue
        state = hash_path(
            path, base, use_cache=use_cache, settle=settle, hasher=hasher, progress=progress
        )
        state.path = rel
        out[loc] = state
    return out


def observe(
    manifest: Manifest,
    manifest_path: Path,
    *,
    use_cache: bool = True,
    code_dir: Path | None = None,
    allow_outside: bool = False,
    revision: str | None = None,
    settle: bool = False,
    hasher: Hasher | None = None,
) -> Observed:
    """Everything ``drift.compare`` needs about this machine for ``manifest``.

    ``settle`` (``lock``): wait out the stat cache's racy window for freshly
    written files, so that they are cached and the next verify reads nothing.
    ``hasher`` (model and data files, pinned files): a function with
    ``hashing.hash_files``'s signature; ``verify --distributed`` passes one that
    splits the files over the job's ranks (``distributed.shard``).
    """
    base = manifest_path.parent

    judged = tuple(str(p) for p in _judged_by_digest(manifest, manifest_path))
    ctx = ProbeContext(root=code_dir or base, use_cache=use_cache, digest_judged=judged)
    probed = probe_all(ctx=ctx)
    environment = to_environment_fields(probed, packages=manifest.environment.packages)
    ancestry = None
    dirty: tuple[ContentChange, ...] = ()
    if "code" in environment and probed.git is not None and probed.git.root:
        ancestry, dirty = _judge_code(manifest, manifest_path, probed.git, environment)
    disk_path = base
    if manifest.export is not None:
        disk_path = _existing_parent(base / manifest.export.path)
    # one bar for every file read: the model's, the data's (a multi-GB JSONL) and the
    # pinned files'; it draws only on a terminal, for work over a second, never with -q
    with Progress() as bar:
        model = observe_model(
            manifest,
            base,
            use_cache=use_cache,
            allow_outside=allow_outside,
            revision=revision,
            progress=bar,
            settle=settle,
            hasher=hasher,
        )
        data = observe_data(
            manifest,
            base,
            use_cache=use_cache,
            allow_outside=allow_outside,
            settle=settle,
            hasher=hasher,
            progress=bar,
        )
        pinned = observe_pinned(
            manifest,
            base,
            use_cache=use_cache,
            allow_outside=allow_outside,
            settle=settle,
            hasher=hasher,
            progress=bar,
        )
    try:
        free: int | None = shutil.disk_usage(disk_path).free
    except OSError:
        free = None

    return Observed(
        environment=from_probe(environment),
        installed=dict(probed.packages),
        env_values={k: os.environ.get(k) for k in manifest.environment.env_vars},
        model=model,
        data=data,
        pinned=pinned,
        disk_free=free,
        disk_path=str(disk_path),
        code_ancestry=ancestry,
        code_dirty=dirty,
    )


def own_files(manifest: Manifest, manifest_path: Path) -> list[Path]:
    """The manifest, its envelope, the ledger, and everything it pins by digest.

    Absolute but *not* resolved: a pinned data path that is a symlink to
    ``train.py`` must not make ``train.py`` one of the manifest's own files.
    """
    base = manifest_path.parent
    own = [
        manifest_path,
        manifest_path.with_name(manifest_path.name + ".sig.json"),
        records_path(manifest_path),  # the ledger folder: records are not training code
    ]
    own += [base / e.path for e in manifest.data]
    own += [base / pin.path for pin in pinned_files(manifest)]
    if manifest.model.path is not None:
        own.append(base / manifest.model.path)
    if manifest.security.scan.baseline:
        own.append(base / manifest.security.scan.baseline)
    return [Path(os.path.abspath(p)) for p in own]


def _judged_by_digest(manifest: Manifest, manifest_path: Path) -> list[Path]:
    """``own_files`` less the ledger folder: the files the code check need not read
    (a script hidden among the ledger's records is still code)."""
    ledger = Path(os.path.abspath(records_path(manifest_path)))
    return [p for p in own_files(manifest, manifest_path) if p != ledger]


def _judge_code(
    manifest: Manifest, manifest_path: Path, git: Any, environment: dict[str, Any]
) -> tuple[Any, tuple[ContentChange, ...]]:
    """Dirty = content changes beyond the manifest's own files; ancestry when HEAD
    moved on.  Returns (the ancestry verdict or None, the changes that make the code
    dirty).

    The probe compares the work tree with HEAD by content (``probe.git_content``:
    no index flag, filter or submodule setting hides a change).  The manifest,
    its signature and everything it pins by digest are judged by their digests,
    so only other changes make the training code dirty, and a HEAD that descends
    from the pinned commit with only those files changed (the locked manifest
    was committed) is the pinned code.  The repository's trust file
    (``.ftmanifest/allowed_signers``) is not training code either: adding it
    after ``lock`` must not move the code.  Nor are another manifest's files
    (``probe.other_manifests``): several manifests share one repository.
    """
    base = manifest_path.parent
    own = [*own_files(manifest, manifest_path), Path(git.root) / DEFAULT_TRUST]
    tops = repo_tops(git.root, base)
    inside = repo_paths(own, tops, base=base)
    ledger = repo_paths([records_path(manifest_path)], tops, base=base)
    listed = [q for c in git.changes for q in _untracked_within(git, c, inside | ledger)]
    others = [
        c for c in listed
        if not path_allowed(inside, c.path.rstrip("/")) or _stray_in_ledger(c.path, ledger)
    ]  # fmt: skip
    others = _not_other_manifests(git.root, others)
    code = dict(environment["code"])
    environment["code"] = {**code, "dirty": bool(others)}
    pinned = manifest.environment.code.commit
    if pinned and git.commit and pinned != git.commit:
        refuse = lambda p: _stray_in_ledger(p, ledger)  # noqa: E731
        verdict = descends_with_only(base, pinned, git.commit, own, refuse=refuse,
                                     other_manifests=True)  # fmt: skip
        return verdict, tuple(others)
    return None, tuple(others)


def _not_other_manifests(root: str, changes: list[ContentChange]) -> list[ContentChange]:
    """``changes`` less another manifest's files (its manifest, its envelope)."""
    kinds = ("modified", "staged", "untracked")
    wanted = [(c.path, c.expected.blob if c.expected else None) for c in changes if c.kind in kinds]
    try:
        theirs = in_worktree(root, wanted, git_context(ProbeContext(timeout=10.0)))
    except GitFailed:
        return changes  # cannot read the committed side: every change counts
    return [c for c in changes if c.path not in theirs]


def _untracked_within(
    git: Any, change: ContentChange, within: frozenset[str]
) -> list[ContentChange]:
    """``change`` itself, or, when git listed a whole untracked folder that holds
    one of the manifest's own files or is (inside) the ledger, every untracked
    file in it, for the caller to judge one by one."""
    path = change.path
    folder = path.rstrip("/")
    holds = any(a.startswith(folder + "/") or path_within(folder, a) for a in within)
    if change.kind != "untracked" or not path.endswith("/") or not holds:
        return [change]

    runner = git_context(ProbeContext(timeout=10.0))
    listed = runner.run(
        ["git", "ls-files", "--others", "--exclude-standard", "-z", "--", folder + "/"],
        cwd=git.root,
    )
    if not listed.ok:
        return [change]  # cannot tell: dirty
    files = [f for f in listed.stdout.split("\0") if f]
    return [ContentChange(f, "untracked", None, "untracked") for f in files] or [change]


def path_within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + "/")


def _stray_in_ledger(path: str, ledger: frozenset[str]) -> bool:
    """A file inside the ledger folder that is not a ledger record (nor an
    append's temp file) is judged as code: a script hidden in the ledger must
    not pass as run records."""
    import re

    clean = path.rstrip("/")
    if not any(path_within(clean, top) for top in ledger):
        return False
    name = clean.rsplit("/", 1)[-1]
    if path.endswith("/") or clean in ledger:
        return True  # a folder not expanded, or the ledger path itself as a file
    return NAME_RE.match(name) is None and re.match(r"^\..+\.tmp$", name) is None


def _existing_parent(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(".")
