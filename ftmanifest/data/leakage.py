"""Split leakage: exact and near duplicates between train, eval and test, and within each.

Layer: judging rooms - data (edge: reads the splits through ``recordio.iter_records``;
the verdict is ``judge``, pure).

Memory stays bounded by what is kept per record: a 16-byte hash of the
normalised text (exact duplicates) and the MinHash LSH band keys
(``rensa.RMinHashLSH``, 128 permutations over 3-word shingles); never the
texts.  LSH candidates are verified by the exact Jaccard similarity of their
shingle sets in a second pass that re-reads only the records involved, and
keeps a short excerpt of each for the report.  The bands are chosen so that a
pair at the threshold is a candidate with probability ``MIN_RECALL`` (0.99) or
more: ``recall_at`` (1 - (1 - s**rows)**bands; 0.9977 at 0.8).

Splits are compared pairwise by role (train/eval/test; ``baseline-eval`` counts
as eval) and each split with itself.  The per-record work (parsing, normalising,
shingling, MinHash) runs on ``jobs`` processes (``ftmanifest.data.parallel``);
the index and the verdict stay here, so the result does not depend on ``jobs``.
The report and ``judge``, which applies the manifest's ``data_checks.tolerance``, are
``leak_report``'s.

A record that exactly repeats an earlier record of the same split is not
indexed again, so a thousand copies cost one index entry.  Every LSH candidate
of a record is verified (a cap per record kept the lowest
record numbers and hid a copy behind templated records); only the number of
candidate pairs per split pair is bounded (``MAX_PAIRS``), and a pair whose
search stopped there is reported as a floor.
"""

from __future__ import annotations

import functools
from array import array
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ftmanifest.counts import format_of
from ftmanifest.data import contain
from ftmanifest.data.chunks import LINE_KINDS, selected_texts
from ftmanifest.data.leak_report import (
    ROLE_ORDER,
    LeakageReport,
    Match,
    PairResult,
    Ref,
    Split,
    judge,
    pairs_of,
)
from ftmanifest.data.parallel import Workers
from ftmanifest.data.shards import Marks, shard_path
from ftmanifest.data.stats import Collector
from ftmanifest.data.text import NUM_PERM, normalise, shingle_list
from ftmanifest.errors import FtManifestError, InputError
from ftmanifest.manifest.data import LeakTolerance
from ftmanifest.progress import ProgressSink

MIN_RECALL = 0.99  # P(a pair at the threshold is an LSH candidate), at least
MAX_PAIRS = 200_000  # candidate pairs kept per split pair; past it that pair's search stops
EXCERPT = 400


def lsh_shape(threshold: float) -> tuple[int, int]:
    """(bands, rows) of the ``NUM_PERM`` permutations: the most rows per band (fewest
    false candidates) that still make a pair at ``threshold`` a candidate with
    probability ``MIN_RECALL``; one row per band where none does (the best recall
    there is).  Every candidate is verified by exact Jaccard, so a false one costs only
    that check.  At 0.8: 20 bands of 6 rows, recall 0.9977 at J = 0.8, 0.99998 at
    0.9, P(candidate) 0.27 at 0.5 and 0.015 at 0.3."""
    for rows in sorted((r for r in range(1, NUM_PERM + 1) if NUM_PERM % r == 0), reverse=True):
        if _recall(threshold, NUM_PERM // rows, rows) >= MIN_RECALL:
            return NUM_PERM // rows, rows
    return NUM_PERM, 1


def _recall(similarity: float, bands: int, rows: int) -> float:
    return float(1 - (1 - similarity**rows) ** bands)


def recall_at(threshold: float) -> float:
    """P(a pair at Jaccard ``threshold`` becomes an LSH candidate): 1 - (1 - s**r)**b."""
    return _recall(threshold, *lsh_shape(threshold))


def check_leakage(
    splits: Sequence[Split],
    *,
    threshold: float = 0.8,
    examples: int = 5,
    tolerance: LeakTolerance | None = None,
    jobs: int = 1,
    signer: Any = None,
    progress: ProgressSink | None = None,
    collector: Collector | None = None,
) -> LeakageReport:
    """Read every split once to find candidates, then the candidates' records again.

    ``jobs`` processes sign the records (1: this one); the report is the same for any.
    ``signer``: what yields each split's signatures in file order instead
    (``ranks.RankSigner``: the ranks of a torchrun job).  ``progress`` counts
    the records of the first read (``parallel.Workers``).  ``collector``: the
    per-split statistics (``stats.Collector``), counted by the same read when every
    split is JSONL or text lines read here (left empty otherwise)."""
    from rensa import RMinHashLSH

    bands, _rows = lsh_shape(threshold)
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
    matched: dict[tuple[str, str], set[int]] = defaultdict(set)  # pair -> later records found
    candidates: set[tuple[str, int, str, int]] = set()
    kept: dict[tuple[str, str], int] = defaultdict(int)  # candidate pairs per split pair
    stopped: set[tuple[str, str]] = set()  # split pairs whose near search hit MAX_PAIRS
    leaking: dict[str, set[int]] = {s.name: set() for s in splits if s.kind == "train"}
    counts: dict[str, int] = {}
    without: dict[str, int] = {}
    marks = {s.name: Marks() for s in splits}  # a folder's shards, by first record
    deferred: FtManifestError | None = None
    hits: list[contain.Hit] = []
    together = signer is None and _lines_only(splits)
    if not together:
        try:
            hits = _search_contained(splits, pairs, jobs if signer is None else 1)
        except FtManifestError as exc:  # the first pass reads the same records: its error
            deferred = exc  # names them (under torchrun, on the rank that read them)
    items = contain.Builder()
    holders = {a.name for a, b in pairs if a.kind != b.kind}  # splits whose items are searched
    for split in order:
        search = None
        if together:  # this pass also searches the record for items and collects its own
            sources = [s.name for s in order if s.name in partners[split.name]
                       and s.kind != split.kind]  # fmt: skip
            search = items.index(sources) if sources else None
            if search is not None and not (search.anchors or search.inputs):
                search = None
            contain.prepare(search, split.fields, split.name in holders)
        hosts: dict[tuple[contain.How, int], list[tuple[int, int]]] = defaultdict(list)

        def sink(
            number: int, line: int, extra: Any, name: str = split.name, hosts: Any = hosts
        ) -> None:
            hosted, item = extra
            for key in hosted:
                hosts[key].append((number, line))
            if item is not None:
                items.add(name, number, line, item)

        look = together and (search is not None or split.name in holders)
        count = collector if together else None
        if count is not None:
            count.start(split)
        workers = Workers(
            jobs if signer is None else 1,
            progress,
            contain.examine if look else None,
            sink,
            None if count is None else count.tally,
            None if count is None else functools.partial(count.add, split.name),
        )
        with workers:
            source = workers if signer is None else signer
            seen: dict[bytes, tuple[int, int]] = {}
            index = RMinHashLSH(threshold=threshold, num_perm=NUM_PERM, num_bands=bands)
            n = empty = 0
            own = marks[split.name]
            read = source.signatures(split.path, split.format, split.fields, split.shards, own)
            name, store = split.name, split.name in indexed
            leaks = leaking[name] if split.kind == "train" else None
            checks = [  # (other split, its exact hashes, the pair, its LSH index)
                (other, seen if other == name else exact[other], (other, name),
                 index if other == name else lsh[other])
                for other in partners[name]
            ]  # fmt: skip
            for number, line, h, m in read:
                n += 1
                if h is None:  # no text
                    empty += 1
                    continue
                repeat = h in seen
                near_to = []  # splits this record is not an exact duplicate of
                for check in checks:
                    other, table, key, _near = check
                    hit = table.get(h)
                    if hit is None:
                        near_to.append(check)
                        continue
                    results[key].exact += 1
                    matched[key].add(number)
                    if leaks is not None and other != name:
                        leaks.add(number)
                    if len(exact_matches[key]) < examples:
                        a = Ref(other, hit[0], hit[1], marks[other].shard_of(hit[0]))
                        b = Ref(name, number, line, own.shard_of(number))
                        exact_matches[key].append(Match("exact", a, b, 1.0))
                if not repeat:
                    seen[h] = (number, line)
                for other, _table, key, near in near_to:
                    if key in stopped:
                        continue
                    found = near.query(m)
                    if not found:
                        continue
                    if kept[key] + len(found) > MAX_PAIRS:
                        stopped.add(key)  # templated data: bounded, and reported as a floor
                        continue
                    kept[key] += len(found)
                    candidates.update((other, k, name, number) for k in found)
                if store and not repeat:  # a repeat's first copy stands in
                    index.insert(number, m)
            if n and empty == n:
                raise _no_text(split, n)
            counts[split.name] = n
            without[split.name] = empty
            exact[split.name] = seen
            if split.name in indexed:
                lsh[split.name] = index
        if search is not None:
            hits += contain.hits_of(search, split.name, hosts)
    if deferred is not None:
        raise deferred
    del exact, lsh  # the indexes: not needed past here
    near, best = _verify(splits, candidates, threshold, examples, leaking, marks, matched)
    del candidates
    kinds = {s.name: s.kind for s in splits}
    inside = _contained(hits, kinds, matched, leaking, marks)
    for key, pair in results.items():
        pair.near = near.get(key, 0) + len(inside.get(key, []))
        pair.complete = key not in stopped
        found = exact_matches[key] + best.get(key, []) + inside.get(key, [])
        pair.examples = sorted(found, key=_rank)[:examples]
    excerpts = _excerpts(splits, [m for p in results.values() for m in p.examples], marks)
    report = LeakageReport(threshold, counts, list(results.values()), leaking, excerpts)
    report.without_text = without
    report.recall = recall_at(threshold)
    report.max_pairs = MAX_PAIRS
    return judge(report, splits, tolerance)


def _lines_only(splits: Sequence[Split]) -> bool:
    """Whether every split is JSONL or text lines read with the same text fields: then the
    first pass also does the contained-copy search (``contain.examine``)."""
    if len({s.fields for s in splits}) > 1:
        return False
    for s in splits:
        files = [shard_path(s.path, name) for name in s.shards] or [s.path]
        if any(format_of(f, s.format) not in LINE_KINDS for f in files):
            return False
    return True


def _search_contained(
    splits: Sequence[Split], pairs: Sequence[tuple[Split, Split]], jobs: int
) -> list[contain.Hit]:
    """The items of each test and eval split found inside, or as the input of, a record
    of a later split of another role (``data.contain``).  Run before the first pass
    builds its indexes, so the searchers fork from a small process."""
    order = sorted(splits, key=lambda s: ROLE_ORDER[s.role])
    keys = {(a.name, b.name) for a, b in pairs}
    out: list[contain.Hit] = []
    for later in order:
        earlier = [s for s in order if (s.name, later.name) in keys and s.kind != later.kind]
        if not earlier:
            continue
        fields = later.fields
        items = [(s.name, contain.iter_values(s.path, s.format, s.shards)) for s in earlier]
        index = contain.build_index(items, fields)
        if index.anchors or index.inputs:
            out += contain.search(index, later.name, later.path, later.format, fields,
                                  later.shards, jobs)  # fmt: skip
    return out


def _contained(
    hits: Sequence[contain.Hit],
    kinds: dict[str, str],
    matched: dict[tuple[str, str], set[int]],
    leaking: dict[str, set[int]],
    marks: dict[str, Marks],
) -> dict[tuple[str, str], list[Match]]:
    """The hits no exact or near match already names, as matches per split pair; a
    training record found is added to ``leaking``."""
    out: dict[tuple[str, str], list[Match]] = defaultdict(list)
    for hit in hits:
        (a, ra, la), (b, rb, lb) = hit.a, hit.b
        if rb in matched[(a, b)]:
            continue  # one match per later record and split pair
        matched[(a, b)].add(rb)
        if kinds[b] == "train":
            leaking[b].add(rb)
        at_a = Ref(a, ra, la, marks[a].shard_of(ra))
        out[(a, b)].append(Match(hit.how, at_a, Ref(b, rb, lb, marks[b].shard_of(rb)), 1.0))
    return out


def _no_text(split: Split, n: int) -> InputError:
    fields = ", ".join(split.fields) if split.fields else "the default text fields"
    return InputError(
        f"data entry {split.name!r}: none of its {n} records has text in {fields}",
        path=str(split.path),
        field="data_checks.text_fields",
        expected="keys or columns that hold each record's text",
        observed=f"{n} records, every one without text there",
        hint="name the text keys in data_checks.text_fields (or --field); the defaults are "
        "messages[].content, prompt+completion, text, else every string",
    )


def _rank(m: Match) -> tuple[float, bool, int, int]:
    """Examples first: most similar, exact before near, earliest later record."""
    return (-m.similarity, m.kind != "exact", m.b.record, m.a.record)


def _hashed(raw: str) -> array[int]:
    """A record's shingles as sorted distinct 64-bit hashes: a tenth of a set of strings
    in memory.  Jaccard on them equals Jaccard on the shingles unless two shingles'
    hashes collide (about 78**2 / 2**64 for two 80-word records)."""
    return array("q", sorted({hash(s) for s in shingle_list(normalise(raw))}))


def _jaccard_hashed(a: array[int], b: array[int]) -> float:
    if not a and not b:
        return 1.0
    inter = len(set(a).intersection(b))
    return inter / (len(a) + len(b) - inter)


def _verify(
    splits: Sequence[Split],
    candidates: set[tuple[str, int, str, int]],
    threshold: float,
    examples: int,
    leaking: dict[str, set[int]],
    marks: dict[str, Marks],
    matched: dict[tuple[str, str], set[int]],
) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], list[Match]]]:
    """Second pass: the candidates' shingles, exact Jaccard; near duplicates counted per
    split pair (train records that repeat eval or test added to ``leaking``), and the
    ``examples`` most similar kept per pair."""
    import heapq

    wanted: dict[str, set[int]] = defaultdict(set)
    for a, ra, b, rb in candidates:
        wanted[a].add(ra)
        wanted[b].add(rb)
    sets: dict[tuple[str, int], array[int]] = {}
    lines: dict[tuple[str, int], int] = {}
    for split in splits:
        need = wanted.pop(split.name, None)
        if not need:
            continue
        own = marks[split.name]
        for number, line, raw in selected_texts(
            split.path, split.format, split.fields, need, own if split.shards else None
        ):
            sets[(split.name, number)] = _hashed(raw)
            lines[(split.name, number)] = line
    kinds = {s.name: s.kind for s in splits}
    counts: dict[tuple[str, str], int] = defaultdict(int)
    heaps: dict[tuple[str, str], list[tuple[tuple[float, int, int], Match]]] = defaultdict(list)
    for a, ra, b, rb in sorted(candidates):
        similarity = _jaccard_hashed(sets[(a, ra)], sets[(b, rb)])
        if similarity < threshold:
            continue
        counts[(a, b)] += 1
        matched[(a, b)].add(rb)
        if kinds[b] == "train" and a != b:
            leaking[b].add(rb)
        if examples:
            heap = heaps[(a, b)]
            order = (similarity, -rb, -ra)  # the heap's smallest is the least worth showing
            if len(heap) < examples or order > heap[0][0]:
                at_a = Ref(a, ra, lines[(a, ra)], marks[a].shard_of(ra))
                m = Match("near", at_a, Ref(b, rb, lines[(b, rb)], marks[b].shard_of(rb)),
                          similarity)  # fmt: skip
                if len(heap) < examples:
                    heapq.heappush(heap, (order, m))
                else:
                    heapq.heapreplace(heap, (order, m))
    best = {k: [m for _o, m in h] for k, h in heaps.items()}
    return dict(counts), best


def _excerpts(
    splits: Sequence[Split], shown: Sequence[Match], marks: dict[str, Marks]
) -> dict[tuple[str, int], str]:
    """The original text, cut short, of the records the examples show (a third, light
    pass: only those lines are parsed)."""
    wanted: dict[str, set[int]] = defaultdict(set)
    for m in shown:
        wanted[m.a.split].add(m.a.record)
        wanted[m.b.split].add(m.b.record)
    out: dict[tuple[str, int], str] = {}
    for split in splits:
        need = wanted.get(split.name)
        if need:
            own = marks[split.name] if split.shards else None
            for number, _line, raw in selected_texts(
                split.path, split.format, split.fields, need, own
            ):
                out[(split.name, number)] = raw[:EXCERPT]
    return out


def serve(comm: Any, splits: Sequence[Any], signer: Any) -> None:
    """A rank other than 0: sign its share of every split, in the order rank 0 reads them."""
    for split in sorted(splits, key=lambda s: ROLE_ORDER[s.role]):
        for _sig in signer.signatures(split.path, split.format, split.fields, split.shards):
            pass
