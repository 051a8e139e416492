"""One record's texts from one walk of it, each field normalised once.

Layer: judging rooms - data core (pure; no I/O).  The leakage check's first pass asks
three texts of every record: its task text (``text.task_text``, signed), its whole text
(``text.record_text``: searched for contained items, its length counted by the
statistics) and its input (``text.input_pieces``, compared whole).  Asked of ``text``
one by one, that is three walks of the record and, for a chat, the user's turn
normalised twice.  ``RecordTexts`` walks a chat record (``messages``, no ``fields``)
once, sorting each turn's texts into the three, and normalises each distinct turn text
once; the normalised task, whole and input are those turns' normalised texts joined
(``text.join_normalised``, exact: where a join could differ from normalising the
joined text, the joined text is normalised instead).  A record of another shape gets
each text from ``text``'s own function, as before.  What each gives is what the
functions of ``text`` give (``tests/data/walk_test.py`` checks it on adversarial
records and text).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ftmanifest.data.text import (
    _ANSWER_ROLES,
    _SEP,
    _SETUP_ROLES,
    _turn_texts,
    input_pieces,
    join_normalised,
    normalise,
    normalise_piece,
    record_text,
    shingle_list,
    task_text,
)


def _chat(value: Any, fields: Sequence[str]) -> tuple[list[str], list[str], list[str]] | None:
    """(task, whole, input) texts of a chat record read with the default fields, in one
    walk; None for any other record.  ``record_text`` and ``input_pieces`` take the
    ``messages`` group whenever the key is there, and a list of turns (``_is_turns``)
    turn by turn."""
    if fields or not isinstance(value, dict):
        return None
    node = value.get("messages")
    if not isinstance(node, list) or not node:
        return None
    whole: list[str] = []
    task: list[str] = []
    pieces: list[str] = []
    setup = False
    for m in node:
        if not isinstance(m, dict) or "content" not in m:
            return None  # not a list of turns
        content = m["content"]
        texts = [content] if isinstance(content, str) else _turn_texts(content)
        role = m.get("role")
        role = role.lower() if isinstance(role, str) else ""
        whole += texts
        if role in _SETUP_ROLES:
            setup = setup or bool(texts)
        else:
            task += texts
            if role not in _ANSWER_ROLES:
                pieces += texts
    return task, whole if setup else task, pieces


class RecordTexts:
    """The task, whole and input texts of one record, as read and normalised, computed
    when first asked.  ``cut``: the normalised task text's shingles, when the caller
    has cut them (reused for the whole text when it is the same)."""

    __slots__ = ("value", "fields", "_parts", "_norms", "_raw", "_task", "_whole", "_input", "cut")
    _raw: str | None
    _task: str | None
    _whole: str | None
    _input: str | None

    def __init__(self, value: Any, fields: Sequence[str] = ()) -> None:
        self.value = value
        self.fields = fields if isinstance(fields, tuple) else tuple(fields)
        self._parts = _chat(value, self.fields)
        self._norms: dict[str, tuple[str, bool]] = {}
        self._raw = self._task = self._whole = self._input = None
        self.cut: list[str] | None = None

    # -- as read ---------------------------------------------------------------------

    @property
    def task_raw(self) -> str:
        """``text.task_text`` of the record."""
        if self._raw is None:
            parts = self._parts
            self._raw = task_text(self.value, self.fields) if parts is None else _SEP.join(parts[0])
        return self._raw

    @property
    def whole_length(self) -> int:
        """``len(text.record_text(...))``: the characters the statistics count."""
        if self._parts is None:
            return len(record_text(self.value, self.fields))
        whole = self._parts[1]
        return sum(map(len, whole)) + max(0, len(whole) - 1)

    @property
    def pieces(self) -> list[str]:
        """``text.input_pieces`` of the record."""
        if self._parts is None:
            return input_pieces(self.value, self.fields)
        return self._parts[2]

    # -- normalised ------------------------------------------------------------------

    def piece(self, raw: str) -> str:
        """``normalise(raw)``, once per distinct text of this record."""
        return self._norm(raw)[0]

    def _norm(self, raw: str) -> tuple[str, bool]:
        done = self._norms.get(raw)
        if done is None:
            done = self._norms[raw] = normalise_piece(raw)
        return done

    def _joined(self, texts: list[str], sep: str) -> str:
        """``normalise(sep.join(texts))``."""
        if len(texts) == 1:
            return self._norm(texts[0])[0]
        out = join_normalised([self._norm(t) for t in texts])
        return normalise(sep.join(texts)) if out is None else out

    @property
    def task(self) -> str:
        """``normalise(text.task_text(...))``."""
        if self._task is None:
            if self._parts is None:
                self._task = self._norm(self.task_raw)[0]
            else:
                self._task = self._joined(self._parts[0], _SEP)
        return self._task

    @property
    def whole(self) -> str:
        """``normalise(text.record_text(...))``."""
        if self._whole is None:
            if self._parts is None:
                raw = record_text(self.value, self.fields)
                self._whole = self.task if raw == self.task_raw else self._norm(raw)[0]
            elif self._parts[1] is self._parts[0]:
                self._whole = self.task
            else:
                self._whole = self._joined(self._parts[1], _SEP)
        return self._whole

    @property
    def whole_cut(self) -> list[str]:
        """``text.shingle_list`` of the normalised whole text."""
        whole = self.whole
        if self.cut is not None and whole == self.task:
            return self.cut
        return shingle_list(whole)

    @property
    def input(self) -> str:
        """``normalise(" ".join(text.input_pieces(...)))``: the whole input."""
        if self._input is None:
            pieces = self.pieces
            self._input = self._joined(pieces, " ") if pieces else normalise("")
        return self._input
