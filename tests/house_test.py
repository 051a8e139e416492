"""Code and docs speak for themselves: no "(issue N)" citing a tracker a reader cannot open.

A comment, docstring or page says what the code guards against or how it behaves;
a number in a tracker outside the repository says nothing to the next reader.  An
issue of a public project, named with its repository (``owner/repo issue #N``), is a
source anyone can open and stays allowed.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("ftmanifest", "tests", "docs", "benchmarks")
SUFFIXES = {".py", ".md", ".txt", ".toml", ".yaml", ".yml", ".json", ".sh", ".cfg", ".ini"}
CITATION = re.compile(r"(?<![\w.-]/[\w.-])(?<!\w)(?P<cite>issues?[ -]#?\d+)", re.IGNORECASE)
PUBLIC = re.compile(r"[\w.-]+/[\w.-]+ issues? #?\d+", re.IGNORECASE)


def _citations(text: str) -> list[str]:
    """The tracker citations in ``text``, less those naming a public repository."""
    public = {m.end() for m in PUBLIC.finditer(text)}
    return [m.group("cite") for m in CITATION.finditer(text) if m.end() not in public]


def test_no_file_cites_an_issue_number() -> None:
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in SUFFIXES or "__pycache__" in path.parts or not path.is_file():
                continue
            for n, line in enumerate(path.read_text("utf-8", errors="replace").splitlines(), 1):
                if _citations(line):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "say what the code guards against instead:\n" + "\n".join(found)


def test_the_check_sees_a_citation_and_lets_a_public_one_pass() -> None:
    word = "iss" + "ue"  # spelled apart, so this file passes its own check
    assert _citations(f"refuse a second key ({word} 28, item 3).") == [f"{word} 28"]
    assert _citations(f"{word.title()} 9's forms: a grouped card") == [f"{word.title()} 9"]
    assert _citations(f"see {word}s #12") == [f"{word}s #12"]
    assert _citations(f"ROCm/rocm_smi_lib {word} #159, vendored") == []
    assert _citations("the tissue 3 samples, reissued 4 times") == []
    assert _citations(f"every {word}-9 form") == [f"{word}-9"]
