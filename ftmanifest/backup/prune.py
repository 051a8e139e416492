"""``ftmanifest prune``: apply the retention policy to a folder of backups.

Layer: edge (reads metadata, hashes archives, deletes files); the choosing is
``retention.select`` (pure).  ``retention_policy`` decides which policy counts:
``keep_*`` rules given for this run, or the signed manifest's, whose signature
is checked first since the policy decides what is deleted.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ftmanifest.backup.errors import BackupRefusedError
from ftmanifest.backup.meta import Listed, Meta, finding_of, list_backups
from ftmanifest.backup.retention import Decision, Item, policy_for, select
from ftmanifest.errors import FtManifestError, UsageError
from ftmanifest.findings import Finding
from ftmanifest.manifest import load_manifest
from ftmanifest.manifest.retention import KeepPolicy
from ftmanifest.signing.verify import verify_manifest_signature

LOG_NAME = "prune-log.jsonl"


@dataclass(frozen=True)
class RetentionPolicy:
    """What ``prune`` keeps: ``policy_of(kind)`` the rules for a kind of backup,
    ``experiment_id`` the experiment whose backups it covers (``None``: every
    backup), ``as_data`` the policy as the prune log and the JSON output show it."""

    policy_of: Callable[[str], Any]
    experiment_id: str | None
    as_data: dict[str, Any]


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


def retention_policy(
    keeps: Mapping[str, Any], manifest: Path | None, *, trust_path: Path | None = None
) -> RetentionPolicy:
    """The policy ``prune`` applies: the ``keep_*`` rules given (``keep_last``,
    ``keep_daily``, ``keep_within``..., ``None`` meaning not given) for every
    backup, or else the signed ``manifest``'s ``security.retention.backups`` for
    its experiment's backups; never both, never neither."""
    given = {k: v for k, v in keeps.items() if v is not None}
    if given and manifest:
        raise UsageError(
            "--keep-* options and --manifest do not go together",
            field="--manifest",
            hint="the manifest's policy, or the options, not both",
        )
    if given:
        try:
            policy = KeepPolicy(**given)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise UsageError(
                f"bad retention option: {err['msg']}",
                field="--" + str(err["loc"][0]).replace("_", "-"),
                observed=str(err.get("input")),
                hint="counts are whole numbers >= 1; durations look like 30d, 12h, 2w, 6m, 1y6m",
            ) from None
        return RetentionPolicy(lambda kind: policy, None, policy.model_dump(exclude_none=True))
    if not manifest:
        raise UsageError(
            "no retention policy",
            field="--manifest",
            hint="pass --manifest M (security.retention.backups) or --keep-daily 7 and the like",
        )
    loaded = load_manifest(manifest)
    # the policy decides what is deleted: only a trusted signer's policy counts
    verify_manifest_signature(loaded.path, loaded.canonical(), trust_path=trust_path)
    retention = loaded.manifest.security.retention.backups
    if retention is None:
        raise BackupRefusedError(
            "the manifest declares no backup retention policy; prune does not guess one",
            path=str(manifest),
            loc=("security", "retention", "backups"),
            expected="keep rules such as {keep_daily: 7, keep_monthly: 6}",
            observed="not set",
            hint="set security.retention.backups in the manifest (and sign it again), "
            "or pass --keep-last N / --keep-daily N ... for this run",
        )
    data = retention if isinstance(retention, str) else retention.model_dump(exclude_none=True)
    return RetentionPolicy(
        lambda kind: policy_for(retention, kind),
        loaded.manifest.experiment.id,
        {"manifest": str(manifest), "backups": data},
    )
