"""The sealed test split: every use recorded before it happens, counted per family.

Layer: judging rooms - edge (reads the manifest's data, appends to the ledger).  The
method: the final test split is held back, because using it again and again to choose
settings destroys its value.  So a data entry with ``sealed: true`` is evaluated only
through ``ftmanifest unseal M --split NAME --reason TEXT``, which checks the split is
the pinned data, records one *use* in the ledger and gives the path for that one
evaluation; ``ftmanifest score`` on a sealed split consumes one recorded, not yet scored
use of this experiment on exactly that data, and refuses without one.  Uses are counted
over the experiment's family (every experiment sharing its root ancestor), and from the
second one on every use, ``verify``, ``audit`` and the report warn.

What this cannot stop: someone reading the file directly.  It makes every
honest use visible and every score of the split traceable to a recorded use.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import ftmanifest
from ftmanifest.errors import InputError, RefusedError, UsageError
from ftmanifest.fsutil import write_error
from ftmanifest.hashing.files import hash_file
from ftmanifest.hashing.tree import hash_tree
from ftmanifest.ledger import new_attempt, open_ledger, runrecord
from ftmanifest.ledger.attempts import SealedUse, family_uses, sealed_uses
from ftmanifest.manifest.identity import split_entry

if TYPE_CHECKING:
    from ftmanifest.manifest import LoadedManifest


def _digest_of(path: Path) -> str:
    return hash_tree(path).digest if path.is_dir() else hash_file(path).digest


def split_digest(loaded: LoadedManifest, split: str) -> dict[str, Any]:
    """The split's name, path and digest; refuse when the file is not what is pinned."""
    n, entry = split_entry(loaded, split)
    loc = ("data", n, "digest")
    if entry.digest is None:
        raise InputError(
            f"data entry {split!r} has no pinned digest",
            path=str(loaded.path),
            loc=loc,
            expected="sha256:...",
            observed="absent",
            hint=f"run `ftmanifest lock {loaded.path}`",
        )
    observed = _digest_of(loaded.path.parent / entry.path)
    if observed != entry.digest:
        raise RefusedError(
            f"split {split!r} is not the data the manifest pins",
            path=str(loaded.path.parent / entry.path),
            loc=loc,
            expected=entry.digest,
            observed=observed,
            hint="score on the pinned data, or re-lock the manifest if the change is intended",
        )
    return {"name": split, "path": entry.path, "digest": observed}


def sealed_entry(loaded: LoadedManifest, split: str) -> Any:
    n, entry = split_entry(loaded, split)
    if not entry.sealed:
        raise UsageError(
            f"data entry {split!r} is not sealed: it needs no unsealing",
            path=str(loaded.path),
            loc=("data", n, "sealed"),
            expected="sealed: true",
            observed="sealed: false",
            hint=f"evaluate {split!r} directly; unseal is for the final test split",
        )
    return entry


def _ledger(loaded: LoadedManifest, ledger: Path | str | None) -> Any:
    return open_ledger(loaded.path, ledger)


def _tree(loaded: LoadedManifest) -> dict[str, str | None]:
    exp = loaded.manifest.experiment
    return {exp.id: exp.parent}


def unseal(
    loaded: LoadedManifest, split: str, reason: str, *, ledger: Path | str | None = None
) -> dict[str, Any]:
    """Record one use of the sealed ``split``; returns what the caller prints."""
    text = runrecord.check_reason(reason)
    entry = sealed_entry(loaded, split)
    data = split_digest(loaded, split)  # refuses when the split is not the pinned data
    store = _ledger(loaded, ledger)
    exp = loaded.manifest.experiment
    use = new_attempt()
    record = {
        "ftmanifest_version": ftmanifest.__version__,
        "status": "unsealed",
        "reason": text,
        "attempt": "u-" + use,
        "experiment": runrecord.experiment_of(loaded),
        "manifest": runrecord.manifest_ref(loaded.path, loaded.digest(), store.root),
        "sealed": {"split": split, "use": use, "data_digest": data["digest"]},
    }
    try:
        written = store.append(record)
    except OSError as exc:
        raise write_error(exc, store.root, "cannot record the use of the sealed split") from None
    uses = family_uses(store.read().entries, exp.id, split, _tree(loaded))
    return {
        "path": str(Path(loaded.path).parent / entry.path),
        "split": split,
        "use": use,
        "record": written.id,
        "data_digest": data["digest"],
        "family_uses": len(uses),
        "this_experiment_uses": sum(1 for u in uses if u.experiment == exp.id),
        "ledger": str(store.root),
    }


def open_use(
    loaded: LoadedManifest, split: str, data_digest: str, *, ledger: Path | str | None = None
) -> SealedUse:
    """The oldest recorded, not yet scored use of ``split`` by this experiment on
    this data; refuses (exit 1) when there is none."""
    store = _ledger(loaded, ledger)
    exp = loaded.manifest.experiment
    contents = store.read()
    mine = [u for u in sealed_uses(contents.entries)
            if u.experiment == exp.id and u.split == split]  # fmt: skip
    free = [u for u in mine if u.scored_by is None and u.data_digest == data_digest]
    if free:
        return free[0]
    spent = sum(1 for u in mine if u.scored_by is not None)
    observed = "no recorded use" if not mine else f"{len(mine)} use(s), {spent} already scored"
    raise RefusedError(
        f"sealed split {split!r} scored without a recorded use",
        path=str(loaded.path),
        field=f"data[{split}].sealed",
        expected="a use recorded by `ftmanifest unseal` and not yet scored",
        observed=observed + f" in {store.root}",
        hint=f"ftmanifest unseal {loaded.path} --split {split} --reason 'why this evaluation'",
    )


def record_score(
    loaded: LoadedManifest,
    use: SealedUse,
    results_digest: str,
    *,
    ledger: Path | str | None = None,
) -> None:
    """Consume ``use``: one ``scored`` record naming it and the results."""
    store = _ledger(loaded, ledger)
    record = {
        "ftmanifest_version": ftmanifest.__version__,
        "status": "scored",
        "attempt": "u-" + use.use,
        "experiment": runrecord.experiment_of(loaded),
        "manifest": runrecord.manifest_ref(loaded.path, loaded.digest(), store.root),
        "sealed": {"split": use.split, "use": use.use, "results_digest": results_digest},
    }
    try:
        store.append(record)
    except OSError as exc:
        raise write_error(
            exc, store.root, "cannot record the scoring of the sealed split"
        ) from None
