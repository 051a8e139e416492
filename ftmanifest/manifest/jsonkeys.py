"""JSON objects whose keys are unique: the one ``object_pairs_hook`` to parse with.

Layer: pure core - manifest (pure; no runtime ``typing``, it is on the lint path).  The
standard ``json`` module keeps the last of two equal keys; a reader that
trusts the first would see another document, so every parser here refuses
them.  Each caller says which exception names the duplicate.
"""

from __future__ import annotations

TYPE_CHECKING = False  # no runtime `typing` on the lint path (see findings.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    PairsHook = Callable[[list[tuple[str, Any]]], dict[str, Any]]


def unique_keys(on_duplicate: Callable[[str], Exception]) -> PairsHook:
    """An ``object_pairs_hook`` that raises ``on_duplicate(key)`` at a repeated key."""

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise on_duplicate(key)
            out[key] = value
        return out

    return hook
