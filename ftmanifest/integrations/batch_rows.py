"""The examples a Trainer feeds the model, tied back to the pinned rows they came from.

Layer: edges - edge (integrations; torch is imported inside the functions).  The rows
check (``data_rows``) sees an indices mapping and a row count; a ``.map`` that rewrites
the text of the pinned rows, or writes them in another order (a ``.shuffle`` with a
foreign seed, then a ``.map``), leaves neither.  ``ContentGuard`` sees what was read:
at the first training micro-batch (a forward pre-hook, then it removes itself: nothing
per step after) it judges

* each example of the batch (up to ``MAX_EXAMPLES``): its decoded text (special tokens
  dropped), normalised as the leakage check normalises (``data.text.normalise``), must
  hold a pinned row's task pieces (``pieces``: the text fields without system turns),
  in order, with at most ``MAX_GAP`` characters between two (a template's markers)
  and ``MAX_TAIL`` after the last (an end marker); the text may end inside a piece
  (truncation to ``max_length``).  The candidate rows come from an index keyed by the
  leading ``KEY`` characters of each pinned row's first piece (``MAX_INDEX_ROWS``
  rows at most), looked up from the start of the text: the first full key found
  decides;
* the dataset's first ``ROWS_CHECKED`` rows against the pinned rows at their
  positions: row ``i`` of a ``.map`` output is row ``i`` of its input, so it must be
  pinned row ``i`` (through the indices mapping when there is one), or row
  ``permutation(seeds.data_order)[i]`` when every checked row is (a shuffle with the
  pinned seed, then a map).

A refusal is a ``drift.data-rows`` row naming the example's position, a redacted
excerpt (the scan rules' redaction, as ``batches`` redacts), the pinned entry and the
fix.  Not judged (counted in the run record, never refused): an example that holds
an unknown token (its text cannot be read back whole), or that is not found when
the pinned rows are more than the index holds; preference pairs (``chosen`` and
``rejected`` columns) are not judged at all.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ftmanifest.data.text import DEFAULT_FIELDS, field_texts, normalise
from ftmanifest.findings import Finding
from ftmanifest.integrations.batches import TrainingForwardHook, redact_tokens
from ftmanifest.integrations.data_rows import RULE, _permutation
from ftmanifest.manifest.model import Manifest

KEY = 24  # leading normalised characters of a row's first piece that key the index
MAX_INDEX_ROWS = 200_000  # pinned rows indexed; past it an example not found is not judged
MAX_CANDIDATES = 32  # rows tried per key (rows that open alike)
MAX_GAP = 80  # characters between two pieces: a template's markers
MAX_TAIL = 16  # characters after the last piece: an end marker
MAX_EXAMPLES = 8  # examples of the first micro-batch judged
ROWS_CHECKED = 8  # leading dataset rows judged against their pinned positions
EXCERPT = 160


def pieces(value: Any) -> list[str]:
    """A record's task text fields (no system or developer turns), normalised, in order."""
    if isinstance(value, str):
        found = [value]
    else:
        group = next((g for g in DEFAULT_FIELDS if isinstance(value, dict)
                      and any(k in value for k in g)), ())  # fmt: skip
        found = [s for k in group for s in field_texts(value, k, False)] if group else []
    return [p for p in map(normalise, found) if p]


def holds(text: str, want: list[str]) -> bool:
    """``text`` (normalised) is ``want``'s pieces in order with a template's marks around
    them; it may end inside a piece, or between two (truncation)."""
    if not want:
        return False
    pos = text.find(want[0][:KEY])
    if pos < 0:  # cut before the first piece's key ends: marks, then the start of it
        return any(c.isalnum() for c in text) and _ends_in(text, want[0], MAX_GAP)
    for n, piece in enumerate(want):
        gap = 0 if n == 0 else MAX_GAP
        nxt = text.find(piece, pos, pos + gap + len(piece))
        if nxt < 0:
            return _ends_in(text[pos:], piece, gap)
        pos = nxt + len(piece)
    return len(text) - pos <= MAX_TAIL


def _ends_in(rest: str, piece: str, gap: int) -> bool:
    """``rest`` is a template's marks then the start of ``piece``, or marks only (no letter
    or digit): the text was cut there."""
    if not any(c.isalnum() for c in rest):
        return True
    least = min(4, len(piece))
    return any(
        len(rest) - k >= least and piece.startswith(rest[k:])
        for k in range(min(gap, len(rest)) + 1)
    )


class Pinned:
    """The pinned rows a traced dataset was read from (``trace.record["origins"]``)."""

    def __init__(self, origins: list[dict[str, Any]]) -> None:
        from ftmanifest.integrations.data_trace import _split_table
        from ftmanifest.integrations.datasets import _info

        self.tables: list[Any] = []
        self.label = ", ".join(f"{e['field']} {e['name']!r} ({e['path']})"
                               for o in origins for e in o["entries"])  # fmt: skip
        for origin in origins:
            folder = Path(origin["cache"])
            info = _info(folder)
            table, why = _split_table(folder, info, origin["split"]) if info else (None, "")
            if table is None:
                raise OSError(why or f"no builder folder at {folder}")
            self.tables.append(table)
        self.rows = sum(t.num_rows for t in self.tables)
        self._index: dict[str, list[int]] | None = None

    def row(self, i: int) -> list[str]:
        for table in self.tables:
            if i < table.num_rows:
                return pieces(table.slice(i, 1).to_pylist()[0])
            i -= table.num_rows
        return []

    def index(self) -> dict[str, list[int]]:
        if self._index is None:
            self._index = {}
            n = 0
            for table in self.tables:
                for batch in table.to_batches(2048):
                    for record in batch.to_pylist():
                        if n >= MAX_INDEX_ROWS:
                            return self._index
                        first = pieces(record)
                        if first:
                            self._index.setdefault(first[0][:KEY], []).append(n)
                        n += 1
        return self._index

    def find(self, text: str) -> int | None:
        """The pinned row ``text`` holds, or None.  The earliest place a key opens decides
        when the key is a full ``KEY`` characters (a row's text further on is not the
        example's: a template opens with marks, not with another row)."""
        index = self.index()
        sizes = sorted({len(k) for k in index}, reverse=True)
        for at in range(len(text)):
            for size in sizes:
                rows = index.get(text[at : at + size], [])[:MAX_CANDIDATES]
                if any(holds(text[at:], self.row(j)) for j in rows):
                    return next(j for j in rows if holds(text[at:], self.row(j)))
                if rows and size >= KEY:
                    return None
        return self._cut_short(text) if len(text) < KEY + MAX_GAP else None

    def _cut_short(self, text: str) -> int | None:
        """A text cut before a whole key: marks, then the start of a row's first piece."""
        keys = self._keys = getattr(self, "_keys", None) or sorted(self.index())
        for k in range(min(MAX_GAP, len(text))):
            tail = text[k:]
            at = bisect.bisect_left(keys, tail)
            while len(tail) >= 4 and at < len(keys) and keys[at].startswith(tail):
                for j in self.index()[keys[at]][:MAX_CANDIDATES]:
                    if holds(text, self.row(j)):
                        return j
                at += 1
        return None


def _decode(tokenizer: Any, ids: list[int]) -> tuple[str, bool]:
    """Normalised text without special tokens, and whether an unknown token was dropped."""
    unk = getattr(tokenizer, "unk_token_id", None)
    text = tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    return normalise(str(text)), unk is not None and unk in ids


class ContentGuard(TrainingForwardHook):
    """A forward pre-hook judging the first training micro-batch and the dataset's first
    rows against the pinned rows; ``refuse(rows)`` raises."""

    def __init__(
        self, model: Any, tokenizer: Any, dataset: Any, pinned: Pinned, seed: int | None,
        path: str, refuse: Callable[[list[Finding]], None], record: dict[str, Any],
    ) -> None:  # fmt: skip
        self.tokenizer, self.dataset, self.pinned, self.seed = tokenizer, dataset, pinned, seed
        self.path, self.refuse = path, refuse
        self.state: dict[str, Any] = {"judged": 0, "not_judged": 0, "rows_checked": 0,
                                      "order": None, "why_not": None}  # fmt: skip
        record["data_content"] = self.state
        if not self._attach(model):
            self.state["why_not"] = "the Trainer handed the guard no model"

    def _seen(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        import torch

        if not self.training_forward(module):
            return None
        self.remove()  # the first training batch only: nothing per step after
        ids: Any = kwargs.get("input_ids", args[0] if args and torch.is_tensor(args[0]) else None)
        rows = self.judge_dataset()
        if not rows and torch.is_tensor(ids) and ids.dim() == 2:
            rows = self.judge_batch(ids, kwargs.get("attention_mask"))
        if rows:
            try:
                self.refuse(rows)
            except Exception as exc:
                if hasattr(exc, "hint"):
                    exc.hint = rows[0].hint  # the step refusal's own hint speaks of learning rates
                raise
        return None

    def _row(self, message: str, observed: str, expected: str, hint: str) -> Finding:
        return Finding.at(("data",), kind="drift", rule=RULE, message=message, path=self.path,
                          expected=expected, observed=observed, hint=hint)  # fmt: skip

    def _excerpt(self, ids: list[int]) -> str:
        shown = redact_tokens(self.tokenizer, ids)[0]
        return " ".join(shown.split())[:EXCERPT]

    def judge_batch(self, ids: Any, mask: Any) -> list[Finding]:
        for k in range(min(int(ids.shape[0]), MAX_EXAMPLES)):
            row = ids[k].tolist()
            if mask is not None and tuple(mask.shape) == tuple(ids.shape):
                row = [t for t, m in zip(row, mask[k].tolist(), strict=True) if m]
            text, unknown = _decode(self.tokenizer, row)
            if self.pinned.find(text) is not None:
                self.state["judged"] += 1
                continue
            if unknown or self.pinned.rows > MAX_INDEX_ROWS:
                self.state["not_judged"] += 1
                continue
            return [self._row(
                f"example {k} of the first training batch holds no pinned row's text",
                f"example {k}: {self._excerpt(row)!r}",
                f"the text fields of a row of {self.pinned.label}, with a template's marks "
                "around them (tokenised, truncated, padded)",
                "train on the pinned rows' text: a .map may tokenise and format them (chat "
                "template, BOS/EOS, truncation), not rewrite them; to train on other text, "
                "write it to a file, pin it as a data entry and re-lock the manifest",
            )]  # fmt: skip
        return []

    def _text(self, i: int) -> tuple[str | None, list[int] | None]:
        record = self.dataset[i]
        ids = record.get("input_ids") if isinstance(record, dict) else None
        if isinstance(ids, list) and ids and isinstance(ids[0], int):
            if self.tokenizer is None or not hasattr(self.tokenizer, "decode"):
                return None, None
            text, unknown = _decode(self.tokenizer, ids)
            return (None if unknown else text), ids
        have = pieces(record)
        return (" ".join(have) if have else None), None

    def judge_dataset(self) -> list[Finding]:
        """The first rows at their pinned positions: in order, or in ``seeds.data_order``'s."""
        if self.dataset is None or not hasattr(self.dataset, "__getitem__"):
            return []
        n = min(ROWS_CHECKED, len(self.dataset))
        mapping = getattr(self.dataset, "_indices", None)
        plain = list(range(n))
        if mapping is not None:
            plain = [int(x) for x in mapping.column(0).to_pylist()[:n]]
        orders = {"pinned": plain}
        if mapping is None and self.seed is not None:
            orders[f"shuffle(seed={self.seed})"] = _permutation(self.seed, self.pinned.rows)[:n]
        texts = [self._text(i) for i in range(n)]
        for name, order in orders.items():
            if all(t is None or holds(t, self.pinned.row(j))
                   for (t, _), j in zip(texts, order, strict=True)):  # fmt: skip
                self.state.update(order=name, rows_checked=sum(t is not None for t, _ in texts))
                return []
        i = next(i for i, (t, _) in enumerate(texts)
                 if t is not None and not holds(t, self.pinned.row(plain[i])))  # fmt: skip
        text, ids = texts[i]
        assert text is not None
        found = self.pinned.find(text)
        shown = self._excerpt(ids) if ids is not None else text[:EXCERPT]
        if found is not None:
            return [self._row(
                "the training dataset holds the pinned rows in another order than the "
                "manifest's data order",
                f"dataset row {i} holds pinned row {found} ({shown!r}): a .shuffle with another "
                "seed, then a .map (which writes the shuffled rows and leaves no mapping)",
                f"pinned row {plain[i]} of {self.pinned.label} (the pinned order"
                + (f", or shuffle(seed={self.seed}))" if self.seed is not None else ")"),
                "drop the .shuffle and let the Trainer shuffle (its sampler's seed is checked "
                "against seeds.data_order)"
                + (f", or shuffle(seed={self.seed})" if self.seed is not None else ""),
            )]  # fmt: skip
        return [self._row(
            f"row {i} of the training dataset holds no pinned row's text",
            f"dataset row {i}: {shown!r}",
            f"the text fields of pinned row {plain[i]} of {self.pinned.label}",
            "train on the pinned rows' text: a .map may tokenise and format them, not "
            "rewrite them; to train on other text, pin it as a data entry and re-lock",
        )]  # fmt: skip


def install(
    model: Any, tokenizer: Any, dataloader: Any, trace: dict[str, Any], manifest: Manifest | None,
    path: str, refuse: Callable[[list[Finding]], None], record: dict[str, Any],
) -> ContentGuard | None:  # fmt: skip
    """A ``ContentGuard`` when the training dataset was traced to pinned rows, else None
    (``record["data_content"]`` says why not)."""
    if not trace.get("traced") or not trace.get("origins"):
        record["data_content"] = {"why_not": "the training dataset was not traced to pinned rows"}
        return None
    if tokenizer is None or not hasattr(tokenizer, "decode"):
        why = "the Trainer was given no tokenizer (processing_class) to read the batch with"
        record["data_content"] = {"why_not": why}
        return None
    try:
        pinned = Pinned(list(trace["origins"]))
    except OSError as exc:
        record["data_content"] = {"why_not": f"the pinned rows cannot be read: {exc}"[:300]}
        return None
    if any({"chosen", "rejected"} & set(t.column_names) for t in pinned.tables):
        why = "preference pairs: a batch row is a prompt with one answer, not the row's fields"
        record["data_content"] = {"why_not": why}
        return None
    seed = manifest.seeds.data_order if manifest is not None else None
    dataset = getattr(dataloader, "dataset", None) if len(trace["origins"]) == 1 else None
    return ContentGuard(model, tokenizer, dataset, pinned, seed, path, refuse, record)
