"""Hashing a job's files once, split over its ranks, with every rank getting every digest.

Layer: edges - distributed (over ``hashing`` and ``comm``; ``assign`` is pure).

The unit of work is the file: a SHA-256 is one sequential chain over the
bytes, so one file's digest cannot be computed from byte ranges hashed on
several ranks (the largest file is the floor of the job's time).

``hash_files(comm, paths, **kw)`` takes the keywords of
``ftmanifest.hashing.files.hash_files`` and returns what it would return here:

0. every rank first takes what its own stat cache knows of its own paths
   (``hashing.from_cache``: a stat and an indexed lookup); only the rest
   crosses the job, so a second verify costs each rank a stat per file;
1. every rank stats the rest of its paths and gathers one ``FileKey`` per
   regular file: node, device, inode, size, mtime_ns, ctime_ns, the path as
   given and the format to count it in (sent as JSON lists, each field's
   type checked on receipt: ``keys_from_wire``);
2. ``assign`` gives each distinct key to one of the ranks that see it,
   largest first to the least loaded (ties by path, then rank), so ranks of
   one node split a shared folder while a node with its own copy reads its
   own copy: a file that differs on one rank is a different key there, is
   hashed there, and its digest differs (that is how ``verify`` names it);
3. each rank hashes its share with ``hashing.hash_files`` and its own stat
   cache, then the digests (or errors, as their fields) are gathered as JSON.

Nothing crosses as a pickle: digests are rebuilt from checked
fields and errors only as allow-listed classes (``wire``); an answer that
does not fit (a wrong type, length or count) is a refusal naming the rank
that sent it, on every rank.

Paths that are missing or not regular files are judged by each rank itself
(a stat, no read).  Every rank calls ``all_gather_json`` twice per call, so all
ranks must make the same calls in the same order: the call's options are
gathered with the stats and a mismatch is a refusal on every rank, never a
hang.  ``Planned`` lets a caller that hashes in several calls (``lock``,
``verify``) gather once: record the paths, hash them in one call, then
serve; ``plan_manifest`` does that for a manifest's files.

Every rank receives every rank's keys: the exchange grows with ranks x
files not yet cached (about 130 bytes of JSON a file).  Two ranks of one host share
the default cache folder; ``sqlite_store`` retries the WAL switch that two
processes creating the file together would otherwise lose.
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ftmanifest import wire
from ftmanifest.distributed.comm import DEFAULT_TIMEOUT, UNREADABLE, job_from_env
from ftmanifest.errors import FtManifestError, RefusedError, UsageError
from ftmanifest.hashing import cpus, files
from ftmanifest.manifest import load_manifest
from ftmanifest.snapshot import observe_model
from ftmanifest.statcache import StatCache
from ftmanifest.verify.observe import observe_data, observe_pinned
from ftmanifest.wire import Malformed, bad_answer

if TYPE_CHECKING:
    from ftmanifest.distributed.comm import Comm, Job
    from ftmanifest.hashing.digests import CountSpec, FileDigest, StrPath

_TAG = "ftmanifest.shard/2"  # a gather that is not this step's shows as a mismatch, not a crash
FILE_COST = 1 << 16  # what opening and stating one file costs, in bytes of reading


class FileKey(NamedTuple):
    """One physical file as one rank sees it; equal keys are hashed once."""

    node: str  # "<node rank>/<host name>": ranks on one node share a key
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    path: str  # as given: errors and findings name it, so it must match too
    fmt: str | None  # the record format counted with the digest, or None


class RankMismatchError(RefusedError):
    """The ranks asked for different hashing at the same step of the job."""

    reason = "rank-mismatch"


def node_name(node_rank: int) -> str:
    """Which node this is, for ``FileKey.node``: the launcher's rank and the host name."""
    return f"{node_rank}/{socket.gethostname()}"


def file_key(path: StrPath, node: str, fmt: str | None = None) -> FileKey | None:
    """The key of a regular file, or None (missing, unreadable, not a file)."""
    name = os.fspath(path)  # callers pass the Path they key results by
    try:
        st = os.stat(name)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return FileKey(
        node, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, name, fmt
    )


_SIZE, _PATH = FileKey._fields.index("size"), FileKey._fields.index("path")


def _order(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return (-key[_SIZE], key[_PATH], *(v if v is not None else "" for v in key))


def assign(views: Sequence[Iterable[tuple[Any, ...] | None]]) -> dict[tuple[Any, ...], int]:
    """The rank that reads each distinct key: one that sees it, balanced by size (pure).

    ``views[r]``: the keys rank ``r`` needs (None entries are ignored); a
    ``FileKey`` or the plain tuple of its fields (what crosses the wire).
    Greedy longest-processing-time: keys from largest to smallest (ties by
    path, then the rest of the key), each to the least loaded rank among
    those that see it (ties to the lowest rank).  Deterministic: every rank
    computes the same answer from the same gathered views.
    """
    seen_by: dict[tuple[Any, ...], list[int]] = {}
    for rank, keys in enumerate(views):
        for key in keys:
            if key is not None:
                ranks = seen_by.setdefault(key, [])
                if not ranks or ranks[-1] != rank:
                    ranks.append(rank)
    load = [0] * len(views)
    owner: dict[tuple[Any, ...], int] = {}
    for key in sorted(seen_by, key=_order):
        rank = min(seen_by[key], key=lambda r: (load[r], r))
        owner[key] = rank
        load[rank] += key[_SIZE] + FILE_COST
    return owner


def owned(
    views: Sequence[Sequence[tuple[Any, ...] | None]],
    owner: Mapping[tuple[Any, ...], int],
    rank: int,
) -> list[tuple[Any, ...]]:
    """The keys ``rank`` reads, once each, in its own order (its answers come in that order)."""
    return list(dict.fromkeys(k for k in views[rank] if k and owner[k] == rank))


def _formats(paths: Sequence[Path], count: CountSpec) -> list[str | None]:
    if count is None:
        return [None] * len(paths)
    if isinstance(count, str):
        return [count] * len(paths)
    wanted = {Path(p): fmt for p, fmt in count.items()}
    return [wanted.get(p) for p in paths]


def hash_files(
    comm: Comm,
    paths: Iterable[StrPath],
    *,
    use_cache: bool = True,
    workers: int | None = None,
    progress: Any = None,
    cache: Any = None,
    count: CountSpec = None,
    settle: bool = False,
) -> dict[Path, FileDigest | FtManifestError]:
    """``hashing.hash_files`` over the job: the same answer, each file read by one rank."""
    requested = list(dict.fromkeys(p if isinstance(p, Path) else Path(p) for p in paths))
    own_cache = use_cache and cache is None
    active = (StatCache() if cache is None else cache) if use_cache else None
    try:
        # what this rank's cache knows costs a stat here; only the rest crosses the job
        known = files.from_cache(requested, cache=active, count=count) if active else {}
        rest = _hash_rest(
            comm, [p for p in requested if p not in known], count, settle, active, workers, progress
        )
    finally:
        if active is not None and own_cache:
            active.close()
    return {p: known[p] if p in known else rest[p] for p in requested}


def _hash_rest(
    comm: Comm,
    order: list[Path],
    count: CountSpec,
    settle: bool,
    cache: StatCache | None,
    workers: int | None,
    progress: Any,
) -> dict[Path, FileDigest | FtManifestError]:
    """The files no cache knew: keyed, gathered, assigned, hashed, gathered back."""
    use_cache = cache is not None
    node = node_name(comm.job.node_rank)
    keys = [file_key(p, node, fmt) for p, fmt in zip(order, _formats(order, count), strict=True)]
    call = [_TAG, use_cache, settle, count is not None]
    sent = {"call": call, "keys": [list(k) if k else None for k in keys]}
    views = comm.all_gather_json(sent, "file stats")
    for rank, view in enumerate(views):
        if view is UNREADABLE:
            raise bad_answer(rank, "file stats", "JSON", "bytes that do not parse as JSON")
    calls = [view.get("call") if isinstance(view, dict) else view for view in views]
    if any(c != call for c in calls):
        raise RankMismatchError(
            "the ranks asked for different hashing at the same step",
            field="ranks",
            expected=f"every rank hashing with the same options, in the same order: {call}",
            observed=", ".join(f"rank {r}: {_brief(c)}" for r, c in enumerate(calls)),
            hint="run the same command with the same manifest on every rank",
        )
    listed = [received(keys_from_wire, v.get("keys"), r, "file stats") for r, v in enumerate(views)]
    owner = assign(listed)
    mine = [p for p, k in zip(order, keys, strict=True) if k is None or owner[k] == comm.rank]
    if workers is None:  # the node's CPUs are shared by its ranks
        workers = max(1, cpus.default_workers(len(mine)) // comm.job.local_world_size)
    kw = {"use_cache": use_cache, "workers": workers, "progress": progress, "cache": cache}
    local = files.hash_files(mine, count=count, settle=settle, **kw)
    path_of: dict[tuple[Any, ...], Path] = {k: p for p, k in zip(order, keys, strict=True) if k}
    done = [_pack(local[path_of[k]]) for k in owned(listed, owner, comm.rank)]
    merged: dict[tuple[Any, ...], FileDigest | FtManifestError] = {}
    for rank, part in enumerate(comm.all_gather_json(done, "digests")):
        theirs = owned(listed, owner, rank)
        results = received(_unpack_all, part, rank, "digests", len(theirs))
        merged.update(zip(theirs, results, strict=True))
    return {p: local[p] if k is None else merged[k] for p, k in zip(order, keys, strict=True)}


def _brief(value: Any) -> str:
    return "an answer that is not JSON" if value is UNREADABLE else str(value)[:80]


def received(decode: Callable[..., Any], value: Any, rank: int, what: str, *args: Any) -> Any:
    """``decode(value, *args)``, or the refusal naming ``rank`` when its answer does not fit."""
    try:
        return decode(value, *args)
    except Malformed as exc:
        raise bad_answer(rank, what, f"{what} of this version", str(exc)) from None


def keys_from_wire(value: Any) -> list[tuple[Any, ...] | None]:
    """A rank's ``FileKey`` fields (or None), each checked: what ``assign`` may trust."""
    out: list[tuple[Any, ...] | None] = []
    for item in wire.list_of(value):
        if item is None:
            out.append(None)
            continue
        node, dev, ino, size, mtime, ctime, path, fmt = wire.list_of(item, len(FileKey._fields))
        numbers = (dev, ino, size, mtime, ctime)
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers):
            raise Malformed("a file key whose device, inode, size or times are not numbers")
        if size < 0 or not isinstance(node, str) or not isinstance(path, str):
            raise Malformed("a file key with a negative size, or a node or path that is not text")
        if not isinstance(fmt, (str, type(None))):
            raise Malformed("a file key whose format is not text")
        out.append((node, dev, ino, size, mtime, ctime, path, fmt))
    return out


def _pack(result: FileDigest | FtManifestError) -> Any:
    if isinstance(result, FtManifestError):
        return wire.error_to_wire(result)  # a dict (a count error carries its digest)
    return wire.digest_to_wire(result)  # a list


def _unpack_all(part: Any, length: int) -> list[FileDigest | FtManifestError]:
    return [
        wire.error_from_wire(v) if isinstance(v, dict) else wire.digest_from_wire(v)
        for v in wire.list_of(part, length)
    ]


Hasher = Callable[..., "dict[Path, FileDigest | FtManifestError]"]


class Planned:
    """A hasher that first only records what is asked, then serves one job-wide result.

    Call the code that hashes (``observe``) once with the ``Planned`` as its
    hasher: every call is answered with a placeholder error and remembered.
    ``run(hasher)`` hashes every recorded path in one call; after it, the
    ``Planned`` answers each call from that result, so several calls cost the
    ranks one pair of gathers, and ranks that make a different number of
    calls (one rank's folder is missing) cannot hang the job.  A path asked
    for in two formats is hashed again here for the second.
    """

    def __init__(self) -> None:
        self.wanted: dict[Path, str | None] = {}
        self.table: dict[Path, FileDigest | FtManifestError] | None = None

    def __call__(
        self, paths: Iterable[StrPath], **kw: Any
    ) -> dict[Path, FileDigest | FtManifestError]:
        order = list(dict.fromkeys(p if isinstance(p, Path) else Path(p) for p in paths))
        fmts = dict(zip(order, _formats(order, kw.pop("count", None)), strict=True))
        if self.table is None:
            for p, fmt in fmts.items():
                if self.wanted.get(p) is None:
                    self.wanted[p] = fmt
            return {p: FtManifestError(f"not hashed yet: {p}", path=str(p)) for p in order}
        out: dict[Path, FileDigest | FtManifestError] = {}
        again = [p for p in order if p not in self.table or self.wanted.get(p) != fmts[p]]
        if again:
            out.update(files.hash_files(again, count={p: fmts[p] for p in again}, **kw))
        for p in order:
            if p not in out:
                out[p] = self.table[p]
        return {p: out[p] for p in order}

    def run(self, hasher: Hasher, *, use_cache: bool = True, settle: bool = False) -> None:
        """Hash every recorded path in one call of ``hasher``.

        The options are the caller's, not the recorded calls': every rank must
        pass the same ones, also a rank that recorded nothing.
        """
        count: Mapping[Path, str | None] = dict(self.wanted)
        self.table = hasher(list(self.wanted), count=count, use_cache=use_cache, settle=settle)


def plan_manifest(
    comm: Comm,
    manifest_path: Path,
    *,
    use_cache: bool = True,
    settle: bool = False,
    allow_outside: bool = False,
) -> tuple[Planned, FtManifestError | None]:
    """Every file ``observe`` hashes for the manifest, hashed over the job in one step.

    Pass the ``Planned`` as the ``hasher`` of ``observe``, ``lock_manifest`` or
    ``verify_manifest`` (with the same ``use_cache`` and ``settle``).  A rank
    that cannot read the manifest still takes part (it hashes its share of
    the others' files) and gets its error back instead of raising it, so that
    the ranks can agree on an exit code before any of them stops.
    """
    planned = Planned()
    failure: FtManifestError | None = None
    try:
        m = load_manifest(manifest_path).manifest
        base = manifest_path.parent
        kw: dict[str, Any] = {"use_cache": False, "allow_outside": allow_outside}
        observe_model(m, base, hasher=planned, **kw)
        observe_data(m, base, hasher=planned, **kw)
        observe_pinned(m, base, hasher=planned, **kw)
    except FtManifestError as exc:
        failure = exc
    planned.run(partial(hash_files, comm), use_cache=use_cache, settle=settle)
    return planned, failure


def launched(rank_timeout: float | None, example: str) -> tuple[Job, float]:
    """The job and its ``--rank-timeout`` (``rank_timeout``, None for the default) for a
    ``--distributed`` command; usage errors otherwise."""
    job = job_from_env()
    if job is None:
        raise UsageError(
            "--distributed runs under a launcher, and none set WORLD_SIZE here",
            field="--distributed",
            expected="RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from torchrun (or srun, kubectl)",
            observed="no WORLD_SIZE in the environment",
            hint=f"torchrun --nproc-per-node N -m ftmanifest {example} --distributed, "
            "or drop --distributed",
        )
    timeout = DEFAULT_TIMEOUT if rank_timeout is None else rank_timeout
    if not 0 < timeout < 86400:
        raise UsageError(
            "--rank-timeout is out of range",
            field="--rank-timeout",
            expected="seconds, more than 0 and less than a day",
            observed=str(timeout),
        )
    return job, timeout


def no_rank_timeout(rank_timeout: float | None, example: str) -> None:
    """``--rank-timeout`` (``rank_timeout``) without ``--distributed`` is a usage error."""
    if rank_timeout is not None:
        raise UsageError(
            "--rank-timeout needs --distributed",
            field="--rank-timeout",
            hint=f"ftmanifest {example} --distributed --rank-timeout S (under torchrun)",
        )


def agree_exit(comm: Comm, code: int) -> int:
    """The job's exit code, the same on every rank: the worst of the ranks' codes."""
    return max(exit_codes(comm, code))


def exit_codes(comm: Comm, code: int) -> list[int]:
    """Every rank's exit code (``code`` is this rank's), the same list on every rank."""
    codes = comm.all_gather_json(code, "exit codes")
    for rank, c in enumerate(codes):
        if not isinstance(c, int) or isinstance(c, bool) or not 0 <= c <= 255:
            raise bad_answer(rank, "exit codes", "an exit code (0-255)", _brief(c))
    return list(codes)
