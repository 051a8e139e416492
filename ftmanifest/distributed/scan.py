"""``scan --distributed``: the job's files scanned once, split over its ranks.

Layer: edges - distributed (over ``scan`` and ``shard``).  Every rank walks the
paths itself (what cannot be walked is its own finding), keys each file as
``shard.file_key`` does and gathers the keys; ``shard.assign`` gives each
distinct file to one rank that sees it (balanced by size), which scans it
with its own scan and stat caches.  The findings of each file, and the bytes
it counts, are gathered, and every rank puts together the result of the
files *it* listed: rank 0's is the result a single-process scan of the same
paths gives, finding for finding, in the same order.

Bytes: a file counts its size when it is not empty, not over the size cap
and was readable (as ``scan.engine`` counts them).  A finding is tied to its
file by its path; one whose path names no file of the share (none known
today) is handed to every rank rather than lost.

Keys and findings cross as JSON, never as pickles: every field
is checked on receipt (``shard.keys_from_wire``, ``wire.finding_from_wire``)
and an answer that does not fit is a refusal naming the rank.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest import wire
from ftmanifest.distributed import shard
from ftmanifest.distributed.agree import who
from ftmanifest.errors import FtManifestError
from ftmanifest.findings import Finding, sort_findings
from ftmanifest.scan.cache import scan_files_cached
from ftmanifest.scan.engine import ScanOptions, ScanResult
from ftmanifest.scan.walk import walk

if TYPE_CHECKING:
    from ftmanifest.distributed.comm import Comm
    from ftmanifest.distributed.shard import FileKey


def _bytes(key: FileKey, found: list[Finding], opts: ScanOptions) -> int:
    unreadable = any(f.kind == "not-scanned" and "unreadable" in f.message for f in found)
    return key.size if 0 < key.size <= opts.max_bytes and not unreadable else 0


def _findings_from_wire(value: Any, files: int) -> tuple[list[list[Finding]], list[Finding]]:
    """A rank's findings: one list per file of its share, and the strays; each checked."""
    if not isinstance(value, dict) or set(value) != {"done", "stray"}:
        raise wire.Malformed("scan findings that are not {done, stray}")
    done = [
        list(map(wire.finding_from_wire, wire.list_of(f)))
        for f in wire.list_of(value["done"], files)
    ]
    return done, list(map(wire.finding_from_wire, wire.list_of(value["stray"])))


def scan_distributed(
    comm: Comm,
    paths: Iterable[Path],
    options: ScanOptions | None = None,
    *,
    use_cache: bool = True,
    symlink_root: Path | None = None,
) -> ScanResult:
    """``scan_cached(paths, options)`` for this rank, each file scanned by one rank."""
    opts = options or ScanOptions()
    failure: FtManifestError | None = None
    try:
        files, problems = walk([Path(p) for p in paths], symlink_root=symlink_root)
    except FtManifestError as exc:  # a path missing here: still take part, then say so
        files, problems, failure = [], [], exc
    node = shard.node_name(comm.job.node_rank)
    keys = [shard.file_key(p, node) for p in files]
    sent = [list(k) if k else None for k in keys]
    views = [
        shard.received(shard.keys_from_wire, view, rank, "files to scan")
        for rank, view in enumerate(comm.all_gather_json(sent, "files to scan"))
    ]
    owner = shard.assign(views)
    mine: dict[tuple[Any, ...] | Path, Path] = {}  # one entry per file to scan here, in order
    for p, k in zip(files, keys, strict=True):
        if k is None:
            mine[p] = p  # could not be keyed: this rank says why (each time it is listed)
        elif owner[k] == comm.rank:
            mine.setdefault(k, p)  # a file listed twice is scanned once, reported twice
    part = scan_files_cached(list(mine.values()), opts, use_cache=use_cache)
    by_path: dict[str, list[Finding]] = {}
    for f in part.findings:
        by_path.setdefault(f.path or "", []).append(f)
    local = {str(p) for p, k in zip(files, keys, strict=True) if k is None}
    done = [by_path.pop(str(mine[k]), []) for k in shard.owned(views, owner, comm.rank)]
    stray = [f for path, found in by_path.items() if path not in local for f in found]
    merged: dict[tuple[Any, ...], list[Finding]] = {}
    strays: list[Finding] = []
    answer = {
        "done": [[wire.finding_to_wire(f) for f in found] for found in done],
        "stray": [wire.finding_to_wire(f) for f in stray],
    }
    for rank, got in enumerate(comm.all_gather_json(answer, "scan findings")):
        share = shard.owned(views, owner, rank)
        theirs, extra = shard.received(_findings_from_wire, got, rank, "scan findings", len(share))
        merged.update(zip(share, theirs, strict=True))
        strays += extra
    findings = [f for path in sorted(local) for f in by_path.get(path, [])] + strays
    result = ScanResult(files=[str(p) for p in files])
    for k in keys:
        if k is not None:
            findings += merged[k]
            result.bytes_scanned += _bytes(k, merged[k], opts)
    if failure is not None:
        raise failure
    result.findings = sort_findings(findings + problems)
    return result


def job_findings(comm: Comm, result: ScanResult) -> ScanResult:
    """``result`` (this rank's) with every other rank's findings that it lacks, each
    marked with the ranks and hosts that found it: a node whose own copy holds a
    token shows it in rank 0's report, not only in its exit code.  The same on every
    rank."""
    sent = [wire.finding_to_wire(f) for f in result.findings]
    found_by: dict[str, list[int]] = {}
    first: dict[str, Finding] = {}
    for rank, got in enumerate(comm.all_gather_json(sent, "every rank's scan findings")):
        for f in shard.received(_all_findings, got, rank, "every rank's scan findings"):
            key = json.dumps(wire.finding_to_wire(f), sort_keys=True)
            found_by.setdefault(key, []).append(rank)
            first.setdefault(key, f)
    everyone = comm.world_size
    out = []
    for key, ranks in found_by.items():
        f = first[key]
        if len(set(ranks)) < everyone:
            f = f._replace(message=f"{f.message} (only on {who(sorted(set(ranks)), comm.hosts)})")
        out.append(f)
    return ScanResult(sort_findings(out), result.files, result.bytes_scanned)


def _all_findings(value: Any) -> list[Finding]:
    return list(map(wire.finding_from_wire, wire.list_of(value)))
