"""A few records of every category, as the model will see them (``data sample``).

Layer: judging rooms - data (edge: streams the splits through ``recordio.iter_records``
and loads the pinned tokenizer from the local folder or hub cache; returns data, prints
nothing).

Choosing (``choose``) is seeded and independent of everything but the seed,
the split's name and the record's number: each record is ranked by a keyed
BLAKE2b hash of (seed, split name, record number) and the ``N`` lowest ranks
of each category are kept, in one streaming pass holding ``N`` records per
category.  Editing another split, or records of another category, never
changes which records a category shows; the same seed always shows the same
records.

Rendering (``render``) is preflight's own formatting
(``preflight.recipe.default_format``: the chat template or prompt+completion,
``seq_len`` truncation, ``loss_on`` labels) and preflight's token view
(``preflight.checks.render``), so what is shown is what preflight checks and
the default recipe trains.  Without the pinned tokenizer (no model here, no
tokenizer files, a tokenizer file that differs from its pin) nothing is
rendered: ``Tokenizer.reason`` says why and the raw fields are shown instead.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ftmanifest.data.stats import label_of, split_records
from ftmanifest.data.stats import load_tokenizer as load
from ftmanifest.errors import FtManifestError, InputError
from ftmanifest.hashing.files import hash_file
from ftmanifest.manifest import LoadedManifest
from ftmanifest.manifest.model import Manifest

NO_CATEGORY = "(no category)"
MAX_CATEGORIES = 10_000  # per split; more distinct labels is a wrong label key, not categories
DEFAULT_SEQ_LEN = 512  # preflight's when training.seq_len is unset
SEED_FIELDS = ("data_order", "python", "torch", "numpy")
TOKENIZER_FILES = frozenset({
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "chat_template.jinja", "chat_template.json", "vocab.json", "vocab.txt", "merges.txt",
    "tokenizer.model", "spiece.model", "sentencepiece.bpe.model", "config.json",
})  # fmt: skip
"""Files ``AutoTokenizer`` reads: each pinned one must match its digest here."""


@dataclass(frozen=True)
class Pick:
    """One chosen record: where it is and what it holds."""

    split: str
    number: int
    line: int
    category: str | None
    value: Any
    shard: str = ""  # the shard of a folder split that holds it


@dataclass
class SplitSample:
    """The chosen records of one split, by category (``None``: no category)."""

    name: str
    role: str
    records: int = 0
    counts: dict[str | None, int] = field(default_factory=dict)
    picks: dict[str | None, list[Pick]] = field(default_factory=dict)


@dataclass(frozen=True)
class Tokenizer:
    """The pinned tokenizer (``None`` when not available offline, ``reason`` says why)."""

    tokenizer: Any
    folder: str | None
    reason: str | None = None
    chat_template: bool = False


def default_seed(manifest: Manifest) -> tuple[int, str]:
    """The seed to choose with, and where it came from (the manifest's seeds, else 0)."""
    for name in SEED_FIELDS:
        value = getattr(manifest.seeds, name)
        if value is not None:
            return int(value), f"seeds.{name}"
    return 0, "default (the manifest sets no seed)"


def _scalar(value: Any) -> str | None:
    if value is None or value == "" or isinstance(value, (dict, list)) and not value:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def target_of(value: Any, key: str | None = None, label: str | None = None) -> tuple[str, str]:
    """(where, text) of the expected output: ``key`` (``data_checks.target``), else
    ``completion``, else the last assistant message, else the label; ("", "") if none."""
    if not isinstance(value, dict):
        return "", ""
    if key:
        return key, _scalar(value.get(key)) or ""
    if "completion" in value:
        return "completion", _scalar(value["completion"]) or ""
    messages = value.get("messages")
    if isinstance(messages, list):
        for i in range(len(messages) - 1, -1, -1):
            m = messages[i]
            if isinstance(m, dict) and m.get("role") == "assistant":
                return f"messages[{i}] (assistant)", _scalar(m.get("content")) or ""
    for k in (label,) if label else ("label", "category"):
        if k in value:
            return k, _scalar(value[k]) or ""
    return "", ""


def _key(seed: int) -> bytes:
    return hashlib.sha256(f"ftmanifest data sample {seed}".encode()).digest()


def rank(seed: int, split: str, number: int, *, key: bytes | None = None) -> int:
    """The record's place in the seeded order (lower is chosen first)."""
    data = f"{split}\x00{number}".encode("utf-8", "surrogatepass")
    digest = hashlib.blake2b(data, key=key or _key(seed), digest_size=16).digest()
    return int.from_bytes(digest, "big")


def choose(
    splits: Sequence[Any], per_category: int, seed: int, label: str | None = None
) -> list[SplitSample]:
    """``per_category`` records of each category of each split (``data.leak_report.Split``)."""
    out = []
    for split in splits:
        sample = SplitSample(split.name, split.role)
        heaps: dict[str | None, list[tuple[int, int, Pick]]] = {}
        key = _key(seed)
        for shard, rec in split_records(split):
            sample.records += 1
            number = sample.records if split.shards else rec.number  # on across the shards
            cat = label_of(rec.value, label)
            if cat not in sample.counts and len(sample.counts) >= MAX_CATEGORIES:
                raise InputError(
                    f"split {split.name!r} has more than {MAX_CATEGORIES} categories",
                    path=str(split.path),
                    line=rec.line,
                    field="data_checks.label",
                    expected=f"at most {MAX_CATEGORIES} distinct labels",
                    observed=f"a new one at record {number}",
                    hint="set data_checks.label to the key that names a record's category",
                )
            sample.counts[cat] = sample.counts.get(cat, 0) + 1
            heap = heaps.setdefault(cat, [])
            # the kept ranks as a max-heap (negated): its top is the first to give way
            item = (-rank(seed, split.name, number, key=key), -number)
            if len(heap) < per_category:
                pick = Pick(split.name, number, rec.line, cat, rec.value, shard)
                heapq.heappush(heap, (*item, pick))
            elif heap and item > heap[0][:2]:
                pick = Pick(split.name, number, rec.line, cat, rec.value, shard)
                heapq.heapreplace(heap, (*item, pick))
        for cat in sorted(heaps, key=lambda c: (c is None, c or "")):
            sample.picks[cat] = sorted((p for _r, _n, p in heaps[cat]), key=lambda p: p.number)
        sample.counts = {c: sample.counts[c] for c in sample.picks}
        out.append(sample)
    return out


def _pinned_tokenizer_drift(manifest: Manifest, folder: Path) -> str | None:
    """The first tokenizer file here that differs from its pin in ``model.files``."""
    pins = {f.path: f.digest for f in manifest.model.files if f.digest}
    if not pins:
        return None
    for name in sorted(TOKENIZER_FILES):
        path = folder / name
        pinned = pins.get(name)
        if pinned is None:
            if path.exists() and name != "config.json":
                return f"{name} is here but not pinned in model.files"
            continue
        try:
            observed = hash_file(path, use_cache=False).digest
        except FtManifestError as exc:
            return f"{name} cannot be read: {exc.message}"
        if observed != pinned:
            return f"{name} differs from its pin ({observed} here, {pinned} pinned)"
    return None


def load_tokenizer(loaded: LoadedManifest, *, allow_outside: bool = False) -> Tokenizer:
    """The pinned model's tokenizer (``stats.load_tokenizer``: the local folder or hub
    cache, never the network), refused when a tokenizer file differs from its pin."""
    tok, where = load(loaded, allow_outside=allow_outside)
    if tok is None:
        return Tokenizer(None, None, where)
    drift = _pinned_tokenizer_drift(loaded.manifest, Path(where))
    if drift is not None:
        return Tokenizer(None, where, f"not the pinned tokenizer: {drift}")
    return Tokenizer(tok, where, None, bool(getattr(tok, "chat_template", None)))


def render(
    pick: Pick, tok: Any, seq_len: int, loss_on: str, fmt: Callable[..., Any] | None = None
) -> dict[str, Any]:
    """The record as ``fmt`` formats it (preflight's ``default_format`` if none): text,
    tokens, loss, truncation."""
    # lazy: pydantic (preflight builds the manifest models); results files import this module
    from ftmanifest.preflight.checks import render as token_view
    from ftmanifest.preflight.recipe import IGNORE, default_format

    ex = (fmt or default_format)(pick.value, tok, seq_len, loss_on)
    view = token_view(ex, tok)
    ids = ex.input_ids
    cut = min(ex.prompt_len, len(ids))
    kept_completion = max(0, len(ids) - ex.prompt_len)
    return {
        "text": tok.decode(ids),
        "prompt_text": tok.decode(ids[:cut]),
        "completion_text": tok.decode(ids[cut:]),
        "loss_text": tok.decode(
            [t for t, lab in zip(ids, ex.labels, strict=False) if lab != IGNORE]
        ),
        "tokens": view["tokens"],
        "token_count": ex.prompt_len + ex.completion_len,
        "kept_tokens": len(ids),
        "prompt_tokens": ex.prompt_len,
        "completion_tokens": ex.completion_len,
        "loss_tokens": sum(1 for lab in ex.labels if lab != IGNORE),
        "truncated": ex.prompt_len + ex.completion_len > len(ids),
        "target_cut": kept_completion < ex.completion_len,
        "target_lost": ex.target_lost,
    }


def raw_fields(value: Any) -> list[tuple[str, str]]:
    """The record's fields as (name, text), for when nothing can be rendered."""
    if not isinstance(value, dict):
        return [("record", value if isinstance(value, str) else json.dumps(value))]
    out = []
    for key, item in value.items():
        if key == "messages" and isinstance(item, list):
            for i, m in enumerate(item):
                role = m.get("role", "?") if isinstance(m, dict) else "?"
                content = m.get("content") if isinstance(m, dict) else m
                text = content if isinstance(content, str) else json.dumps(content)
                out.append((f"messages[{i}] {role}", text))
        else:
            out.append((str(key), item if isinstance(item, str) else json.dumps(item)))
    return out
