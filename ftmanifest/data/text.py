"""A record's text, normalised: which fields count, and the form they are compared in.

Layer: data core (pure; no I/O).  Default text fields per shape of record:
a chat record's ``messages[].content``; else ``prompt`` and ``completion``;
else ``text``; else every string leaf (``recordio.text_fields``).  A CSV/TSV
row is a ``{column: cell}`` mapping, so the same defaults pick its
``prompt``/``completion`` or ``text`` columns.  ``fields`` overrides the
defaults with top-level key (column) names: the string leaves under each named
key (for ``messages``: each message's ``content``), in the order named.

Normalisation (issue 17): Unicode NFKC, then casefold, then every run of
whitespace becomes one space and the ends are stripped, so copies that differ
only in width forms, case or spacing compare equal.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from ftmanifest.recordio import text_fields

DEFAULT_FIELDS: tuple[tuple[str, ...], ...] = (("messages",), ("prompt", "completion"), ("text",))
"""Tried in order: the first group with a key present in a record is its text."""

SHINGLE_WORDS = 3
NUM_PERM = 128
"""MinHash permutations per record (the signature's length)."""
SEED = 42
"""The MinHash seed: every process must sign with the same one."""
_SPACE = re.compile(r"\s+")
_SEP = "\n"  # between fields (normalised to one space like any whitespace)


@functools.cache
def _invisible() -> re.Pattern[str]:
    """Every format character (Unicode category Cf: zero-width spaces and joiners,
    soft hyphens, bidi controls, the BOM, tags), built once per process."""
    chars = "".join(chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf")
    return re.compile("[" + re.escape(chars) + "]+")


def normalise(text: str) -> str:
    """NFKC, casefold, format characters dropped, whitespace runs collapsed to one
    space, ends stripped.

    Format characters (zero-width spaces, soft hyphens, bidi controls) change no
    glyph, so a copy with them sprinkled between letters is still the same text.
    Idempotent: ``normalise(normalise(t)) == normalise(t)``.  Casefolding can
    leave text NFKC would change again (and the reverse; so can dropping a
    joiner), so the steps repeat until the text no longer changes.
    """
    invisible = _invisible()
    previous = None
    while text != previous:
        previous = text
        text = invisible.sub("", unicodedata.normalize("NFKC", text).casefold())
    return _SPACE.sub(" ", text).strip()


def _leaves(value: Any, key: str) -> list[str]:
    node = value.get(key) if isinstance(value, dict) else None
    if node is None:
        return []
    if key == "messages" and isinstance(node, list):
        return [
            m["content"] for m in node if isinstance(m, dict) and isinstance(m.get("content"), str)
        ]
    return [s for _path, s in text_fields(node)]


def record_text(value: Any, fields: Sequence[str] = ()) -> str:
    """The text of one record (``recordio.Record.value``), fields joined by a newline."""
    if isinstance(value, str):
        return value
    if fields:
        return _SEP.join(s for key in fields for s in _leaves(value, key))
    if isinstance(value, dict):
        for group in DEFAULT_FIELDS:
            if any(key in value for key in group):
                return _SEP.join(s for key in group for s in _leaves(value, key))
    return _SEP.join(s for _path, s in text_fields(value))


def shingle_list(normalised: str, words: int = SHINGLE_WORDS) -> list[str]:
    """The ``words``-word shingles of normalised text in order, repeats kept (a MinHash
    of the list equals that of the set; building no set is faster)."""
    tokens = normalised.split(" ")
    if len(tokens) <= words:
        return [normalised] if normalised else []
    return list(map(" ".join, zip(*(tokens[i:] for i in range(words)), strict=False)))


def shingles(normalised: str, words: int = SHINGLE_WORDS) -> set[str]:
    """The set of ``words``-word shingles of normalised text (the whole text when shorter)."""
    return set(shingle_list(normalised, words))


def jaccard(a: set[str] | frozenset[str], b: set[str] | frozenset[str]) -> float:
    """Exact Jaccard similarity of two shingle sets (1.0 for two empty sets)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)
