"""Run records: what happened when a manifest was verified, run or trained.

Layer: edge (appends to a file).  The signed manifest says what an experiment
is; run records say what happened to it: refused, started, finished, and
every drift accepted on purpose with its reason.  ``verify`` (when it accepts
a drift), ``run`` and the Trainer guard append one JSON object per line to
``<manifest file name>.runs.jsonl`` beside the manifest.

Appends are whole lines written with one ``write`` on an ``O_APPEND``
descriptor under an exclusive ``flock`` and fsynced, so records from
concurrent processes never interleave and a crash loses at most the record
being written, never an earlier one.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ftmanifest.verify import VerifyReport

RECORD_FORMAT = 1
SUFFIX = ".runs.jsonl"


def records_path(manifest_path: Path) -> Path:
    """``exp.yaml`` -> ``exp.yaml.runs.jsonl`` in the same folder (as the link names it)."""
    return manifest_path.with_name(manifest_path.name + SUFFIX)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def build(
    report: VerifyReport,
    *,
    status: str,
    started_at: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One record of ``report``: manifest, environment, accepted rows, remaining findings."""
    import ftmanifest
    from ftmanifest.observed_env import fingerprint

    env = report.environment
    code = None
    if env is not None and env.code.commit is not None:
        code = {"commit": env.code.commit, "dirty": env.code.dirty}
    record: dict[str, Any] = {
        "ftmanifest_run": RECORD_FORMAT,
        "ftmanifest_version": ftmanifest.__version__,
        "status": status,
        "manifest": {
            "path": str(Path(report.manifest_path).absolute()),
            "digest": report.manifest_digest,
        },
        "started_at": started_at or now(),
        "finished_at": None,
        "signature_checked": report.signature_checked,
        "environment": {
            "python": None if env is None else env.python,
            "backend": None if env is None else env.backend.model_dump(mode="json"),
            "packages": None if env is None else dict(env.packages),
            "code": code,
            "fingerprint": None if env is None else fingerprint(env),
        },
        "accepted": [
            {
                "field": a.finding.field,
                "rule": a.finding.rule,
                "expected": a.finding.expected,
                "observed": a.finding.observed,
                "reason": a.reason,
            }
            for a in report.accepted
        ],
        "findings": [f.to_dict() for f in report.findings],
        "warnings": list(report.warnings),
    }
    record.update(extra)
    return record


MARKS = ("abandoned", "invalid")  # what a person records about an attempt after the fact


def mark(manifest_path: Path, digest: str, status: str, reason: str) -> dict[str, Any]:
    """Record that the experiment of ``manifest_path`` was abandoned or is invalid.

    The manifest stays as signed; the mark is one more run record, with the
    manifest's digest, so it stays tied to exactly what was marked.
    """
    import ftmanifest
    from ftmanifest.errors import UsageError

    if status not in MARKS:
        raise UsageError(
            f"cannot mark an experiment {status!r}",
            field="--mark",
            expected=" or ".join(MARKS),
            observed=status,
            hint="started, finished and failed are recorded by `ftmanifest run` itself",
        )
    if not reason.strip():
        raise UsageError(
            "a mark needs a reason",
            field="--reason",
            expected="why the attempt was abandoned or is invalid",
            observed=repr(reason),
            hint="--reason 'loss diverged at step 40'",
        )
    record: dict[str, Any] = {
        "ftmanifest_run": RECORD_FORMAT,
        "ftmanifest_version": ftmanifest.__version__,
        "status": status,
        "reason": reason.strip(),
        "manifest": {"path": str(Path(manifest_path).absolute()), "digest": digest},
        "at": now(),
    }
    append(manifest_path, record)
    return record


def append(manifest_path: Path, record: Mapping[str, Any]) -> Path:
    """Append ``record`` as one line to the manifest's run records; returns the file."""
    path = records_path(manifest_path)
    line = (json.dumps(record, sort_keys=False, default=str) + "\n").encode("utf-8")
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    # Never through a symlink (a planted link would append to a data file) and
    # never into a FIFO or device: open without following or blocking, then check.
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags, 0o644)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        _lock(fd)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # a torn line from a crash stays alone on its line
        view = memoryview(line)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)  # closing releases the lock
    return path


def read(manifest_path: Path) -> list[dict[str, Any]]:
    """Every complete record (a torn last line from a crash is skipped)."""
    path = records_path(manifest_path)
    if not path.exists():
        return []
    out = []
    for line in path.read_text("utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def _lock(fd: int) -> None:
    try:
        import fcntl
    except ImportError:  # Windows: O_APPEND alone
        return
    fcntl.flock(fd, fcntl.LOCK_EX)
