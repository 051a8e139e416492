"""Builders for secret rules by shape: a prefixed token, or a provider's word next
to a value of its shape.

Layer: judging rooms - pure core (scan rules).  Shared by ``secret_formats`` and
``secret_providers`` so that every format rule is built the same way: a literal
keyword, a window regex, a Hyperscan gate where the keyword alone is common.
"""

from __future__ import annotations

from ftmanifest.scan.text import secrets as v
from ftmanifest.scan.text.secret_rules import Rule

UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# Key, then an assignment of any common syntax: ``=``, ``:``, ``:=``, ``::=``, ``?=``,
# ``.=``, ``=>``, a call's ``"KEY", "value"``, an XML element's ``>``, a Go type.
ASSIGN = (
    r"[\w.\-]{0,40}?[\"'`]?\s{0,3}(?:[A-Za-z]{1,8}\s{1,3})?"
    r"(?::{1,3}=|\?=|\.=|=>|=|:|,|>)\s{0,12}[\"'`]?"
)
# Where a token can start: after the characters ``provider_token`` accepts before
# one, so a gate using it never drops a finding the validator would keep.
LEFT = r"(?:^|[^A-Za-z0-9_\-])"


def prefixed(
    rid: str,
    description: str,
    regex: str,
    keywords: tuple[str, ...],
    tp: tuple[str, ...],
    fp: tuple[str, ...],
    **kw: object,
) -> Rule:
    """A token recognised by its own prefix; the window covers the longest form."""
    kw.setdefault("fwd", 160)
    kw.setdefault("validator", v.provider_token)
    return Rule(rid, "secret", description, regex, keywords, true_positives=tp,
                false_positives=fp, **kw)  # type: ignore[arg-type]  # fmt: skip


def keyed(
    rid: str,
    description: str,
    words: tuple[str, ...],
    value: str,
    tp: tuple[str, ...],
    fp: tuple[str, ...],
    *,
    credential_word: bool = False,
) -> Rule:
    """A provider's word, an assignment, then a value of the provider's shape."""
    head = "(?:" + "|".join(words) + ")" + ASSIGN
    return Rule(
        rid,
        "secret",
        description,
        head + "(" + value + r")(?![\w\-])",
        words,
        validator=v.keyed_credential if credential_word else v.keyed_value,
        gate=head + value[:40] if "{" not in value[:40] else head + "[0-9A-Za-z]",
        gate_len=130,
        group=1,
        fwd=200,
        ignore_case=True,
        true_positives=tp,
        false_positives=fp,
    )
