"""Scan results cached by file digest: an unchanged file is not scanned again.

Layer: judging rooms - edge (SQLite in the user cache directory, next to the stat
cache).  ``scan_cached`` asks the stat cache for every file's digest (an unchanged file
costs one ``stat``; nothing is read) and looks its findings up by

    (file digest, scanner version, options, name suffix)

The scanner version is a digest of the scanner's own source files, so any
change to a rule, validator or reader invalidates every entry; the options are
the ones that change findings (not ``jobs`` or ``engine``: both engines give the
same findings); the name suffix is there because JSONL/CSV annotations and the
"pickle under a .safetensors name" finding depend on it.  Cached findings are
re-attached to the file's current path.

A file the cache does not know is read: a small text file once
(``scan.small``: digest and findings from the same bytes, its stat key taken
before and after that read), anything else hashed by ``ftmanifest.hashing``,
looked up, and scanned if still unknown.

Safety: a result is stored only when the file's stat is the same before
hashing and after scanning (a file edited meanwhile is scanned again next
time); files that could not be hashed are scanned without the cache.  Any
SQLite failure (locked, corrupt, unwritable) logs one warning and the run goes
on without the cache: a broken cache costs speed, never findings.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterable, Mapping
from contextlib import suppress
from functools import lru_cache
from pathlib import Path

from ftmanifest.findings import Finding, sort_findings
from ftmanifest.progress import ProgressSink
from ftmanifest.scan.engine import ScanOptions, ScanResult, regions, scan_files
from ftmanifest.scan.names import name_findings
from ftmanifest.scan.small import read_small
from ftmanifest.scan.walk import walk
from ftmanifest.sqlite_store import open_store
from ftmanifest.statcache import StatCache

log = logging.getLogger(__name__)

DB_NAME = "scancache-v2.sqlite3"
_OPTION_FIELDS = ("secrets", "pii", "pickles", "max_bytes", "ner")
# ``context``: 32 hex digits of sha256 over the scanner version and the options key,
# rather than both spelled out in every row (they made a row ~330 bytes, most of it
# the same 270 bytes a million times).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    digest TEXT NOT NULL,
    context TEXT NOT NULL,
    scanned_bytes INTEGER NOT NULL,
    findings TEXT NOT NULL,
    stored_at REAL NOT NULL,
    PRIMARY KEY (digest, context)
) WITHOUT ROWID
"""


_META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID"


def _forget_other_versions(conn: sqlite3.Connection) -> None:
    """Drop every row when the scanner changed: a row's context holds the scanner
    version, so rows of another version are never read again (a million files left
    150 MB behind at every upgrade or edit of a rule)."""
    version = scanner_version()
    ask = "SELECT value FROM meta WHERE key = 'scanner'"
    row = conn.execute(ask).fetchone()
    if row is not None and row[0] == version:
        return
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute(ask).fetchone()  # another process may have just done it
        if row is None or row[0] != version:
            conn.execute("DELETE FROM results")
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('scanner', ?)", (version,))


@lru_cache(maxsize=1)
def scanner_version() -> str:
    """Digest of the scanner's source: rules, validators, readers and walkers, and
    libphonenumber's version (read from its metadata: importing it costs a guarded
    start 0.15 s when every file's findings come from the cache)."""
    from importlib import metadata

    try:
        phone_version = metadata.version("phonenumbers")
    except metadata.PackageNotFoundError:  # not installed as a distribution: ask it
        import phonenumbers

        phone_version = phonenumbers.__version__
    h = hashlib.sha256(f"phonenumbers {phone_version}\0".encode())
    here = Path(__file__).parent
    for src in sorted(here.rglob("*.py")):
        h.update(src.relative_to(here).as_posix().encode() + b"\0" + src.read_bytes() + b"\0")
    return "sha256:" + h.hexdigest()


def options_key(path: Path, opts: ScanOptions) -> str:
    """The options that change findings, plus what the file's name changes."""
    return _OptionKeys(opts)(path)


class _OptionKeys:
    """``options_key`` for one scan's options: the JSON is made once per suffix
    (a folder of a million shards has one), not once a file."""

    def __init__(self, opts: ScanOptions) -> None:
        from ftmanifest.scan.text import phones

        self.base: dict[str, object] = {f: getattr(opts, f) for f in _OPTION_FIELDS}
        self.base["phone_regions"] = list(opts.phone_regions or phones.regions())
        self.made: dict[tuple[str, str], str] = {}

    def __call__(self, path: Path | str) -> str:
        name = os.path.basename(os.fspath(path)).lower()
        dot = name.rfind(".")
        last = name[dot:] if 0 < dot < len(name) - 1 else ""  # ``Path.suffix``, without a Path
        suffix = (last, name.removesuffix(".gz").rsplit(".", 1)[-1])
        key = self.made.get(suffix)
        if key is None:
            key = json.dumps({**self.base, "suffix": list(suffix)}, sort_keys=True,
                             separators=(",", ":"))  # fmt: skip
            self.made[suffix] = key
        return key


def _encode(findings: list[Finding]) -> str:
    rows = []
    for f in findings:
        row = f._asdict()
        row.pop("path")
        row["extra"] = dict(f.extra)
        rows.append(row)
    return json.dumps(rows, separators=(",", ":"))


def _decode(blob: str, path: str) -> list[Finding]:
    return [Finding(**{**row, "path": path}) for row in json.loads(blob)]


class ScanCache:
    """The SQLite store; every method degrades to "no entry" once it failed."""

    def __init__(self, directory: Path | None = None, *, timeout: float = 5.0) -> None:
        from ftmanifest.statcache import cache_dir

        self.path = (directory or cache_dir()) / DB_NAME
        self.hits = self.misses = self.stored = 0
        self._contexts: dict[str, str] = {}
        self._conn: sqlite3.Connection | None = None
        try:
            self._conn = open_store(self.path, (_SCHEMA, _META), timeout=timeout)
            _forget_other_versions(self._conn)
        except (OSError, sqlite3.Error) as exc:
            self._disable(exc)

    @property
    def enabled(self) -> bool:
        return self._conn is not None

    def _disable(self, exc: BaseException) -> None:
        log.warning(
            "ftmanifest: scan cache %s unusable (%s); scanning without it. "
            "Remove the file to rebuild it.",
            self.path,
            exc,
        )
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    def get(self, digest: str, options: str) -> tuple[int, str] | None:
        if self._conn is None:
            return None
        try:
            row = self._conn.execute(
                "SELECT scanned_bytes, findings FROM results WHERE digest = ? AND context = ?",
                (digest, self._context(options)),
            ).fetchone()
        except sqlite3.Error as exc:
            self._disable(exc)
            return None
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return int(row[0]), str(row[1])

    def put_many(self, rows: Iterable[tuple[str, str, int, str]]) -> None:
        """Store (digest, options, scanned bytes, encoded findings) rows."""
        if self._conn is None:
            return
        now = time.time()
        data = [(d, self._context(o), n, f, now) for d, o, n, f in rows]
        try:
            with self._conn:
                self._conn.execute("BEGIN IMMEDIATE")
                insert = "INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?)"
                self._conn.executemany(insert, data)
        except sqlite3.Error as exc:
            self._disable(exc)
            return
        self.stored += len(data)

    def _context(self, options: str) -> str:
        """The scanner version and ``options`` as one short key (made once per key)."""
        made = self._contexts.get(options)
        if made is None:
            text = f"{scanner_version()}\0{options}".encode()
            made = self._contexts[options] = hashlib.sha256(text).hexdigest()[:32]
        return made

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class _Served:
    """The cache's findings for a digest, asked from whichever process read the file:
    each process opens a connection of its own (a forked worker must not use its
    parent's).  A damaged row is no answer: the file is scanned and the row replaced."""

    def __init__(self, directory: Path, opts: ScanOptions) -> None:
        self.directory = directory
        self.keys = _OptionKeys(opts)
        self._pid = 0
        self._cache: ScanCache | None = None

    def __call__(self, digest: str, path: Path) -> tuple[int, list[Finding]] | None:
        if self._pid != os.getpid():
            self._pid, self._cache = os.getpid(), ScanCache(self.directory)
        assert self._cache is not None
        hit = self._cache.get(digest, self.keys(path))
        try:
            return (hit[0], _decode(hit[1], os.fspath(path))) if hit else None
        except (ValueError, TypeError):
            return None

    def close(self) -> None:
        if self._cache is not None and self._pid == os.getpid():
            self._cache.close()


def _stat_key(path: Path) -> tuple[int, ...] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def scan_cached(
    paths: Iterable[Path],
    options: ScanOptions | None = None,
    *,
    use_cache: bool = True,
    cache_dir: Path | None = None,
    symlink_root: Path | None = None,
    progress: ProgressSink | None = None,
) -> ScanResult:
    """``scan_paths`` that skips files whose digest was already scanned.

    Same findings as ``scan_paths(paths, options)``; ``use_cache=False`` neither
    reads nor writes the cache (nor the stat cache).  ``cache_dir`` defaults to
    ``ftmanifest.statcache.cache_dir()``; ``symlink_root``: see ``walk``;
    ``progress`` counts the files judged (from the cache or scanned) and the
    bytes read.
    """
    tops = [Path(p) for p in paths]
    files, problems = walk(tops, symlink_root=symlink_root)
    if progress is not None:
        progress.add_total(0, items=len(files))
    result = scan_files_cached(
        files, options, use_cache=use_cache, cache_dir=cache_dir, progress=progress
    )
    opts = options or ScanOptions()
    names = _name_findings_cached(tops, files, opts, use_cache=use_cache, cache_dir=cache_dir)
    result.findings = sort_findings(result.findings + problems + names)
    return result


def _name_findings_cached(
    tops: list[Path],
    files: list[Path],
    opts: ScanOptions,
    *,
    use_cache: bool,
    cache_dir: Path | None,
) -> list[Finding]:
    """``name_findings``, looked up by a digest of every path it judges (the tops
    as given, then the files): the same names give the same findings, and an
    unchanged folder costs no compilation of the rules (half a second, every
    verify and guarded start)."""
    if not use_cache or not (opts.secrets or opts.pii):
        return name_findings(tops, files, secrets=opts.secrets, pii=opts.pii)
    digest = hashlib.sha256()
    for path in (*map(os.fspath, tops), "", *map(os.fspath, files)):  # "" parts the two
        digest.update(os.fsencode(path) + b"\0")
    key = "names:sha256:" + digest.hexdigest()
    options = f"names secrets={opts.secrets} pii={opts.pii}"
    cache = ScanCache(cache_dir)
    try:
        hit = cache.get(key, options)
        if hit is not None:
            with suppress(ValueError, TypeError):
                return [Finding(**row) for row in json.loads(hit[1])]
        found = name_findings(tops, files, secrets=opts.secrets, pii=opts.pii)
        rows = [{**f._asdict(), "extra": dict(f.extra)} for f in found]
        cache.put_many([(key, options, 0, json.dumps(rows, separators=(",", ":")))])
        return found
    finally:
        cache.close()


def scan_files_cached(
    files: list[Path],
    options: ScanOptions | None = None,
    *,
    use_cache: bool = True,
    cache_dir: Path | None = None,
    progress: ProgressSink | None = None,
) -> ScanResult:
    """``scan_files`` on files ``walk`` listed, skipping digests already scanned.

    ``scan --distributed`` calls it on each rank's share of the files.
    """
    opts = options or ScanOptions()
    if not use_cache:
        return scan_files(files, opts, progress=progress)
    cache = ScanCache(cache_dir)
    stats = StatCache()
    try:
        with regions(opts):
            result = _scan_with(cache, stats, files, opts, progress)
    finally:
        cache.close()
        stats.close()
    result.files = [str(p) for p in files]
    result.findings = sort_findings(result.findings)
    return result


def _scan_with(
    cache: ScanCache,
    stats: StatCache,
    files: list[Path],
    opts: ScanOptions,
    progress: ProgressSink | None = None,
) -> ScanResult:
    from ftmanifest.hashing.digests import ALGORITHM
    from ftmanifest.hashing.files import from_cache, hash_files

    files, beside = _by_own_bytes(files)
    result = _scan_beside(beside, opts, progress)
    known = from_cache(files, cache=stats)  # reads no file
    cached, todo = _lookup(cache, files, known, opts)
    result.findings += cached.findings
    result.bytes_scanned += cached.bytes_scanned
    _judged(progress, len(files) - len(todo))
    jobs = opts.jobs or os.cpu_count() or 1
    served = _Served(cache.path.parent, opts)
    done, rest = read_small(todo, opts, jobs=jobs, digests=True, served=served, progress=progress)
    served.close()
    keys = _OptionKeys(opts)
    rows = []
    for one in done:
        p = todo[one.at]
        result.findings += one.findings
        result.bytes_scanned += one.size
        assert one.digest is not None  # asked for
        stats.put(os.path.abspath(p), ALGORITHM, one.key, one.digest, hashed_at_ns=one.read_at)
        if one.cached:
            continue
        with suppress(TypeError, ValueError):  # an extra value JSON cannot hold: not kept
            rows.append((one.digest, keys(p), one.size, _encode(one.findings)))
    cache.put_many(rows)
    left = [todo[i] for i in rest]  # large files, other formats, what could not be read
    if not left:
        return result
    before = {p: _stat_key(p) for p in left}
    digests = hash_files(left, cache=stats, progress=progress)
    more, again = _lookup(cache, left, digests, opts)
    _judged(progress, len(left) - len(again))
    result.findings += more.findings
    result.bytes_scanned += more.bytes_scanned
    if again:
        fresh = scan_files(again, opts, progress=progress)
        result.findings += fresh.findings
        result.bytes_scanned += fresh.bytes_scanned
        _store(cache, again, fresh.findings, digests, before, opts)
    return result


def _by_own_bytes(files: list[Path]) -> tuple[list[Path], list[Path]]:
    """(files judged by their own bytes, files judged with their neighbours).

    An ONNX model's verdict depends on the external-data files it names, and a
    raw data file's on the model that names it (``onnx_external``): neither is
    a property of the file's digest, so a file in a folder holding an ONNX model
    is never served from the cache nor stored in it."""
    onnx_folders: dict[str, bool] = {}
    own: list[Path] = []
    beside: list[Path] = []
    for p in files:
        folder = os.path.dirname(os.path.abspath(p))
        if folder not in onnx_folders:
            try:
                onnx_folders[folder] = any(n.lower().endswith(".onnx") for n in os.listdir(folder))
            except OSError:
                onnx_folders[folder] = True  # cannot tell: judge it fresh
        (beside if onnx_folders[folder] else own).append(p)
    return own, beside


def _scan_beside(files: list[Path], opts: ScanOptions, progress: ProgressSink | None) -> ScanResult:
    """Scan files judged with their neighbours, without the cache."""
    return scan_files(files, opts, progress=progress) if files else ScanResult()


def _judged(progress: ProgressSink | None, files: int) -> None:
    """``files`` judged by the cache's findings: counted, with no byte read."""
    if progress is not None and files:
        progress.advance(0, items=files)


def _digest(digests: Mapping[Path, object], p: Path) -> str | None:
    """The file's digest, or None where hashing failed (an error object)."""
    digest = getattr(digests.get(p), "digest", None)
    return digest if isinstance(digest, str) else None


def _lookup(
    cache: ScanCache, files: list[Path], digests: Mapping[Path, object], opts: ScanOptions
) -> tuple[ScanResult, list[Path]]:
    """(what the cache knows, the files to scan); a file ``digests`` leaves out is scanned."""
    result, todo = ScanResult(), []
    keys = _OptionKeys(opts)
    for p in files:
        digest = _digest(digests, p)
        hit = cache.get(digest, keys(p)) if digest else None
        try:
            found = _decode(hit[1], str(p)) if hit else None
        except (ValueError, TypeError):  # a damaged row: scan again, it gets replaced
            found = None
        if hit is None or found is None:
            todo.append(p)
            continue
        result.bytes_scanned += hit[0]
        result.findings += found
    return result, todo


def _store(
    cache: ScanCache,
    todo: list[Path],
    findings: list[Finding],
    digests: Mapping[Path, object],
    before: Mapping[Path, tuple[int, ...] | None],
    opts: ScanOptions,
) -> None:
    by_path: dict[str, list[Finding]] = {}
    for f in findings:
        by_path.setdefault(f.path or "", []).append(f)
    rows = []
    keys = _OptionKeys(opts)
    for p in todo:
        digest = _digest(digests, p)
        if digest is None or before[p] is None or _stat_key(p) != before[p]:
            continue  # not hashed, or changed while we looked: scan again next time
        found = by_path.get(str(p), [])
        if any(f.kind == "not-scanned" and "unreadable" in f.message for f in found):
            continue  # an I/O error is not a property of the content
        size = before[p][2]  # type: ignore[index]
        scanned = size if 0 < size <= opts.max_bytes else 0
        try:
            blob = _encode(found)
        except (TypeError, ValueError):  # an extra value JSON cannot hold: do not cache
            continue
        rows.append((digest, keys(p), scanned, blob))
    cache.put_many(rows)
