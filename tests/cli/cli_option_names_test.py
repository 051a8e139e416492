"""Every option name means one thing, of one kind, in every command that takes it.

The table below keeps each shared long option's kind (takes a value, or a flag)
and a phrase its help text must carry in every command: a name that starts to
mean something else somewhere shows as a help text without the phrase.  An
option taken by two commands or more must be in the table, so a new shared name
gets a meaning on purpose.  Old spellings (``OLD_OPTIONS``) are hidden aliases
that still parse, with one note on stderr naming the new spelling.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ftmanifest.cli import OLD_OPTIONS, build_parser, main

# option -> (kind, a phrase every command's help text for it carries)
MEANINGS: dict[str, tuple[str, str]] = {
    "--accept": ("value", "accept the drift"),
    "--add-trust": ("flag", "allowed signers"),
    "--allow-outside": ("flag", "outside the manifest"),
    "--archive-passphrase": ("flag", "passphrase"),
    "--archive-passphrase-env": ("value", "passphrase"),
    "--baseline": ("value", "the baseline to compare against"),
    "--code": ("value", "training code folder"),
    "--distributed": ("flag", "under torchrun"),
    "--dry-run": ("flag", "nothing"),
    "--force": ("flag", "replace"),
    "--format": ("value", "output format"),
    "--help": ("flag", "help"),
    "--identity": ("value", "identity"),
    "--jobs": ("value", "processes"),
    "--key": ("value", "key"),
    "--ledger": ("value", "ledger"),
    "--manifest": ("value", "manifest"),
    "--no-cache": ("flag", "every file"),
    "--no-scan": ("flag", "skip the data scan"),
    "--no-signature": ("flag", "skip the signature check"),
    "--out": ("value", "write"),
    "--passphrase-env": ("value", "key"),
    "--per-category": ("value", "per category"),
    "--quiet": ("flag", "no progress line"),
    "--rank-timeout": ("value", "seconds"),
    "--reason": ("value", "why"),
    "--seed": ("value", "seed"),
    "--split": ("value", "data entry"),
    "--threshold": ("value", "trusted"),
    "--trust": ("value", "allowed signers"),
}

# Spellings of "write the output here" that are not --out.
NOT_OUT = {"--to", "--write", "--html", "--output", "--report", "--dest"}
PENDING: set[tuple[str, str]] = set()  # (command, option) renamed by a change in flight


def commands(
    parser: argparse.ArgumentParser, path: str = ""
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    seen: set[int] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # an alias names the same parser
                    seen.add(id(sub))
                    yield from commands(sub, f"{path} {name}".strip())


def options(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.Action]]:
    """(long name, action) for every option the parser shows: old spellings left out."""
    for action in parser._actions:
        if getattr(action, "replaced_by", None):
            continue
        for name in action.option_strings:
            if name.startswith("--"):
                yield name, action


def kind(action: argparse.Action) -> str:
    return "flag" if action.nargs == 0 else "value"


ALL = list(commands(build_parser()))


def test_each_shared_option_has_one_kind_and_one_meaning() -> None:
    taken: dict[str, list[tuple[str, argparse.Action]]] = {}
    for path, parser in ALL:
        for name, action in options(parser):
            taken.setdefault(name, []).append((path, action))
    wrong = []
    for name, uses in sorted(taken.items()):
        if len(uses) > 1 and name not in MEANINGS and name != "--version":
            wrong.append(f"{name}: taken by {[p for p, _ in uses]}, give it a meaning here")
            continue
        if name not in MEANINGS:
            continue
        want_kind, phrase = MEANINGS[name]
        dests = {a.dest for _, a in uses}
        if len(dests) > 1:
            wrong.append(f"{name}: stored as {sorted(dests)}")
        for path, action in uses:
            if kind(action) != want_kind:
                wrong.append(f"{path} {name}: a {kind(action)}, elsewhere a {want_kind}")
            said = f"{action.help} {action.metavar}".lower().replace("_", " ")
            if phrase.lower() not in said:
                wrong.append(f"{path} {name}: help {action.help!r} does not say {phrase!r}")
    assert wrong == []


def test_the_file_a_command_writes_is_out() -> None:
    wrong = []
    for path, parser in ALL:
        names = {n for n, _ in options(parser)}
        for name in sorted(names & NOT_OUT):
            if (path, name) not in PENDING:
                wrong.append(f"{path} {name}: write it as --out")
        for name, action in options(parser):
            if name == "--out" and "-o" not in action.option_strings:
                taken = "-o" in parser._option_string_actions
                wrong.append(f"{path} --out without -o" + (" (-o is taken)" if taken else ""))
    assert wrong == []


def test_every_command_takes_quiet_after_its_name() -> None:
    for path, parser in ALL:
        assert {"-q", "--quiet"} <= set(parser._option_string_actions), path


def test_old_options_name_real_options() -> None:
    """Each old spelling belongs to a command that has it, and its new spelling exists."""
    by_path = dict(ALL)
    for path, renames in OLD_OPTIONS.items():
        parser = by_path[path]
        for old, new in renames.items():
            alias = parser._option_string_actions[old]
            target = parser._option_string_actions[new]
            assert alias.replaced_by == new and alias.dest == target.dest, (path, old)
            assert alias.help == argparse.SUPPRESS  # not shown in --help


# (command line with the old spelling, the same with the new one)
OLD_AND_NEW = [
    (["keygen", "-f", "k", "--trust"], ["keygen", "-f", "k", "--add-trust"]),
    (["backup", "create", "p", "--to", "d"], ["backup", "create", "p", "--out", "d"]),
    (
        ["backup", "create", "p", "--passphrase-env", "V"],
        ["backup", "create", "p", "--archive-passphrase-env", "V"],
    ),
    (["backup", "create", "p", "--passphrase"], ["backup", "create", "p", "--archive-passphrase"]),
    (
        ["backup", "check", "d", "--passphrase-env=V"],
        ["backup", "check", "d", "--archive-passphrase-env=V"],
    ),
    (["restore", "b", "--to", "d"], ["restore", "b", "--out", "d"]),
    (
        ["restore", "b", "-o", "d", "--passphrase"],
        ["restore", "b", "-o", "d", "--archive-passphrase"],
    ),
    (["schema", "--write", "a", "--write", "b"], ["schema", "-o", "a", "--out", "b"]),
    (["preflight", "m", "--html", "x.html"], ["preflight", "m", "--out", "x.html"]),
    (
        ["audit", "r", "--manifest", "m", "--report", "d"],
        ["audit", "r", "--manifest", "m", "--out", "d"],
    ),
    (
        ["data", "check", "m", "--threshold", "0.5"],
        ["data", "check", "m", "--near-threshold", "0.5"],
    ),
]


@pytest.mark.parametrize(("old", "new"), OLD_AND_NEW, ids=lambda a: " ".join(a[:3]))
def test_an_old_spelling_parses_as_the_new_with_one_note(
    old: list[str], new: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    expected = vars(build_parser().parse_args(new))
    assert capsys.readouterr().err == ""  # the new spelling: no note
    got = vars(build_parser().parse_args(old))
    err = capsys.readouterr().err
    assert got == expected
    (note,) = err.splitlines()  # one note, even when the old spelling is given twice
    assert note.startswith("ftmanifest: note: `ftmanifest ") and "is deprecated" in note
    renamed = [t.split("=")[0] for t in old if t.split("=")[0] not in new and t.startswith("-")]
    assert all(f" {r}`" in note for r in renamed), note
    added = [t.split("=")[0] for t in new if t.startswith("-") and t.split("=")[0] not in old]
    assert any(f" {a}`" in note for a in added), note


def test_an_old_spelling_keeps_json_stdout_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """keygen --trust, the old way: the key is made and trusted, stdout is JSON only."""
    repo = tmp_path
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    monkeypatch.chdir(repo)
    key = repo / "k"
    code = main(["keygen", "-f", str(key), "--no-passphrase", "--comment", "a@example.org",
                 "--trust", "--format", "json"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, (out, err)
    json.loads(out)
    assert err.count("ftmanifest: note:") == 1 and "--add-trust" in err
    trusted = (repo / ".ftmanifest" / "allowed_signers").read_text()
    assert "a@example.org" in trusted


def test_prune_says_dry_run_or_apply_never_both() -> None:
    parser = build_parser()
    assert parser.parse_args(["prune", "d", "--dry-run", "--keep-last", "1"]).apply is False
    assert parser.parse_args(["prune", "d", "--apply", "--keep-last", "1"]).apply is True
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["prune", "d", "--dry-run", "--apply"])
    assert exc.value.code == 2
