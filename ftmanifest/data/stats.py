"""Per-split statistics of text records: categories, lengths, records over ``seq_len``.

Layer: judging rooms - data (edge: streams each split once through
``recordio.iter_records``; the verdicts are ``categories.category_findings`` and
``length_findings``, pure).

Memory is bounded whatever the split's size: no text is kept, only counts
per category (at most ``MAX_CATEGORIES`` distinct ones; the rest are counted
together), two length ``Histogram``s and the ``WORST`` longest records' lines.

A record's category is the value of ``data_checks.label`` (default: the
``label`` key, else ``category``).  A string is the category itself; any other
JSON value (a number, a list...) is counted under its JSON text, so ``1`` and
``"1"`` are one category; a record without one (a missing key, ``null``, a
text line) is unlabelled.  Characters are counted over the record's text
(``data_checks.text_fields``); tokens with the pinned tokenizer, formatted as
preflight formats a training example (``preflight.recipe.default_format``:
the chat template applied when there is one), without truncation.

Severities: records over ``training.seq_len`` tokens are a warning naming the
count and the longest records' lines (they are cut, and a cut can drop the
target); when the tokenizer is not available offline, over-length records
cannot be judged and that is a warning saying why.
"""

from __future__ import annotations

import heapq
import json
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ftmanifest.data.categories import OTHER
from ftmanifest.data.shards import shard_path
from ftmanifest.data.text import record_text
from ftmanifest.data.tokens import TRANSFORMERS_MISSING, count_tokens
from ftmanifest.data.tokens import load_tokenizer as load_tokenizer  # data sample's import
from ftmanifest.extras import install_line
from ftmanifest.findings import Finding
from ftmanifest.recordio import iter_records

MAX_CATEGORIES = 10_000
MAX_LABEL = 200  # characters of a non-string label's JSON text
WORST = 5
_EXACT = 1024


def _coarse(value: int) -> int:
    """The bucket of a value of ``_EXACT`` or more: its ten leading bits."""
    shift = value.bit_length() - 10
    return (value >> shift) << shift


class Histogram:
    """Counts of non-negative integers: exact below 1024, above it to within 0.2 %
    (ten significant bits), so a billion lengths take a few thousand buckets."""

    def __init__(self) -> None:
        self.buckets: Counter[int] = Counter()
        self.count = 0
        self.min: int | None = None
        self.max: int | None = None

    def add(self, value: int) -> None:
        self.buckets[value if value < _EXACT else _coarse(value)] += 1
        self.count += 1
        self.min = value if self.min is None else min(self.min, value)
        self.max = value if self.max is None else max(self.max, value)

    def add_all(self, values: list[int]) -> None:
        """``add`` each of ``values``, in order."""
        if not values:
            return
        self.buckets.update([v if v < _EXACT else _coarse(v) for v in values])
        self.count += len(values)
        low, high = min(values), max(values)
        self.min = low if self.min is None else min(self.min, low)
        self.max = high if self.max is None else max(self.max, high)

    def percentile(self, q: float) -> int | None:
        """The smallest bucket with at least ``q`` of the values at or below it."""
        if not self.count:
            return None
        need, seen = q * self.count, 0
        for value in sorted(self.buckets):
            seen += self.buckets[value]
            if seen >= need:
                return value
        return self.max

    def summary(self) -> dict[str, int | None]:
        return {
            "min": self.min,
            "p50": self.percentile(0.5),
            "p90": self.percentile(0.9),
            "p99": self.percentile(0.99),
            "max": self.max,
        }


@dataclass
class SplitStats:
    """What one text split holds, without any of its text."""

    name: str
    role: str
    path: str
    records: int = 0
    unlabelled: int = 0
    categories: Counter[str] = field(default_factory=Counter)
    chars: Histogram = field(default_factory=Histogram)
    tokens: Histogram | None = None  # None: no tokenizer
    untokenized: int = 0  # records the tokenizer failed on
    over: int = 0  # records over seq_len tokens
    # (tokens, line, shard) of the longest records, longest first ("" for one file)
    worst: list[tuple[int, int, str]] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return "eval" if self.role == "baseline-eval" else self.role


def label_of(value: Any, key: str | None = None) -> str | None:
    """A record's category as text (see the module docstring), or None."""
    if not isinstance(value, dict):
        return None
    if key is None:
        key = "label" if "label" in value else "category"
    label = value.get(key)
    if label is None:
        return None
    if isinstance(label, str):
        return label
    try:
        text = json.dumps(label, sort_keys=True, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):  # recordio never yields these; a caller may
        text = repr(type(label).__name__)
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 3] + "..."


def collect(
    split: Any,
    *,
    label: str | None = None,
    tokenizer: Any = None,
    seq_len: int | None = None,
) -> SplitStats:
    """One pass over ``split`` (a ``leak_report.Split``)."""
    stats = SplitStats(split.name, split.role, str(split.path))
    if tokenizer is not None:
        stats.tokens = Histogram()
    heap: list[tuple[int, int, int, str]] = []  # (tokens, -record, line, shard): a min-heap
    for shard, rec in split_records(split):
        stats.records += 1
        category = label_of(rec.value, label)
        if category is None:
            stats.unlabelled += 1
        elif category in stats.categories or len(stats.categories) < MAX_CATEGORIES:
            stats.categories[category] += 1
        else:
            stats.categories[OTHER] += 1
        stats.chars.add(len(record_text(rec.value, split.fields)))
        if stats.tokens is None:
            continue
        try:
            n = count_tokens(rec.value, tokenizer, split.fields)
        except Exception:  # the tokenizer refused this record's text
            stats.untokenized += 1
            continue
        stats.tokens.add(n)
        if seq_len is not None and n > seq_len:
            stats.over += 1
            item = (n, -stats.records, rec.line, shard)
            if len(heap) < WORST:
                heapq.heappush(heap, item)
            else:
                heapq.heappushpop(heap, item)
    stats.worst = [(n, line, shard) for n, _r, line, shard in sorted(heap, reverse=True)]
    return stats


Part = tuple[int, int, Counter[str], Histogram]
"""What ``tally`` sums over some records: records, unlabelled, each category's count
(in the order each first appears) and the characters' ``Histogram``."""


def tally(
    values: list[Any],
    fields: tuple[str, ...],
    label: str | None = None,
    lengths: list[int] | None = None,
) -> Part:
    """``collect``'s counts (without tokens) over ``values``, in order; ``merge`` adds
    them to a ``SplitStats`` as ``collect`` would have counted them one by one.
    ``lengths``: each value's ``len(record_text(value, fields))``, when the caller has
    them."""
    categories: Counter[str] = Counter()
    unlabelled = 0
    for category in [label_of(value, label) for value in values]:
        if category is None:
            unlabelled += 1
        else:
            categories[category] += 1
    if lengths is None:
        lengths = [len(record_text(value, fields)) for value in values]
    chars = Histogram()
    chars.add_all(lengths)
    return len(values), unlabelled, categories, chars


def merge(stats: SplitStats, part: Part) -> None:
    """Add the next records' ``tally`` to ``stats``: the same counts, categories past
    ``MAX_CATEGORIES`` under ``OTHER``, as ``collect`` finds over the same records (a
    category is kept or not when it first appears, and ``part`` lists them in that
    order)."""
    records, unlabelled, categories, chars = part
    stats.records += records
    stats.unlabelled += unlabelled
    for category, n in categories.items():
        if category in stats.categories or len(stats.categories) < MAX_CATEGORIES:
            stats.categories[category] += n
        else:
            stats.categories[OTHER] += n
    h = stats.chars
    for value, n in chars.buckets.items():
        h.buckets[value] += n
    h.count += chars.count
    if chars.min is not None:
        h.min = chars.min if h.min is None else min(h.min, chars.min)
    if chars.max is not None:
        h.max = chars.max if h.max is None else max(h.max, chars.max)


class Collector:
    """``collect`` (without tokens) done by the leakage check's first pass, which parses
    every record anyway: ``tally`` runs in its workers, ``add`` here."""

    def __init__(self, label: str | None = None) -> None:
        self.label = label
        self.stats: dict[str, SplitStats] = {}

    def tally(
        self, values: list[Any], fields: tuple[str, ...], lengths: list[int] | None = None
    ) -> Part:
        return tally(values, fields, self.label, lengths)

    def start(self, split: Any) -> None:
        self.stats[split.name] = SplitStats(split.name, split.role, str(split.path))

    def add(self, name: str, part: Part) -> None:
        merge(self.stats[name], part)


def split_records(split: Any) -> Iterator[tuple[str, Any]]:
    """(shard, record) of every record of ``split``, in order: one file's records with
    shard "", a folder's shard by shard (``split.shards``)."""
    if not split.shards:
        for rec in iter_records(split.path, split.format):
            yield "", rec
        return
    for name in split.shards:
        for rec in iter_records(shard_path(split.path, name), split.format):
            yield name, rec


def length_findings(
    stats: Sequence[SplitStats], seq_len: int | None, why_no_tokens: str
) -> list[Finding]:
    """Over-length records per split (warning), or why they could not be judged
    (one warning for all splits)."""
    out = []
    unjudged = [s.name for s in stats if s.tokens is None and s.records]
    if seq_len is not None and unjudged:
        out.append(
            Finding(
                kind="data",
                rule="data.length-unjudged",
                severity="warning",
                message=f"{', '.join(unjudged)}: records over seq_len {seq_len} cannot be judged "
                f"without the tokenizer: {why_no_tokens}",
                expected="the pinned tokenizer, offline",
                observed="not available",
                hint=_length_fix(why_no_tokens),
            )
        )
    for s in stats:
        out += _split_lengths(s, seq_len)
    return out


def _length_fix(why_no_tokens: str) -> str:
    """The fix for a tokenizer that could not load: install transformers, or
    bring the pinned model."""
    if why_no_tokens.startswith(TRANSFORMERS_MISSING):
        return install_line("transformers") or "pip install transformers"
    return (
        "put the pinned model where the manifest points (model.path or the hub cache), then rerun"
    )


def _split_lengths(stats: SplitStats, seq_len: int | None) -> list[Finding]:
    out = []
    if stats.over:
        longest = ", ".join(
            f"{shard + ' ' if shard else ''}line {line} ({n} tokens)"
            for n, line, shard in stats.worst
        )
        out.append(
            Finding(
                kind="data",
                rule="data.over-length",
                severity="warning",
                path=os.path.join(stats.path, *stats.worst[0][2].split("/"))
                if stats.worst and stats.worst[0][2]
                else stats.path,
                line=stats.worst[0][1] if stats.worst else None,
                message=f"{stats.name}: {stats.over} of {stats.records} records are over "
                f"seq_len {seq_len} tokens and will be cut; longest: {longest}",
                expected=f"<= {seq_len} tokens",
                observed=f"{stats.over} records longer",
                hint="shorten or drop them, or raise training.seq_len (and re-run estimate)",
            )
        )
    if stats.untokenized:
        out.append(
            Finding(
                kind="data",
                rule="data.untokenized",
                severity="warning",
                path=stats.path,
                message=f"{stats.name}: the tokenizer failed on {stats.untokenized} records",
                expected="every record tokenized",
                observed=f"{stats.untokenized} failed",
                hint="look at those records' text fields (data_checks.text_fields)",
            )
        )
    return out
