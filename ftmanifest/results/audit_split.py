"""``audit``'s check of the splits the guards are measured on, from their records.

Layer: judging rooms - results (edge: reads the splits' records with ``recordio``).  A
comparison is only as good as the split it was scored on, and the results
files say what the split held when they were written.  So audit reads every
eval or test split again (their digests are verify's, the ``drift`` check)
and judges it directly: two records with one id (``score`` would refuse it;
a results file written before that would not say so) are
``audit.split-duplicate-ids``; a ``per_category`` guard naming a category
that no record of a split it is measured on has is
``audit.guard-unknown-category`` (it would pass with nothing to judge).  A
split that cannot be read is ``audit.split-unreadable``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ftmanifest.errors import FtManifestError
from ftmanifest.findings import Finding
from ftmanifest.manifest.experiment import PerCategoryGuard
from ftmanifest.results.score import NO_CATEGORY
from ftmanifest.results.split_match import DuplicateSplitIdError, index_split, split_records

if TYPE_CHECKING:
    from ftmanifest.manifest import LoadedManifest
    from ftmanifest.manifest.model import Manifest

EVAL_ROLES = ("eval", "test", "baseline-eval")
SHOWN = 20  # the split's categories named in one row


def split_findings(loaded: LoadedManifest) -> list[Finding]:
    """Rows for every eval or test split of ``loaded`` (see the module docstring)."""
    m = loaded.manifest
    task = m.experiment.task or "unset"
    out: list[Finding] = []
    for i, entry in enumerate(m.data):
        if entry.role not in EVAL_ROLES:
            continue
        path = str(loaded.path.parent / entry.path)
        try:
            records = split_records(loaded, entry.name)
            index = index_split(records, task, entry.name, target=m.data_checks.target,
                                label=m.data_checks.label)  # fmt: skip
        except DuplicateSplitIdError as exc:
            out.append(Finding.at(("data", i, "path"), kind="audit",
                                  rule="audit.split-duplicate-ids", message=exc.message,
                                  path=exc.path or path, line=exc.line, expected=exc.expected,
                                  observed=exc.observed, hint=exc.hint))  # fmt: skip
            continue
        except FtManifestError as exc:
            out.append(Finding.at(("data", i, "path"), kind="audit",
                                  rule="audit.split-unreadable",
                                  message=f"split {entry.name!r} cannot be read: {exc.message}",
                                  path=exc.path or path, line=exc.line, expected=exc.expected,
                                  observed=exc.observed, hint=exc.hint or "fix the split's "
                                  "file, lock the manifest, then audit again"))  # fmt: skip
            continue
        have = sorted({e.category or NO_CATEGORY for e in index.values()})
        out += _unknown(m, i, entry.name, have, path)
    return out


def _unknown(m: Manifest, i: int, split: str, have: list[str], path: str) -> list[Finding]:
    shown = ", ".join(repr(c) for c in have[:SHOWN])
    shown += f" and {len(have) - SHOWN} more" if len(have) > SHOWN else ""
    out = []
    for n, guard in enumerate(m.experiment.guards):
        if not isinstance(guard, PerCategoryGuard) or guard.categories == "all":
            continue
        if guard.split not in (None, split):
            continue
        for cat in guard.categories:
            if cat in have:
                continue
            out.append(Finding.at(("experiment", "guards", n, "categories"), kind="audit",
                                  rule="audit.guard-unknown-category",
                                  message=f"guard {n} names category {cat!r}, which no record "
                                  f"of split {split!r} has: it would pass with nothing to judge",
                                  path=path, expected=f"one of the categories of split "
                                  f"{split!r} (data[{i}]): {shown or 'none'}", observed=cat,
                                  hint="correct the category's name in the guard (a typo, or "
                                  "renamed in the data), then lock and sign the manifest, "
                                  "compare again and audit", extra={"category": cat,
                                  "split": split, "split_categories": have}))  # fmt: skip
    return out
