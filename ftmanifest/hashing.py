"""Streaming, parallel file and tree digests with a stat cache.

Layer: edge (reads files), below the manifest model: everything that pins or
verifies file content goes through here.  Digests are written
``sha256:<hex>``.

- One file is read in ``CHUNK_SIZE`` pieces into one reused buffer (constant
  memory); hashlib releases the GIL on large updates, so several files are
  hashed in parallel on a thread pool.
- A file whose stat (device, inode, size, mtime_ns, ctime_ns) differs before
  and after reading, or whose byte count differs from its size, raises
  ``FileChangedError`` and is never cached.
- Tree digest: sha256 over ``relpath_utf8 NUL digest LF`` for each regular
  file, sorted by the UTF-8 bytes of its '/'-separated relative path.  Empty
  folders do not count.  ``.git`` is skipped.  Symlinks are followed only
  when they resolve inside ``symlink_root`` (default: the tree's root): a
  link to a file is hashed as its target's content under the link's own
  name, a link to a folder is walked (a loop is an error), a link that
  resolves outside raises ``SymlinkEscapeError``.  Sockets, FIFOs and
  devices are skipped.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from ftmanifest.errors import FtManifestError, InputError, InputNotFoundError
from ftmanifest.progress import ProgressSink
from ftmanifest.statcache import StatCache, StatKey

ALGORITHM = "sha256"
CHUNK_SIZE = 1 << 20  # 1 MiB: measured as fast as 4 MiB and less memory per worker
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_DIGEST_RE = re.compile(r"[a-z0-9][a-z0-9-]*:[0-9a-f]+")

StrPath: TypeAlias = "str | os.PathLike[str]"


class FileChangedError(InputError):
    """A file changed while it was being hashed."""


class UnreadableFileError(InputError):
    """A file exists but cannot be read (permission, I/O error, not a file)."""


class SymlinkEscapeError(InputError):
    """A symlink inside a hashed tree resolves outside the allowed folder."""


@dataclass(frozen=True)
class FileDigest:
    digest: str  # "sha256:<hex>"
    size: int


@dataclass(frozen=True)
class TreeResult:
    files: dict[str, FileDigest]  # '/'-separated relative path -> digest, sorted
    digest: str  # tree_digest over files


_Outcome: TypeAlias = "tuple[FileDigest, StatKey, int] | FtManifestError"


class _Cancelled(Exception):
    """Workers stop early when the caller was interrupted."""


def default_workers(n_files: int) -> int:
    """CPUs this process may use, at most one per file, at least one."""
    try:
        cpus = len(os.sched_getaffinity(0))  # respects taskset/cgroup cpusets
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, n_files))


def hash_file(
    path: StrPath,
    *,
    use_cache: bool = True,
    cache: StatCache | None = None,
    progress: ProgressSink | None = None,
) -> FileDigest:
    """Digest of one file; raises an ``InputError`` subclass naming the path."""
    p = Path(path)
    result = hash_files([p], use_cache=use_cache, cache=cache, progress=progress, workers=1)[p]
    if isinstance(result, FtManifestError):
        raise result
    return result


def hash_files(
    paths: Iterable[StrPath],
    *,
    use_cache: bool = True,
    workers: int | None = None,
    progress: ProgressSink | None = None,
    cache: StatCache | None = None,
) -> dict[Path, FileDigest | FtManifestError]:
    """Digest every path, in parallel; never stops at the first error.

    Returns, in input order, a ``FileDigest`` or the error for each path
    (``InputNotFoundError``, ``UnreadableFileError``, ``FileChangedError``).
    ``use_cache=False`` neither reads nor writes the stat cache.  ``cache``
    defaults to the user's cache (``statcache.cache_dir()``).
    """
    # Pre-filled in input order; every value is set below.
    results: dict[Path, FileDigest | FtManifestError] = dict.fromkeys(  # type: ignore[assignment]
        p if isinstance(p, Path) else Path(p) for p in paths
    )
    own_cache = use_cache and cache is None
    active = (StatCache() if cache is None else cache) if use_cache else None
    try:
        seen: list[tuple[Path, str, os.stat_result]] = []
        for p in results:
            name = os.fspath(p)
            try:
                st = os.stat(name)
            except OSError as exc:
                results[p] = _os_error(p, exc)
                continue
            if stat.S_ISREG(st.st_mode):
                seen.append((p, os.path.abspath(name), st))
            else:
                results[p] = _not_regular(p)
        keys = [(abspath, StatKey.of(st)) for _, abspath, st in seen]
        known = active.lookup_many(keys, ALGORITHM) if active is not None else {}
        todo: list[tuple[Path, str]] = []
        for p, abspath, st in seen:
            if abspath in known:
                results[p] = FileDigest(known[abspath], st.st_size)
                continue
            todo.append((p, abspath))
            if progress is not None:
                progress.add_total(st.st_size)
        _hash_all(todo, results, active, progress, workers)
    finally:
        if active is not None:
            active.close() if own_cache else active.flush()
    return results


def _hash_all(
    todo: list[tuple[Path, str]],
    results: dict[Path, FileDigest | FtManifestError],
    cache: StatCache | None,
    progress: ProgressSink | None,
    workers: int | None,
) -> None:
    cancel = threading.Event()

    def attempt(p: Path) -> _Outcome:
        try:
            return _hash_one(p, progress, cancel)
        except FtManifestError as exc:
            return exc

    def record(p: Path, abspath: str, outcome: _Outcome) -> None:
        if isinstance(outcome, FtManifestError):
            results[p] = outcome
            return
        results[p], key, hashed_at = outcome
        if cache is not None:
            cache.put(abspath, ALGORITHM, key, outcome[0].digest, hashed_at_ns=hashed_at)

    n = min(workers or default_workers(len(todo)), len(todo))
    if n <= 1:
        for p, abspath in todo:
            record(p, abspath, attempt(p))
        return
    with ThreadPoolExecutor(n, thread_name_prefix="ftmanifest-hash") as pool:
        futures = {pool.submit(attempt, p): (p, a) for p, a in todo}
        try:
            for fut in as_completed(futures):
                record(*futures[fut], fut.result())
        except BaseException:
            cancel.set()  # KeyboardInterrupt: running workers stop at their next chunk
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def _hash_one(
    path: Path, progress: ProgressSink | None, cancel: threading.Event
) -> tuple[FileDigest, StatKey, int]:
    """Read and digest one file; returns the digest, the stat key and the start time."""
    hashed_at = time.time_ns()
    try:
        fd = os.open(path, _OPEN_FLAGS)  # O_NONBLOCK: a FIFO swapped in cannot hang us
    except OSError as exc:
        raise _os_error(path, exc) from exc
    h = hashlib.new(ALGORITHM)
    total = 0
    try:
        with io.FileIO(fd, "rb", closefd=True) as f:
            before = os.fstat(fd)
            if not stat.S_ISREG(before.st_mode):
                raise _not_regular(path)
            view = memoryview(bytearray(CHUNK_SIZE))
            while n := f.readinto(view):
                if cancel.is_set():
                    raise _Cancelled
                h.update(view[:n])
                total += n
                if progress is not None:
                    progress.advance(n)
            after = os.fstat(fd)
        now = os.stat(path)  # the path may point at a new file (atomic rename)
    except FileNotFoundError as exc:
        raise _changed(path, "the file was removed while it was hashed") from exc
    except OSError as exc:
        raise _os_error(path, exc) from exc
    key = StatKey.of(before)
    if total != before.st_size or StatKey.of(after) != key or StatKey.of(now) != key:
        raise _changed(path, f"size {before.st_size} -> {now.st_size}, read {total} bytes")
    return FileDigest(f"{ALGORITHM}:{h.hexdigest()}", total), key, hashed_at


def _os_error(path: Path, exc: OSError) -> FtManifestError:
    reason = exc.strerror or str(exc)
    if isinstance(exc, FileNotFoundError):
        return InputNotFoundError(
            f"file not found: {path}",
            path=str(path),
            observed=reason,
            hint="restore the file or update the manifest",
        )
    return UnreadableFileError(
        f"cannot read {path}: {reason}",
        path=str(path),
        observed=reason,
        hint="check the file's permissions and the disk",
    )


def _not_regular(path: Path) -> UnreadableFileError:
    return UnreadableFileError(
        f"not a regular file: {path}",
        path=str(path),
        expected="a regular file",
        hint="point the manifest at files, not folders or devices",
    )


def _changed(path: Path, observed: str) -> FileChangedError:
    return FileChangedError(
        f"file changed while it was being hashed: {path}",
        path=str(path),
        observed=observed,
        hint="wait until whatever writes it has finished, then run again",
    )


# --- trees -------------------------------------------------------------------


def tree_digest(files: Mapping[str, str]) -> str:
    """sha256 over ``relpath NUL digest LF`` per file, sorted by UTF-8 path bytes (pure)."""
    records = []
    for rel, digest in files.items():
        _check_relpath(rel)
        if not _DIGEST_RE.fullmatch(digest):
            raise InputError(
                f"not a digest for {rel!r}: {digest!r}",
                path=rel,
                observed=digest,
                expected="<algorithm>:<lowercase hex>",
            )
        records.append((rel.encode("utf-8"), digest.encode("ascii")))
    records.sort()
    h = hashlib.sha256()
    for rel_b, digest_b in records:
        h.update(rel_b + b"\0" + digest_b + b"\n")
    return f"sha256:{h.hexdigest()}"


def _check_relpath(rel: str) -> None:
    parts = rel.split("/")
    problem = None
    if not rel or "\0" in rel or any(part in ("", ".", "..") for part in parts):
        problem = "a relative path with no empty, '.' or '..' parts and no NUL"
    else:
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:
            problem = "a file name that is valid UTF-8"
    if problem:
        raise InputError(
            f"bad relative path in a tree: {rel!r} (expected {problem})",
            path=rel,
            expected=problem,
            observed=repr(rel),
            hint="rename the file",
        )


def list_tree(root: StrPath, *, symlink_root: StrPath | None = None) -> dict[str, Path]:
    """Regular files under ``root`` by '/'-separated relative path (see module doc)."""
    top = Path(root)
    if not top.is_dir():
        if not top.exists():
            raise InputNotFoundError(f"folder not found: {top}", path=str(top))
        raise InputError(f"not a folder: {top}", path=str(top), expected="a folder")
    boundary = os.path.realpath(symlink_root if symlink_root is not None else top)
    out: dict[str, Path] = {}
    st = top.stat()
    _walk(str(top), "", boundary, {(st.st_dev, st.st_ino)}, out)
    return dict(sorted(out.items(), key=lambda kv: kv[0].encode("utf-8")))


def _walk(
    folder: str, rel: str, boundary: str, active: set[tuple[int, int]], out: dict[str, Path]
) -> None:
    try:
        with os.scandir(folder) as it:
            entries = list(it)
    except OSError as exc:
        raise _os_error(Path(folder), exc) from exc
    for entry in entries:
        if entry.name == ".git":
            continue
        relpath = f"{rel}/{entry.name}" if rel else entry.name
        _check_relpath(relpath)
        try:
            if entry.is_symlink():
                target = os.path.realpath(entry.path)
                if os.path.commonpath([target, boundary]) != boundary:
                    raise SymlinkEscapeError(
                        f"symlink {entry.path} resolves outside {boundary}: {target}",
                        path=entry.path,
                        expected=f"a target inside {boundary}",
                        observed=target,
                        hint="copy the file into the folder or remove the link",
                    )
            st = os.stat(entry.path)  # follows a symlink, now known to stay inside
        except FileNotFoundError as exc:
            raise InputNotFoundError(
                f"broken symlink: {entry.path}", path=entry.path, observed=str(exc.strerror)
            ) from exc
        except OSError as exc:
            raise _os_error(Path(entry.path), exc) from exc
        if stat.S_ISDIR(st.st_mode):
            ident = (st.st_dev, st.st_ino)
            if ident in active:
                raise InputError(f"symlink loop at {entry.path}", path=entry.path)
            _walk(entry.path, relpath, boundary, active | {ident}, out)
        elif stat.S_ISREG(st.st_mode):
            out[relpath] = Path(entry.path)


def hash_tree(
    root: StrPath,
    *,
    use_cache: bool = True,
    workers: int | None = None,
    progress: ProgressSink | None = None,
    cache: StatCache | None = None,
    symlink_root: StrPath | None = None,
) -> TreeResult:
    """Digest every regular file under ``root`` and the tree; raises the first error by path.

    For per-file errors, call ``list_tree`` then ``hash_files`` and ``tree_digest``.
    For a Hugging Face cache snapshot, pass the repository folder
    (``models--org--name``) as ``symlink_root``: snapshot files link to ``../../blobs``.
    """
    listing = list_tree(root, symlink_root=symlink_root)
    results = hash_files(
        listing.values(), use_cache=use_cache, workers=workers, progress=progress, cache=cache
    )
    files: dict[str, FileDigest] = {}
    for rel, p in listing.items():
        result = results[p]
        if isinstance(result, FtManifestError):
            raise result
        files[rel] = result
    return TreeResult(files, tree_digest({rel: fd.digest for rel, fd in files.items()}))
