"""``ftmanifest prune``: apply the retention policy to a folder of backups.

Layer: edge (reads metadata, hashes archives, deletes files); the choosing is
``retention.select`` (pure).

Only backups whose signed metadata verifies and whose archive still has the
signed digest take part: a damaged newest backup must not count as "kept"
while the last good copy is deleted.  Those that cannot be judged are listed
as problems and never deleted.  A dry run by default; ``apply`` first
appends what it is about to delete to ``prune-log.jsonl`` in the folder
(fsynced), then deletes each backup's files, metadata last.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ftmanifest.backup.meta import Listed, Meta, finding_of, list_backups
from ftmanifest.backup.retention import Decision, Item, select
from ftmanifest.errors import FtManifestError
from ftmanifest.findings import Finding

LOG_NAME = "prune-log.jsonl"


@dataclass
class Plan:
    decisions: list[Decision]
    metas: dict[str, Meta]
    outside: list[Meta] = field(default_factory=list)  # other experiments, not judged
    problems: list[Finding] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    def to_remove(self) -> list[Meta]:
        return [self.metas[d.item.backup_id] for d in self.decisions if not d.keep]


def plan(
    folder: Path,
    policy_of: Callable[[str], Any],
    *,
    experiment_id: str | None = None,
    trust_path: Path | None = None,
) -> Plan:
    """Judge every verified, intact backup of ``folder`` (of ``experiment_id``
    only, when given)."""
    from ftmanifest.backup.unpack import hash_archive

    listed: list[Listed] = list_backups(folder, trust_path=trust_path)
    metas: dict[str, Meta] = {}
    outside: list[Meta] = []
    problems: list[Finding] = []
    for entry in listed:
        if entry.meta is None:
            problems += entry.findings
            continue
        meta = entry.meta
        if experiment_id is not None and meta.experiment_id != experiment_id:
            outside.append(meta)
            continue
        try:
            hash_archive(folder / meta.archive_name, meta)
        except FtManifestError as exc:
            problems.append(finding_of(exc, folder / meta.archive_name))
            continue
        metas[meta.backup_id] = meta
    items = [Item(m.backup_id, (m.experiment_id or "", m.kind), m.created) for m in metas.values()]
    return Plan(select(items, policy_of), metas, outside, problems)


def apply(folder: Path, result: Plan, policy: dict[str, Any]) -> None:
    """Record, then delete, every backup the plan does not keep."""
    from ftmanifest.fsutil import write_error

    doomed = result.to_remove()
    if not doomed:
        return
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [
        json.dumps({
            "deleted_at": now, "backup_id": m.backup_id, "kind": m.kind,
            "experiment_id": m.experiment_id, "created": m.predicate()["created"],
            "archive_sha256": m.archive_sha256, "files": list(m.file_names()), "policy": policy,
        }, sort_keys=True)
        for m in doomed
    ]  # fmt: skip
    log = folder / LOG_NAME
    try:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, ("\n".join(lines) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        for m in doomed:
            for name in [n for n in m.file_names() if n != m.meta_name] + [m.meta_name]:
                try:
                    os.unlink(folder / name)
                except FileNotFoundError:
                    pass
            result.deleted.append(m.backup_id)
    except OSError as exc:
        raise write_error(exc, log, "cannot prune") from None
