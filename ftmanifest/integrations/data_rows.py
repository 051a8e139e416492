"""The rows a Trainer reads, against the pinned entries they were traced to.

Layer: edges - edge (integrations).  Called by ``data_trace.trace_dataset`` once a
``datasets.Dataset`` is traced to pinned entries: tracing proves where its
Arrow files came from, not that every pinned row is read.  ``.select``,
``.shuffle``, ``.filter`` and ``train_test_split`` leave the pinned Arrow files
as they are and add an indices mapping (``Dataset._indices``); a
``flatten_indices`` or a batched ``.map`` that drops rows writes fewer rows.

Rules (``drift.data-rows`` at ``data[i]``, the first entry traced):

* an indices mapping that is the identity (TRL's filters that keep every
  row) is no difference;
* one that is a permutation of every row passes only when it is the
  permutation ``shuffle(seed=seeds.data_order)`` draws
  (``np.random.default_rng(seed).permutation(n)``, as ``datasets`` does);
  another order is a row naming the seed;
* one that leaves rows out is a row: how many, and which operation its shape
  points at (a leading range: ``select(range(k))``; increasing with gaps:
  ``filter`` or ``select`` of a list; in another order: a shuffle, then a
  subset);
* without a mapping (``select`` of a contiguous range slices the table; a
  ``.map`` after a filter writes the kept rows), a row count other than the
  traced split's is a row.

The manifest has no field for a subset of an entry: pin the subset as its
own data entry.  Not seen: a shuffle followed by a ``.map`` (the map writes
every row, in the shuffled order, with no mapping left), and a ``.map`` that
rewrites the text in place (its columns are computed, and TRL's own maps
rewrite prompt/chosen/rejected the same way).
"""

from __future__ import annotations

from typing import Any

from ftmanifest.findings import Finding
from ftmanifest.manifest.model import Manifest

RULE = "drift.data-rows"


def judge_rows(
    dataset: Any, pinned: int, entries: list[int], manifest: Manifest, manifest_path: str, role: str
) -> tuple[list[Finding], dict[str, Any]]:
    """Rows refusing ``dataset`` when it reads other rows than the ``pinned`` traced ones,
    and the run record's part (``entries``: the traced entries' indices)."""
    table_rows = int(dataset.data.num_rows)
    indices = getattr(dataset, "_indices", None)
    record: dict[str, Any] = {"rows": int(dataset.num_rows), "pinned_rows": pinned}
    entry = manifest.data[entries[0]] if entries else None
    label = f"data[{entries[0]}] {entry.name!r} ({entry.path})" if entry is not None else "data"
    loc: tuple[str | int, ...] = ("data", entries[0]) if entries else ("data",)

    def row(message: str, observed: str, expected: str, hint: str) -> Finding:
        return Finding.at(
            loc, kind="drift", rule=RULE, message=f"the {role} dataset {message}",
            path=manifest_path, expected=expected, observed=observed, hint=hint,
        )  # fmt: skip

    subset_hint = (
        f"train on the pinned rows unchanged (load_pinned_dataset({manifest_path!r}, "
        f"{entry.name if entry else 'NAME'!r}), .map for tokenising only), or write the subset "
        f"to a file, pin it as its own data entry and run ftmanifest lock {manifest_path}"
    )
    if indices is None:
        record["selection"] = "none"
        if table_rows == pinned:
            return [], record
        return [
            row(
                f"holds {table_rows} rows and the pinned entries it was traced to hold {pinned}",
                f"{table_rows} rows (no indices mapping: a select of a contiguous range, "
                "a .map after a filter or select, flatten_indices, or a batched .map that "
                "drops or adds rows)",
                f"the {pinned} rows of {label}",
                subset_hint,
            )
        ], record
    chosen = [int(i) for i in indices.column(0).to_pylist()]
    kind = _shape(chosen, table_rows)
    record["selection"] = kind
    if kind == "identity" and table_rows == pinned:
        return [], record
    if kind == "permutation" and table_rows == pinned:
        seed = manifest.seeds.data_order
        if seed is not None and chosen == _permutation(seed, table_rows):
            record["selection"] = "shuffle(seed=seeds.data_order)"
            return [], record
        pinned_seed = "no seed pinned" if seed is None else f"seeds.data_order={seed}"
        return [
            row(
                "is shuffled in another order than the manifest's data order",
                f"a permutation of all {table_rows} rows (an indices mapping: .shuffle with "
                "another seed or generator, or .select of a reordered list)",
                f"the rows of {label} in their pinned order, or shuffle(seed={seed}) "
                f"({pinned_seed})",
                f"drop the .shuffle and let the Trainer shuffle (its sampler's seed is "
                f"checked against seeds.data_order), or shuffle(seed={seed})"
                if seed is not None
                else "pin seeds.data_order and shuffle with it, or drop the .shuffle",
            )
        ], record
    return [
        row(
            f"reads {len(chosen)} of the {pinned} rows of the pinned entries it was traced to",
            f"{len(chosen)} of {table_rows} rows ({_operation(kind)})",
            f"all {pinned} rows of {label}",
            subset_hint,
        )
    ], record


def _shape(chosen: list[int], n: int) -> str:
    if chosen == list(range(n)):
        return "identity"
    if len(chosen) == n and sorted(chosen) == list(range(n)):
        return "permutation"
    if chosen == list(range(len(chosen))):
        return "leading"
    if all(a < b for a, b in zip(chosen, chosen[1:], strict=False)):
        return "increasing"
    return "reordered subset"


def _operation(kind: str) -> str:
    return {
        "leading": "an indices mapping of the first rows: select(range(k)), or take(k)",
        "increasing": "an indices mapping that keeps rows in order with gaps: .filter, "
        ".select of a list, or a trainer's own filter: TRL drops the examples its "
        "max_length truncates away",
        "reordered subset": "an indices mapping of a subset in another order: a shuffle then "
        "a select, or train_test_split",
        "identity": "every row once, from more rows than the pinned entries hold",
    }.get(kind, kind)


def _permutation(seed: int, n: int) -> list[int]:
    import numpy as np

    return [int(i) for i in np.random.default_rng(seed).permutation(n)]
