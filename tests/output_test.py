"""Text output never lets an untrusted string forge a line, the
verify table fits the terminal, wraps between words instead of cutting and
names the file, and a pipe gets every row on one line."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from ftmanifest.cli import main
from ftmanifest.errors import InputError, ManifestInvalidError
from ftmanifest.findings import Finding
from ftmanifest.output import (
    UNLIMITED,
    error_text,
    findings_json,
    findings_sarif,
    findings_table,
    lines,
    to_json,
)
from ftmanifest.safe_text import escape
from ftmanifest.signing.errors import UnknownKeyError
from ftmanifest.signing.keys import fingerprint, public_key_line
from ftmanifest.signing.sign import sign_manifest

BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
NASTY = [
    "\x1b[2J",
    "\x1b]0;title\x07",
    "\r",
    "\n",
    "\t",
    "\x00",
    "\x7f",
    "\x9b",
    "\x85",
    "\u2028",
    "\u2029",
    "\udcff",
    "\x0b",
    "\x1c",
    *BIDI,
    "data/x.py:1:1: ",
    "  path: ",
]
# Any string, surrogates included, with the characters that forge lines made common.
TEXT = st.lists(
    st.one_of(st.sampled_from(NASTY), st.characters(exclude_categories=())), max_size=20
).map("".join)
OPT_TEXT = st.none() | TEXT
DIGEST = "sha256:" + "1736" + "0" * 56 + "db9f"


def unsafe(text: str) -> list[str]:
    """An oracle independent of safe_text: controls, surrogates, line separators, BiDi."""
    return [c for c in text if unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp") or c in BIDI]


findings = st.builds(
    Finding,
    kind=st.sampled_from(["drift", "secret", "lint"]) | TEXT,
    rule=TEXT,
    message=TEXT,
    path=OPT_TEXT,
    line=st.none() | st.integers(0, 10**6),
    column=st.none() | st.integers(0, 999),
    field=OPT_TEXT,
    expected=OPT_TEXT,
    observed=OPT_TEXT,
    severity=st.sampled_from(["error", "warning", "info"]),
    hint=OPT_TEXT,
    excerpt=OPT_TEXT,
)


# --- escaping -----------------------------------------------------------------


def test_escape_shows_controls_literally() -> None:
    assert escape("a\x1b[31mb") == "a\\x1b[31mb"
    assert escape("x\ny\rz\t") == "x\\ny\\rz\\t"
    assert escape("\x07\x9b\u202e\u2028\udcff") == "\\x07\\x9b\\u202e\\u2028\\udcff"
    assert escape("héllo wörld ✓ 日本 C:\\x") == "héllo wörld ✓ 日本 C:\\x"


@given(st.lists(findings, max_size=4))
def test_finding_lines_are_one_line_each_and_safe(items: list[Finding]) -> None:
    out = lines(items)
    assert not unsafe(out.replace("\n", ""))
    rows = out.split("\n")
    assert rows[-1] == "" and len(rows) == len(items) + 1
    for row, f in zip(rows, items, strict=False):
        assert row.startswith(escape(f.location()) + ": ")
        row.encode("utf-8")  # a lone surrogate would raise here, mid-print


@given(st.lists(findings, min_size=1, max_size=4), st.integers(40, 220))
def test_table_rows_cannot_be_forged(items: list[Finding], width: int) -> None:
    """Only the header, the rule and each row's first line start at column 0;
    every continuation or path line starts with a space."""
    out = findings_table(items, width=width)
    assert not unsafe(out.replace("\n", ""))
    starts = [line for line in out.splitlines() if not line.startswith(" ")]
    assert len(starts) == len(items) + 2
    assert starts[0].startswith(("field", "loc")) and starts[1].startswith("---")
    for line, f in zip(starts[2:], items, strict=True):
        key = escape(f.field or f.location()) if f.kind == "drift" else escape(f.location())
        assert line[:1] == key.replace(" ", "\\x20")[:1] or key == "" and line[:1] == "-"


@given(
    TEXT,
    OPT_TEXT,
    st.none() | st.integers(1, 99),
    OPT_TEXT,
    OPT_TEXT,
    OPT_TEXT,
    OPT_TEXT,
)
def test_error_render_is_safe(
    message: str,
    path: str | None,
    line: int | None,
    field: str | None,
    expected: str | None,
    observed: str | None,
    hint: str | None,
) -> None:
    facts = (observed is not None) + bool(hint) + 1  # + 1: the reason code, always named
    errors = (
        (InputError(message, path=path, line=line, field=field, expected=expected,
                    observed=observed, hint=hint), facts + bool(field) + (expected is not None)),
        (UnknownKeyError(message, path=path, observed=observed, hint=hint), facts),
    )  # fmt: skip
    for error, n_details in errors:
        text = error_text(error)
        assert not unsafe(text.replace("\n", ""))
        # The CLI prints it after "ftmanifest: error: "; only the details add lines.
        _, *details = text.split("\n")
        assert len(details) == n_details
        labels = ("  field: ", "  expected: ", "  observed: ", "  fix: ", "  reason: ")
        assert all(d.startswith(labels) for d in details)


@given(st.lists(findings, min_size=1, max_size=3))
def test_invalid_manifest_error_renders_one_line_per_problem(items: list[Finding]) -> None:
    text = error_text(ManifestInvalidError("invalid", problems=items))
    assert not unsafe(text.replace("\n", "")) and len(text.split("\n")) == len(items)


def test_cli_error_escapes_a_hostile_file_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = tmp_path / "m\x1b[2J\nsrc/evil.py:1:1: FTM000 all clear\u202e.yaml"
    assert main(["verify", str(name), "--no-signature"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\u202e" not in err and "\\x1b[2J\\nsrc/evil.py" in err
    first, *rest = err.rstrip("\n").split("\n")
    assert first.startswith("ftmanifest: error: ") and all(r.startswith("  ") for r in rest)


@given(st.lists(findings, max_size=3))
def test_json_and_sarif_stay_exact_and_writable(items: list[Finding]) -> None:
    out = findings_json(items)
    out.encode("utf-8")
    assert json.loads(out)["findings"] == [f.to_dict() for f in items]
    sarif = findings_sarif(items)
    sarif.encode("utf-8")
    assert [r["ruleId"] for r in json.loads(sarif)["runs"][0]["results"]] == [f.rule for f in items]


def test_json_keeps_c1_and_bidi_as_they_are() -> None:
    assert to_json("a\x9b\u202eb") == '"a\x9b\u202eb"\n'


# --- the verify table ---------------------------------------------------------


def _drift(**kw: str) -> Finding:
    base = {
        "kind": "drift",
        "rule": "drift.data",
        "message": "data 'train' changed",
        "path": "data/train.jsonl",
        "field": "data[0].digest",
        "expected": DIGEST,
        "observed": "sha256:" + "9d66" + "1" * 56 + "98f6",
        "hint": "restore the pinned data, or re-lock after review",
    }
    return Finding(**{**base, **kw})  # type: ignore[arg-type]


def test_wide_terminal_shows_whole_digests_and_the_path() -> None:
    out = findings_table([_drift()], width=220)
    assert DIGEST in out and "…" not in out
    assert out.splitlines()[3] == "  path: data/train.jsonl"
    assert max(len(line) for line in out.splitlines()) <= 220


def test_narrow_terminal_shortens_digests_in_the_middle_and_wraps_the_fix() -> None:
    hint = "restore the pinned data, or re-lock after review: " + "ftmanifest lock M " * 4
    out = findings_table([_drift(hint=hint)], width=100)
    assert "sha256:1736…db9f" in out and DIGEST not in out
    assert max(len(line) for line in out.splitlines()) <= 100
    assert " ".join(out.split()).count("ftmanifest lock M") == 4  # every word, none cut
    assert "data/train.jsonl" in out


def test_very_narrow_terminal_moves_the_fix_under_the_row() -> None:
    out = findings_table([_drift()], width=70)
    assert out.splitlines()[0].split() == ["field", "expected", "observed", "severity"]
    assert "  fix:  restore the pinned data, or re-lock after review" in out.splitlines()
    assert "  path: data/train.jsonl" in out.splitlines()


def test_columns_env_sets_the_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "220")
    assert DIGEST in findings_table([_drift()])
    monkeypatch.setenv("COLUMNS", "90")
    assert DIGEST not in findings_table([_drift()])


WORD = st.text("abc.[]0/_", min_size=1, max_size=10)  # short words: a table can fit them


@given(
    st.lists(
        st.builds(
            _drift,
            field=st.lists(WORD, min_size=1, max_size=6).map(" ".join),
            expected=st.lists(WORD, max_size=9).map(" ".join) | st.just(DIGEST),
            hint=st.text("fix it now ", max_size=200),
            path=st.lists(WORD, min_size=1, max_size=15).map(" ".join),
        ),
        min_size=1,
        max_size=4,
    ),
    st.integers(60, 250),
)
def test_table_of_short_words_fits_the_width_and_cuts_nothing_but_digests(
    items: list[Finding], width: int
) -> None:
    out = findings_table(items, width=width)
    assert max(len(line) for line in out.splitlines()) <= width
    assert out.count("…") <= sum(f.expected == DIGEST for f in items) + len(items)
    words = set(out.split())
    for f in items:
        assert set((f.field or "").split()) | set((f.path or "").split()) <= words


@given(
    st.lists(
        st.builds(
            _drift,
            field=st.text("abc.[]0_ ", min_size=1, max_size=60),
            expected=st.text("xyz ", max_size=90) | st.just(DIGEST),
            hint=st.text("fix it now ", max_size=200),
            path=st.text("ab/ ", min_size=1, max_size=150),
        ),
        min_size=1,
        max_size=4,
    ),
    st.integers(40, 250) | st.just(UNLIMITED),
)
def test_no_width_splits_a_word(items: list[Finding], width: int) -> None:
    """A field name, a path or a digest too long for its column overflows it
    instead of being cut in two: every word of every cell is a word
    of the output; a digest may only be shortened in the middle."""
    out = findings_table(items, width=width)
    words = set(out.split())
    for f in items:
        key = (f.field or "").lstrip(" ")
        key = "\\x20" * (len(f.field or "") - len(key)) + key  # a row never starts with a space
        for text in (key, f.path, f.hint):
            assert set((text or "").split()) <= words, (text, out)
        for text in (f.expected or "", f.observed or ""):
            short = re.sub(r"^(sha256:[0-9a-f]{4})[0-9a-f]{56}([0-9a-f]{4})$", r"\1…\2", text)
            assert set(text.split()) <= words or short in words, (text, out)
            if width == UNLIMITED:
                assert text in out


def test_signature_row_names_the_key_id(project: Path) -> None:
    from ftmanifest.manifest import load_manifest
    from ftmanifest.verify import verify_manifest

    stranger, trusted = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    trust = project.parent / ".ftmanifest" / "allowed_signers"
    trust.parent.mkdir(exist_ok=True)
    line = public_key_line(trusted.public_key(), "k")
    trust.write_text(f'me@example.org namespaces="ftmanifest" {line}\n')
    sign_manifest(project, load_manifest(project).canonical(), stranger)
    report = verify_manifest(project, trust_path=trust)
    [row] = [f for f in report.findings if f.field == "signature"]
    keyid = fingerprint(stranger.public_key())
    assert keyid in (row.observed or "") and row.observed != "unknown-key: unknown-key"
    assert keyid in findings_table([row], width=250)


def test_a_drift_error_renders_its_table_as_lines() -> None:
    from pathlib import Path

    from ftmanifest.findings import Finding
    from ftmanifest.verify import DriftError, VerifyReport

    row = Finding(
        kind="drift",
        rule="drift.data",
        message="changed",
        field="data[0].digest",
        expected="sha256:aa",
        observed="sha256:bb\x1b[2J",
        hint="restore it",
        path="data/train.jsonl",
    )
    report = VerifyReport(Path("exp\nforged.yaml"), "sha256:00", [row])
    text = error_text(DriftError(report), width=240)
    lines = text.splitlines()
    assert lines[0].startswith("exp\\nforged.yaml: 1 difference(s)")
    assert any(line.startswith("data[0].digest") for line in lines)
    assert "\x1b" not in text and lines[-2].startswith("  fix: fix them")
    assert lines[-1] == "  reason: drift"  # every error names its stable code


# --- output a machine reads ----------------------------------------

LONG_FIELD = "environment.env_vars.CUBLAS_WORKSPACE_CONFIG"


def _env_drift() -> Finding:
    return _drift(
        rule="drift.environment",
        message="env var changed",
        path=None,
        field=LONG_FIELD,
        expected=":4096:8",
        observed=":16:8",
        hint="export CUBLAS_WORKSPACE_CONFIG=':4096:8' (or re-lock after review)",
    )


def test_a_pipe_is_not_fitted_unless_columns_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from ftmanifest.output import terminal_width

    read, write = os.pipe()
    with open(read) as r, open(write, "w") as w:
        monkeypatch.delenv("COLUMNS", raising=False)
        assert terminal_width(w) == UNLIMITED
        assert terminal_width(r) == UNLIMITED
        for junk in ("", "0", "wide", "-5"):
            monkeypatch.setenv("COLUMNS", junk)
            assert terminal_width(w) == UNLIMITED
        monkeypatch.setenv("COLUMNS", "77")
        assert terminal_width(w) == 77


def test_a_terminal_is_fitted_to_its_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    import fcntl
    import pty
    import struct
    import termios

    from ftmanifest.output import terminal_width

    monkeypatch.delenv("COLUMNS", raising=False)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 123, 0, 0))
    with open(leader, "rb", buffering=0), open(follower, "w") as tty:
        assert terminal_width(tty) == 123
        monkeypatch.setenv("COLUMNS", "61")  # COLUMNS wins, as for every tool
        assert terminal_width(tty) == 61


def test_unlimited_puts_every_row_and_note_on_one_line() -> None:
    rows = [_env_drift(), _drift(path="data/" + "deep/" * 30 + "train.jsonl")]
    out = findings_table(rows, width=UNLIMITED)
    lines = out.splitlines()
    assert len(lines) == 2 + 2 + 1  # header, rule, two rows, one path note
    assert lines[2].split()[:3] == [LONG_FIELD, ":4096:8", ":16:8"]
    assert lines[2].endswith(rows[0].hint or "")
    assert lines[3].split()[:3] == ["data[0].digest", DIGEST, rows[1].observed]
    assert lines[4] == "  path: " + (rows[1].path or "")


def test_tables_on_a_pipe_are_not_fitted(monkeypatch: pytest.MonkeyPatch) -> None:
    from ftmanifest.output import table

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr("sys.stdout", io.StringIO())  # what stdout is under `| cat`
    out = findings_table([_env_drift()] * 3)
    assert [line.split()[0] for line in out.splitlines()[2:]] == [LONG_FIELD] * 3
    words = "a plain message of many words " * 8
    assert len(table([("x", words)], ("key", "text")).splitlines()) == 3


def test_a_narrow_terminal_never_splits_a_word() -> None:
    """A word longer than its room overflows; lines break only at spaces."""
    for width in (40, 50, 60, 80, 100):
        out = findings_table(
            [_env_drift(), _drift(path="data/" + "x" * 80 + ".jsonl")], width=width
        )
        words = out.split()
        assert LONG_FIELD in words and "CUBLAS_WORKSPACE_CONFIG=':4096:8'" in words
        assert "data/" + "x" * 80 + ".jsonl" in words
        assert "  path: data/xxx" in out  # a note's label stays with its word
        assert [line for line in out.splitlines() if line.startswith(LONG_FIELD)]


def test_verify_piped_keeps_a_long_field_name_on_one_line(project: Path) -> None:
    """``ftmanifest verify M | cat``: a CI log gets each drift row on one line,
    so ``grep FIELD`` finds the field with its expected and observed values."""
    env = {**os.environ, "CUBLAS_WORKSPACE_CONFIG": ":16:8"}
    env.pop("COLUMNS", None)
    env.pop("FTMANIFEST_DEBUG", None)
    command = f"{shlex.quote(sys.executable)} -m ftmanifest verify {shlex.quote(str(project))}"
    result = subprocess.run(
        f"{command} --no-signature | cat",
        shell=True,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "REFUSED" in result.stdout, result.stdout + result.stderr
    [row] = [line for line in result.stdout.splitlines() if LONG_FIELD in line]
    assert row.split()[:4] == [LONG_FIELD, ":4096:8", ":16:8", "error"], result.stdout
