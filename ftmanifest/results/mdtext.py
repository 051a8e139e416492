"""Text made safe for the Markdown a hand-off is read in: escapes and no machine paths.

Layer: judging rooms - pure core.  The handoff Markdown (``report``) and the model card
(``modelcard``) both render untrusted values through these, so one escape
rule and one path rule hold for every readable file a hand-off carries.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

_MD_SPECIAL = set("\\`*_{}[]<>|!&#")
# What GFM's autolink extension turns into a link in plain text.
_AUTOLINK = re.compile(
    r"(?i)(?:\b(?:https?|ftp)://|\bwww\.|\b(?:mailto|xmpp):)\S*|[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
)


def num(value: object, digits: int = 3) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "n/a" if value is None else str(value)
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def md(value: object) -> str:
    """Free text for Markdown: no emphasis, link, HTML or table cell break survives.

    GitHub-flavoured Markdown also links bare URLs, ``www.`` names and e-mail
    addresses in plain text (its autolink extension), which no escape stops:
    those are set as code spans, where nothing is a link.
    """
    text = "n/a" if value is None else str(value)
    out, pos = [], 0
    for m in _AUTOLINK.finditer(text):
        out.append(_escape_md(text[pos : m.start()]))
        out.append(code(m.group()))
        pos = m.end()
    out.append(_escape_md(text[pos:]))
    return "".join(out)


def _escape_md(text: str) -> str:
    return "".join("\\" + c if c in _MD_SPECIAL else c for c in text)


def code(value: object) -> str:
    """A value as a Markdown code span: nothing inside is interpreted."""
    if value is None:
        return "n/a"
    text = str(value).replace("|", "\\|")
    fence = "`" * (max((len(r) for r in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


# An absolute POSIX path in a value or inside a sentence: a slash that follows no
# word, path or URL character, up to the next space, quote or separator.
_ABSOLUTE = re.compile(r"(?<![\w.~/:@-])/[^\s\"'`,;()<>|]+")
# The same path as a file URL (RFC 8089: file:/p, file:///p, file://host/p): the
# scheme and host go with it, the path is shortened as any other.
_FILE_URL = re.compile(r"(?i)\bfile:(?://([^/\s\"'`]*))?(/[^\s\"'`,;()<>|]*)")
# A Windows path (C:\Users\..., D:/data/...) or a network share (\\server\share\...),
# which a manifest written on Windows carries: only its last names are kept.
_FOREIGN = re.compile(r"(?<![\w\\/])(?:[A-Za-z]:[\\/]|\\\\)[^\s\"'`,;()<>|]+")
_KEPT = 2  # trailing components kept of a path outside the project and home


def portable(value: Any, base: str | None = None, home: str | None = None) -> Any:
    """``value`` with no absolute path of this machine in it, for the readable
    renderings a report is handed on with: a path under ``base`` (default: the
    working folder, where the audit's own relative paths start) becomes relative
    to it, one under ``home`` starts with ``~/``, any other keeps its last two
    names (at most) behind ``.../``; so do ``file:`` URLs, Windows drive paths and
    network shares.  Strings anywhere in dicts and lists are rewritten, sentences
    included; web addresses and relative paths are left as they are."""
    base = os.path.abspath(base or os.getcwd())
    home = os.path.abspath(home or os.path.expanduser("~"))

    def short_path(path: str) -> str:
        real = os.path.normpath(path)
        for root, lead in ((base, ""), (home, "~/")):
            for form in {root, os.path.realpath(root)}:
                if real == form:
                    return "." if not lead else "~"
                if real.startswith(form.rstrip("/") + "/"):
                    return lead + os.path.relpath(real, form)
        return ".../" + "/".join([n for n in real.split("/") if n][-_KEPT:])

    def file_url(match: re.Match[str]) -> str:
        host, path = match.group(1), match.group(2)
        if host not in (None, "", "localhost"):  # another machine's file: its last names
            return ".../" + "/".join([n for n in path.split("/") if n][-_KEPT:])
        return short_path(path)

    def foreign(match: re.Match[str]) -> str:
        return ".../" + "/".join([n for n in re.split(r"[\\/]", match.group()) if n][-_KEPT:])

    def short(match: re.Match[str]) -> str:
        return short_path(match.group())

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            item = _FILE_URL.sub(file_url, item)
            return _ABSOLUTE.sub(short, _FOREIGN.sub(foreign, item))
        if isinstance(item, Mapping):
            return {k: walk(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(v) for v in item]
        return item

    return walk(value)
