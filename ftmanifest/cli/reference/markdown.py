"""Markdown pieces shared by the generated reference pages.

Layer: commands - edge (rendering only; no imports from the rest of the package).
"""

from __future__ import annotations

GENERATED = "<!-- generated from the code by `make docs`; do not edit by hand -->"

# Characters that start Markdown markup inside running text.  Backticks stay:
# help texts quote commands in them, which renders as code, as meant.  ``_``
# stays too: GitHub's Markdown does not emphasise inside a word (data_checks).
_MARKUP = str.maketrans({"\\": "\\\\", "*": "\\*", "<": "\\<", ">": "\\>"})


def escape(text: str, *, table: bool = False) -> str:
    """``text`` as literal Markdown, outside its backtick spans (and ``|`` in a table)."""
    out = []
    for i, part in enumerate(text.split("`")):
        if i % 2 == 0:
            part = part.translate(_MARKUP)
        if table:
            part = part.replace("|", "\\|")
        out.append(part)
    return "`".join(out)


def code(text: str) -> str:
    """``text`` as one inline code span, whatever backticks it holds."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def text_blocks(text: str) -> list[str]:
    """A ``--help`` description as Markdown lines: wrapped prose becomes a
    paragraph; a block with indented lines (a list, a table) stays as written."""
    lines: list[str] = []
    for block in text.strip("\n").split("\n\n"):
        rows = block.splitlines()
        if any(r.startswith((" ", "\t")) for r in rows):
            lines += ["```text", *(r.rstrip() for r in rows), "```", ""]
        else:
            lines += [escape(" ".join(r.strip() for r in rows)), ""]
    return lines
