"""Split leakage: exact and near duplicates between train, eval and test, and within train.

Layer: data (edge: reads the splits through ``recordio.iter_records``; the
verdict is ``judge``, pure).  Issue 17.

Memory stays bounded by what is kept per record: a 16-byte hash of the
normalised text (exact duplicates) and the MinHash LSH band keys
(``rensa.RMinHashLSH``, 128 permutations over 3-word shingles); never the
texts.  LSH candidates are verified by the exact Jaccard similarity of their
shingle sets in a second pass that re-reads only the records involved, and
keeps a short excerpt of each for the report.

Splits are compared pairwise by role (train/eval/test; ``baseline-eval`` counts
as eval) and each train split with itself.  A record that exactly repeats an
earlier record of the same split is not indexed again, so a thousand copies
cost one index entry, and each record keeps at most ``MAX_CANDIDATES`` LSH
candidates per other split.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ftmanifest.data.text import jaccard, normalise, record_text, shingles
from ftmanifest.recordio import iter_records

NUM_PERM = 128
SEED = 42
BANDS = (8, 16, 32, 64)
MIN_CANDIDATE_P = 0.9
MAX_CANDIDATES = 50
EXCERPT = 400
ROLE_ORDER = {"test": 0, "eval": 1, "baseline-eval": 1, "train": 2}
Kind = Literal["exact", "near"]


@dataclass(frozen=True)
class Split:
    """One data entry to check: its manifest name and role, where it is, how it reads."""

    name: str
    role: str
    path: Path
    format: str | None = None
    sealed: bool = False
    fields: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return "eval" if self.role == "baseline-eval" else self.role


@dataclass(frozen=True)
class Ref:
    """One record of one split: its number and the line it starts on."""

    split: str
    record: int
    line: int


@dataclass(frozen=True)
class Match:
    """Two records found to be duplicates; ``similarity`` is 1.0 for an exact one."""

    kind: Kind
    a: Ref
    b: Ref
    similarity: float


@dataclass
class PairResult:
    """What one split pair (``a`` == ``b``: within one split) holds."""

    a: str
    b: str
    exact: int = 0
    near: int = 0
    refused: bool = False  # set by ``judge``
    examples: list[Match] = field(default_factory=list)


@dataclass
class LeakageReport:
    threshold: float
    records: dict[str, int]
    pairs: list[PairResult]
    leaking: dict[str, set[int]]  # train split -> its records duplicated in eval or test
    excerpts: dict[tuple[str, int], str]  # (split, record) -> original text, cut short

    @property
    def ok(self) -> bool:
        return not any(p.refused for p in self.pairs)


def pairs_of(splits: Sequence[Split]) -> list[tuple[Split, Split]]:
    """(earlier, later) in reading order: test, eval, train; each train split with itself."""
    order = sorted(splits, key=lambda s: ROLE_ORDER[s.role])
    out = []
    for j, later in enumerate(order):
        for earlier in order[:j]:
            if earlier.kind != later.kind:
                out.append((earlier, later))
        if later.kind == "train":
            out.append((later, later))
    return out


def judge(report: LeakageReport, splits: Sequence[Split]) -> LeakageReport:
    """Mark the pairs the default tolerance refuses: any exact duplicate between
    train and test; any duplicate (exact or near) of a sealed split in another split."""
    by_name = {s.name: s for s in splits}
    for p in report.pairs:
        a, b = by_name[p.a], by_name[p.b]
        train_test = {a.kind, b.kind} == {"train", "test"} and p.exact > 0
        sealed = a is not b and (a.sealed or b.sealed) and p.exact + p.near > 0
        p.refused = train_test or sealed
    return report


def bands_for(threshold: float) -> int:
    """LSH bands tuned for recall: the fewest (of 128 permutations) that make a pair
    at ``threshold`` a candidate with probability >= 0.9.  Every candidate is
    verified by exact Jaccard, so a false one costs only that check.  At 0.8: 16
    bands of 8 rows, P(candidate) 0.95 at J = 0.8, 0.9999 at 0.9, 0.06 at 0.5."""
    for bands in BANDS:
        rows = NUM_PERM // bands
        if 1 - (1 - threshold**rows) ** bands >= MIN_CANDIDATE_P:
            return bands
    return BANDS[-1]


def _minhash(items: Iterable[str]) -> Any:
    from rensa import RMinHash

    m = RMinHash(num_perm=NUM_PERM, seed=SEED)
    m.update(list(items))
    return m


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def check_leakage(
    splits: Sequence[Split], *, threshold: float = 0.8, examples: int = 5
) -> LeakageReport:
    """Read every split once to find candidates, then the candidates' records again."""
    from rensa import RMinHashLSH

    bands = bands_for(threshold)
    pairs = pairs_of(splits)
    partners: dict[str, list[str]] = defaultdict(list)  # later -> earlier splits it is compared to
    indexed = set()
    for earlier, later in pairs:
        partners[later.name].append(earlier.name)
        indexed.add(earlier.name)
    order = sorted(splits, key=lambda s: ROLE_ORDER[s.role])
    exact: dict[str, dict[bytes, tuple[int, int]]] = {}
    lsh: dict[str, Any] = {}
    results = {(a.name, b.name): PairResult(a.name, b.name) for a, b in pairs}
    exact_matches: dict[tuple[str, str], list[Match]] = defaultdict(list)
    candidates: set[tuple[str, int, str, int]] = set()
    leaking: dict[str, set[int]] = {s.name: set() for s in splits if s.kind == "train"}
    counts: dict[str, int] = {}
    for split in order:
        seen: dict[bytes, tuple[int, int]] = {}
        index = RMinHashLSH(threshold=threshold, num_perm=NUM_PERM, num_bands=bands)
        n = 0
        for rec in iter_records(split.path, split.format):
            n += 1
            text = normalise(record_text(rec.value, split.fields))
            if not text:
                continue
            h = _digest(text)
            repeat = h in seen
            near_to = []  # splits this record is not an exact duplicate of
            for other in partners[split.name]:
                hit = seen.get(h) if other == split.name else exact[other].get(h)
                if hit is None:
                    near_to.append(other)
                    continue
                pair = results[(other, split.name)]
                pair.exact += 1
                if split.kind == "train" and other != split.name:
                    leaking[split.name].add(rec.number)
                if len(exact_matches[(other, split.name)]) < examples:
                    a, b = Ref(other, hit[0], hit[1]), Ref(split.name, rec.number, rec.line)
                    exact_matches[(other, split.name)].append(Match("exact", a, b, 1.0))
            if not repeat:
                seen[h] = (rec.number, rec.line)
            store = split.name in indexed and not repeat  # a repeat's first copy stands for it
            if not near_to and not store:
                continue
            m = _minhash(shingles(text))
            for other in near_to:
                found = (index if other == split.name else lsh[other]).query(m)
                for key in sorted(found)[:MAX_CANDIDATES]:
                    candidates.add((other, key, split.name, rec.number))
            if store:
                index.insert(rec.number, m)
        counts[split.name] = n
        exact[split.name] = seen
        if split.name in indexed:
            lsh[split.name] = index
    near, excerpts = _verify(splits, candidates, exact_matches, threshold)
    by_name = {s.name: s for s in splits}
    for match in near:
        results[(match.a.split, match.b.split)].near += 1
        if by_name[match.b.split].kind == "train" and match.a.split != match.b.split:
            leaking[match.b.split].add(match.b.record)
    for key, pair in results.items():
        found = exact_matches[key] + [m for m in near if (m.a.split, m.b.split) == key]
        found.sort(key=lambda m: (-m.similarity, m.kind != "exact", m.b.record))
        pair.examples = found[:examples]
    report = LeakageReport(threshold, counts, list(results.values()), leaking, excerpts)
    return judge(report, splits)


def _verify(
    splits: Sequence[Split],
    candidates: set[tuple[str, int, str, int]],
    exact_matches: dict[tuple[str, str], list[Match]],
    threshold: float,
) -> tuple[list[Match], dict[tuple[str, int], str]]:
    """Second pass: shingle sets of the candidates' records, exact Jaccard, excerpts."""
    wanted: dict[str, set[int]] = defaultdict(set)
    for a, ra, b, rb in candidates:
        wanted[a].add(ra)
        wanted[b].add(rb)
    for matches in exact_matches.values():
        for m in matches:
            wanted[m.a.split].add(m.a.record)
            wanted[m.b.split].add(m.b.record)
    sets: dict[tuple[str, int], frozenset[str]] = {}
    lines: dict[tuple[str, int], int] = {}
    excerpts: dict[tuple[str, int], str] = {}
    for split in splits:
        need = wanted.get(split.name)
        if not need:
            continue
        for rec in iter_records(split.path, split.format):
            if rec.number in need:
                raw = record_text(rec.value, split.fields)
                sets[(split.name, rec.number)] = frozenset(shingles(normalise(raw)))
                lines[(split.name, rec.number)] = rec.line
                excerpts[(split.name, rec.number)] = raw[:EXCERPT]
    near = []
    for a, ra, b, rb in sorted(candidates):
        similarity = jaccard(sets[(a, ra)], sets[(b, rb)])
        if similarity >= threshold:
            ref_a, ref_b = Ref(a, ra, lines[(a, ra)]), Ref(b, rb, lines[(b, rb)])
            near.append(Match("near", ref_a, ref_b, similarity))
    return near, excerpts
