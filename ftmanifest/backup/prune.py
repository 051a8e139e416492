"""``ftmanifest prune``: apply the retention policy to a folder of backups.

Layer: judging rooms - edge (checks backups, deletes files); the choosing is
``retention.select`` (pure).  ``retention_policy`` decides which policy counts:
``keep_*`` rules given for this run, or the signed manifest's, whose signature
is checked first since the policy decides what is deleted.

Only backups that ``backup check`` passes (``check.check_folder``, the same
code: signature, archive and key file digests, recipients) take part: a
damaged newest backup must not count as "kept" while the last good copy is
deleted.  Those that fail are listed as problems and never deleted; one dated
after now is a warning, kept and not counted (``retention``).  A dry run by
default; ``apply`` works through one descriptor of the folder it judged:
every file it will delete must still be a regular file, then it appends what
it is about to delete to ``prune-log.jsonl`` (a regular file, opened without
following links or blocking on a FIFO; fsynced), then deletes each backup's
metadata first (``create`` writes it last): an interrupted deletion leaves
files no metadata names, which ``backup check`` lists, never a backup that
looks whole nor one that stays "cannot be judged" forever.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ftmanifest.backup.check import check_folder
from ftmanifest.backup.errors import BackupRefusedError
from ftmanifest.backup.meta import Meta
from ftmanifest.backup.retention import CLOCK_SLACK, FUTURE, Decision, Item, policy_for, select
from ftmanifest.errors import InputError, NotRegularFileError, UsageError
from ftmanifest.findings import Finding
from ftmanifest.fsutil import write_error
from ftmanifest.manifest import load_manifest
from ftmanifest.manifest.retention import KeepPolicy
from ftmanifest.signing.verify import verify_manifest_signature
from ftmanifest.untrusted import kind_of

LOG_NAME = "prune-log.jsonl"
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_LOG_OPEN = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
_CHANGED = (
    "the backups folder changed while prune ran; nothing was deleted: "
    "run `ftmanifest backup check DIR`, then prune again"
)
_LOG_HINT = (
    f"remove or rename {LOG_NAME} (prune appends to it what it deletes, as a regular "
    "file); nothing was deleted"
)


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
    folder_id: tuple[int, int] | None = None  # (st_dev, st_ino) of the folder judged

    def to_remove(self) -> list[Meta]:
        return [self.metas[d.item.backup_id] for d in self.decisions if not d.keep]


def plan(
    folder: Path,
    policy_of: Callable[[str], Any],
    *,
    experiment_id: str | None = None,
    trust_path: Path | None = None,
    now: datetime | None = None,
) -> Plan:
    """Judge every backup of ``folder`` (of ``experiment_id`` only, when given)
    that ``backup check`` passes, ``keep_within`` measured from ``now``
    (default: the clock)."""
    now = now or datetime.now(timezone.utc)
    checked, _ = check_folder(folder, trust_path=trust_path)  # files no metadata names: not ours
    folder_id = _identity(os.stat(folder))
    metas: dict[str, Meta] = {}
    outside: list[Meta] = []
    problems: list[Finding] = []
    for c in checked:
        if c.meta is not None and experiment_id not in (None, c.meta.experiment_id):
            outside.append(c.meta)
            continue
        problems += c.findings  # warnings of a backup that passes, too
        if c.ok and c.meta is not None:
            metas[c.meta.backup_id] = c.meta
    items = [
        Item(m.backup_id, (m.experiment_id or "", m.kind), m.created_precise or m.created,
             m.sequence or 0)
        for m in metas.values()
    ]  # fmt: skip
    decisions = select(items, policy_of, now=now)
    problems += [
        _from_the_future(folder, metas[d.item.backup_id], now)
        for d in decisions
        if d.reasons == (FUTURE,)
    ]
    return Plan(decisions, metas, outside, problems, folder_id=folder_id)


def _from_the_future(folder: Path, meta: Meta, now: datetime) -> Finding:
    return Finding(
        kind="backup",
        rule="backup.created-in-future",
        message="the backup is dated after now (the clock that made it ran fast): "
        "kept, and not counted by any keep rule",
        path=str(folder / meta.meta_name),
        field="created",
        expected=f"at most {now.strftime('%Y-%m-%dT%H:%M:%SZ')} (now, "
        f"{int(CLOCK_SLACK.total_seconds() // 60)} minutes of clock slack)",
        observed=meta.predicate()["created"],
        severity="warning",
        hint="set the clock of the machine that made it right (date -u); prune judges "
        "the backup once its date is past, or delete it by hand",
    )


def _identity(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


def apply(folder: Path, result: Plan, policy: dict[str, Any]) -> None:
    """Record, then delete, every backup the plan does not keep.

    Nothing is deleted unless the folder is the one the plan judged, every
    file of every backup to delete is (still) a regular file or gone, and the
    log is a regular file; each backup goes metadata first."""
    doomed = result.to_remove()
    if not doomed:
        return
    dfd = _open_folder(folder, result.folder_id)
    try:
        for m in doomed:
            for name in m.file_names():
                _refuse_unless_regular(dfd, folder, name, "a file of a backup to delete")
        _log(dfd, folder, doomed, policy)
        for m in doomed:
            for name in (m.meta_name, *(n for n in m.file_names() if n != m.meta_name)):
                try:
                    os.unlink(name, dir_fd=dfd)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    raise write_error(exc, folder / name, "cannot delete") from None
            result.deleted.append(m.backup_id)
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _open_folder(folder: Path, judged: tuple[int, int] | None) -> int:
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    except OSError as exc:
        raise write_error(exc, folder, "cannot open the backups folder") from None
    seen = _identity(os.fstat(dfd))
    if judged is not None and seen != judged:
        os.close(dfd)
        raise InputError(
            "the backups folder changed since prune judged it (renamed or replaced)",
            path=str(folder),
            field="DIR",
            expected=f"the folder judged: device {judged[0]}, inode {judged[1]}",
            observed=f"device {seen[0]}, inode {seen[1]}",
            hint=_CHANGED,
        )
    return dfd


def _refuse_unless_regular(
    dfd: int, folder: Path, name: str, what: str, hint: str = _CHANGED
) -> None:
    """Raise unless ``name`` in the folder is a regular file or absent (not followed)."""
    try:
        mode = os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        _not_regular(folder / name, mode, what, hint)


def _not_regular(path: Path, mode: int, what: str, hint: str) -> None:
    raise NotRegularFileError(
        f"{what} is {kind_of(mode)}, not a regular file",
        path=str(path),
        expected="a regular file",
        observed=kind_of(mode),
        hint=hint,
    )


def _log(dfd: int, folder: Path, doomed: list[Meta], policy: dict[str, Any]) -> None:
    """Append what is about to be deleted to the log, fsynced."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [
        json.dumps({
            "deleted_at": now, "backup_id": m.backup_id, "kind": m.kind,
            "experiment_id": m.experiment_id, "created": m.predicate()["created"],
            "archive_sha256": m.archive_sha256, "files": list(m.file_names()), "policy": policy,
        }, sort_keys=True)
        for m in doomed
    ]  # fmt: skip
    _refuse_unless_regular(dfd, folder, LOG_NAME, "the prune log", _LOG_HINT)
    try:
        fd = os.open(LOG_NAME, _LOG_OPEN, 0o600, dir_fd=dfd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):  # swapped in since
            _refuse_unless_regular(dfd, folder, LOG_NAME, "the prune log", _LOG_HINT)
        raise write_error(exc, folder / LOG_NAME, "cannot write the prune log") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            _not_regular(folder / LOG_NAME, mode, "the prune log", _LOG_HINT)
        os.write(fd, ("\n".join(lines) + "\n").encode())
        os.fsync(fd)
    except OSError as exc:
        raise write_error(exc, folder / LOG_NAME, "cannot write the prune log") from None
    finally:
        os.close(fd)


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
