"""A record's text, normalised: which fields count, and the form they are compared in.

Layer: judging rooms - data core (pure; no I/O).  Default text fields per shape of
record: a chat record's ``messages``; else ``prompt`` and ``completion``; else
``instruction``, ``input`` and ``output`` (Alpaca); else ``text``; else every string
leaf, keys in sorted order (so field order never changes a record's text).  A CSV/TSV
row is a ``{column: cell}`` mapping, so the same defaults pick its
``prompt``/``completion`` or ``text`` columns.  ``fields`` overrides the defaults with
top-level key (column) names: the string leaves under each named key, in the order
named.

A list of chat turns (``messages``, or a conversational ``prompt`` or
``completion`` as TRL and ``datasets`` write them) gives the content of its
turns.  ``task_text``, what the leakage check compares, keeps the turns that
carry the task: every one but ``system`` and ``developer`` turns, so a copy
with its system prompt removed or replaced compares equal;
``record_text`` keeps them all (they count towards a record's length).
Content may be a string or a list of parts (``[{"type": "text", "text":
...}]``); text parts count, image and other parts do not.

Normalisation: compatibility decomposition, every
combining mark (category M) and every default-ignorable code point (format
characters, variation selectors, fillers, U+034F, tags) dropped, composed
again (NFKC) and casefolded; every run of whitespace becomes one space,
whitespace next to punctuation (category P) is dropped (``support ,`` is
``support,``: detokenised text), and the ends are stripped.  So copies that
differ only in width forms, case, accents, invisible characters or spacing
compare equal.

Disguises a copy may wear are undone too (``normalise``): HTML character
references (``&amp;``, ``&lt;``, ``&#39;``, repeated until none is left),
markdown emphasis and code marks (``*``, ``_``, `````, ``~`` dropped wherever
they stand) and the common Cyrillic and Greek look-alikes of Latin letters
(``CONFUSABLES``, after NFKC has folded fullwidth and other compatibility
forms).  ``input_pieces`` gives the parts of a record that carry its input
(not its answer or label), each compared on its own by ``data.contain``.
"""

from __future__ import annotations

import functools
import html
import re
import string
import unicodedata
from collections.abc import Sequence
from typing import Any

DEFAULT_FIELDS: tuple[tuple[str, ...], ...] = (
    ("messages",),
    ("prompt", "completion"),
    ("instruction", "input", "output"),
    ("text",),
)
"""Tried in order: the first group with a key present in a record is its text."""

SHINGLE_WORDS = 3
NUM_PERM = 120
"""MinHash permutations per record (the signature's length): 120 has many divisors, so
the LSH can band it for a recall of 0.99 at the threshold (20 bands of 6 rows at 0.8;
128 allows only 16 x 8, 0.947, or 32 x 4, with four times the false candidates)."""
SEED = 42
"""The MinHash seed: every process must sign with the same one."""
_SEP = "\n"  # between fields (normalised to one space like any whitespace)


_MARKUP = re.compile(r"[*_`~]+")
_ASCII_SPACES = "\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"  # whitespace but the space
_ASCII_P = tuple(chr(c) for c in range(128) if unicodedata.category(chr(c))[0] == "P")
"""Markdown emphasis, code and strike-through marks: dropped, so ``**text**`` is ``text``."""

# Cyrillic and Greek letters that read as a Latin one (Unicode confusables.txt, the
# single-letter mappings to Latin of these two scripts), upper case first: casefolding
# runs after, so each capital needs its own entry (Greek capital Beta folds to beta,
# which no longer looks like b).
CONFUSABLES = str.maketrans(
    "АВЕЅІЈКМНОРСТХУ" "аеѕіјкорсхуԁһԛԝӏүɡ"  # Cyrillic (and Latin small script g)
    "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ" "αγινοσρυχκϲϳ",  # Greek
    "ABESIJKMHOPCTXY" "aesijkopcxydhqwlyg"
    "ABEZHIKMNOPTYX" "ayivoopuxkcj",
)  # fmt: skip
"""Look-alikes to the Latin letter a reader sees (NFKC keeps them apart)."""

_SETUP_ROLES = frozenset({"system", "developer"})
"""Chat turns that set the assistant up rather than carry the task."""

# Default_Ignorable_Code_Point (Unicode DerivedCoreProperties.txt) outside category Cf
# and category M, both dropped whole: fillers, U+034F, Mongolian selectors, reserved.
_IGNORABLE = (
    (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0xE0000, 0xE0FFF),
)  # fmt: skip


@functools.cache
def _classes(astral: bool) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """What ``normalise`` drops and the spaces it drops, built once per process (one
    pass over the code points); ``astral``: for text with characters past U+FFFF
    (a class of BMP characters only is some thirty times faster to match).

    Dropped: every format character (category Cf: zero-width spaces and joiners,
    soft hyphens, bidi controls, the BOM, tags), every mark (category M:
    combining accents, enclosing marks, vowel signs) and every other
    default-ignorable code point.  A space goes before or after a punctuation
    character (category P)."""
    dropped = {c for lo, hi in _IGNORABLE for c in range(lo, hi + 1)}
    punctuation = set()
    for c in range(0x110000 if astral else 0x10000):
        category = unicodedata.category(chr(c))
        if category[0] == "M" or category == "Cf":
            dropped.add(c)
        elif category[0] == "P":
            punctuation.add(c)
    if not astral:
        dropped = {c for c in dropped if c < 0x10000}
    invisible = re.compile("[" + _ranges(dropped) + "]+")
    p = "[" + _ranges(punctuation) + "]"
    return invisible, re.compile(f" (?:(?={p})|(?<={p} ))")


def _ranges(codes: set[int]) -> str:
    """A regex character class body for ``codes``, runs written as ranges."""
    out: list[list[int]] = []
    run: list[int] = []
    for c in sorted(codes):
        if run and c != run[-1] + 1:
            out.append(run)
            run = []
        run.append(c)
    if run:
        out.append(run)
    return "".join(
        re.escape(chr(r[0])) + ("-" + re.escape(chr(r[-1])) if len(r) > 1 else "") for r in out
    )


def normalise(text: str) -> str:
    """NFKD, marks and invisible characters dropped, NFKC, look-alikes mapped
    (``CONFUSABLES``), casefold, markdown marks dropped, HTML character references
    decoded; whitespace runs collapsed to one space, spaces next to punctuation
    dropped, ends stripped.

    Marks and invisible characters change no letter a reader reads as the text, so
    a copy with them sprinkled between letters is still the same text (accents go
    too: ``café`` is ``cafe``).  Idempotent: ``normalise(normalise(t)) ==
    normalise(t)``.  One step can undo another (casefolding can leave text NFKC
    would change again, a decoded reference can be a mark, dropped spaces can join
    ``& amp;`` into a reference), so the steps repeat until the text no longer
    changes.
    """
    return normalise_piece(text)[0]


def normalise_piece(text: str) -> tuple[str, bool]:
    """``normalise(text)``, and whether one pass made it (its first pass left no ``&``
    that a second could join into a reference): only such pieces may be joined after
    they were normalised apart (``join_normalised``)."""
    out = _once(text)
    if "&" not in out:  # nothing left that a second pass could change
        return out, True
    while True:
        again = _once(out)
        if again == out:
            return out, False
        out = _once(again)
        if "&" not in out:
            return out, False


def join_normalised(pieces: Sequence[tuple[str, bool]]) -> str | None:
    """``normalise`` of texts joined by whitespace (``_SEP`` or a space), from each
    text's ``normalise_piece``; None when a piece needed a second pass.

    A pass changes each text on its own: a reference, a composed character or a
    markdown mark cannot span the whitespace between two texts (``html.unescape`` stops
    at it, nothing composes with it), and the join is folded like any run of spaces,
    dropped beside punctuation.  So the whole's one pass is the pieces' passes joined
    by one space, none where either side is punctuation, and it leaves no ``&``.  A
    piece with ``&`` left after its first pass may join a reference across the space
    (``& amp;``): the caller normalises the joined text instead."""
    out = ""
    for text, one_pass in pieces:
        if not one_pass:
            return None
        if text:
            if out and not (_is_punctuation(out[-1]) or _is_punctuation(text[0])):
                out += " "
            out += text
    return out


_ASCII_P_SET = frozenset(_ASCII_P)


def _is_punctuation(c: str) -> bool:
    """Category P, as the space-dropping step sees it (``_ASCII_P``, ``_classes``)."""
    return c in _ASCII_P_SET if c.isascii() else unicodedata.category(c)[0] == "P"


_PLAIN = (string.ascii_lowercase + string.digits + " ").encode()
"""Lower-case ASCII letters, digits and the space: text of these alone has nothing but
runs of spaces for ``_once`` to change."""


def _once(text: str) -> str:
    if text.isascii():
        text = text.lower()
        if not text.encode().translate(None, _PLAIN):  # the loop below would only fold spaces
            return text.strip(" ") if "  " not in text else " ".join(text.split())
    astral = False
    while True:
        if text.isascii():  # no marks, no format characters; NFKC leaves it as it is
            text = text.lower()
        else:
            astral = astral or max(text) > "\uffff"
            invisible = _classes(astral)[0]
            previous = None
            while text != previous:
                previous = text
                text = invisible.sub("", unicodedata.normalize("NFKD", text))
                text = unicodedata.normalize("NFKC", text).translate(CONFUSABLES).casefold()
        if "*" in text or "_" in text or "`" in text or "~" in text:
            bare = _MARKUP.sub("", text)
            again = bare != text and not bare.isascii()  # e.g. jamo NFKC joins once bare
            text = bare
        else:
            again = False
        if "&" in text:
            decoded = html.unescape(text)
            again, text = again or decoded != text, decoded
        if not again:
            break
    if (
        text.isascii()
        and "  " not in text
        and (text.isprintable() or not any(c in text for c in _ASCII_SPACES))
    ):  # printable ASCII holds no whitespace but the space
        text = text.strip(" ")  # one space between words already
    else:
        text = " ".join(text.split())  # str.split splits at what \s+ matches
    if " " not in text:
        return text
    if not text.isascii():
        return _classes(astral)[1].sub("", text)
    for p in _ASCII_P:  # as that pattern does, some five times faster: spaces are single
        if p in text:
            text = text.replace(" " + p, p).replace(p + " ", p)
    return text


def _turn_texts(content: Any) -> list[str]:
    """A chat turn's content: a string, or the text of its text parts."""
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    out = []
    for part in content:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict) and part.get("type", "text") == "text":
            if isinstance(part.get("text"), str):
                out.append(part["text"])
    return out


def _is_turns(node: Any) -> bool:
    return (
        isinstance(node, list)
        and bool(node)
        and all(isinstance(m, dict) and "content" in m for m in node)
    )


def _sorted_leaves(node: Any) -> list[str]:
    """Every string leaf, dict keys in sorted order (list items keep theirs)."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        keys = sorted(node, key=lambda k: (not isinstance(k, str), str(k)))
        return [s for k in keys for s in _sorted_leaves(node[k])]
    if isinstance(node, (list, tuple)):
        return [s for item in node for s in _sorted_leaves(item)]
    return []


def field_texts(value: Any, key: str, setup: bool) -> list[str]:
    """The strings under ``key`` of one record: a chat's turn texts (without the
    system and developer turns unless ``setup``), or every string leaf in key order."""
    node = value.get(key) if isinstance(value, dict) else None
    if node is None:
        return []
    if _is_turns(node):
        return [
            s
            for m in node
            if setup or not (isinstance(m.get("role"), str) and m["role"].lower() in _SETUP_ROLES)
            for s in _turn_texts(m["content"])
        ]
    return _sorted_leaves(node)


def record_text(value: Any, fields: Sequence[str] = (), *, setup: bool = True) -> str:
    """The text of one record (``recordio.Record.value``), fields joined by a newline.

    ``setup``: whether system and developer turns count (they do for a record's
    length; ``task_text`` leaves them out)."""
    if isinstance(value, str):
        return value
    if fields:
        return _SEP.join(s for key in fields for s in field_texts(value, key, setup))
    if isinstance(value, dict):
        for group in DEFAULT_FIELDS:
            if any(key in value for key in group):
                return _SEP.join(s for key in group for s in field_texts(value, key, setup))
    return _SEP.join(_sorted_leaves(value))


def task_text(value: Any, fields: Sequence[str] = ()) -> str:
    """The text the leakage check compares: ``record_text`` without the system and
    developer turns, which many records share and a copy may drop or replace."""
    return record_text(value, fields, setup=False)


_ANSWER_ROLES = frozenset({"assistant", "model", "gpt", "bot"})
"""Chat turns that carry the answer: not part of a record's input."""
_ANSWER_KEYS = frozenset({
    "answer", "answers", "category", "chosen", "class", "completion", "label", "labels",
    "output", "rejected", "response", "target",
})  # fmt: skip
"""Keys (columns) of a record of no known shape that hold its answer or label."""


def input_pieces(value: Any, fields: Sequence[str] = ()) -> list[str]:
    """The parts of a record that carry its input, each on its own: the user (and
    tool) turns of a chat, its ``prompt``, an Alpaca ``instruction`` and ``input``,
    its ``text``; for a record of no known shape, every string leaf but those under
    an answer or label key (``_ANSWER_KEYS``).  With ``fields``, every leaf of the
    named keys but a chat's answer turns.  A copy whose answer or label was changed
    has the same pieces; a piece pasted into a longer text is found inside it."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, dict):
        return _sorted_leaves(value)
    keys = list(fields)
    if not keys:
        group = next((g for g in DEFAULT_FIELDS if any(k in value for k in g)), ())
        keys = [k for k in group if k not in ("completion", "output")]
    if not keys:
        keys = sorted(k for k in value if isinstance(k, str) and k.lower() not in _ANSWER_KEYS)
    out: list[str] = []
    for key in keys:
        node = value.get(key)
        if isinstance(node, list) and _is_turns(node):
            for m in node:
                role = m.get("role")
                role = role.lower() if isinstance(role, str) else ""
                if role not in _SETUP_ROLES and role not in _ANSWER_ROLES:
                    out += _turn_texts(m["content"])
        elif node is not None:
            out += _sorted_leaves(node)
    return out


def shingle_list(normalised: str, words: int = SHINGLE_WORDS) -> list[str]:
    """The ``words``-word shingles of normalised text in order, repeats kept (a MinHash
    of the list equals that of the set; building no set is faster)."""
    tokens = normalised.split(" ")
    if len(tokens) <= words:
        return [normalised] if normalised else []
    if words == 3:  # the usual width, without the generator
        return list(map(" ".join, zip(tokens, tokens[1:], tokens[2:], strict=False)))
    return list(map(" ".join, zip(*(tokens[i:] for i in range(words)), strict=False)))


def shingles(normalised: str, words: int = SHINGLE_WORDS) -> set[str]:
    """The set of ``words``-word shingles of normalised text (the whole text when shorter)."""
    return set(shingle_list(normalised, words))


def jaccard(a: set[str] | frozenset[str], b: set[str] | frozenset[str]) -> float:
    """Exact Jaccard similarity of two shingle sets (1.0 for two empty sets)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)
