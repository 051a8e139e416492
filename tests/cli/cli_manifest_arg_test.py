"""One way to name the manifest: ``cmd M`` everywhere, ``--manifest M`` too.

``compare M`` but ``score --manifest M`` made users guess; every command whose
subject is a manifest now takes both, and refuses two different ones.
"""

from __future__ import annotations

import argparse

import pytest

from ftmanifest.cli import build_parser, main

# the commands whose subject is one manifest, with what else each requires
SUBJECT = {
    "verify": [],
    "run": [],
    "lock": [],
    "sign": [],
    "signers": [],
    "reproduce": [],
    "compare": ["--baseline", "b", "--candidate", "c"],
    "score": ["--split", "eval", "--predictions", "p"],
    "estimate": [],
    "plan": ["--days", "3"],
    "preflight": [],
    "runs": [],
    "unseal": ["--split", "test", "--reason", "why"],
    ("data", "check"): [],
    ("data", "sample"): ["--per-category", "2"],
}


def _argv(command: str | tuple[str, str]) -> list[str]:
    return list(command) if isinstance(command, tuple) else [command]


@pytest.mark.parametrize("command", list(SUBJECT), ids=str)
def test_positional_and_option_name_the_same_manifest(command: str | tuple[str, str]) -> None:
    name = _argv(command)
    parser = build_parser(only=name[0])
    rest = SUBJECT[command]
    by_position = parser.parse_args([*name, "m.yaml", *rest])
    by_option = parser.parse_args([*name, "--manifest", "m.yaml", *rest])
    assert str(by_position.manifest) == str(by_option.manifest) == "m.yaml"
    assert vars(by_position) == vars(by_option)


@pytest.mark.parametrize("command", ["verify", "score", "compare"])
def test_no_manifest_or_two_is_a_usage_error(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rest = SUBJECT[command]
    with pytest.raises(SystemExit) as raised:
        main([command, *rest])
    assert raised.value.code == 2
    assert "the manifest is required" in capsys.readouterr().err
    with pytest.raises(SystemExit) as raised:
        main([command, "a.yaml", "--manifest", "b.yaml", *rest])
    assert raised.value.code == 2
    assert "given twice" in capsys.readouterr().err


def test_the_same_manifest_twice_is_fine() -> None:
    parser = build_parser(only="verify")
    args = parser.parse_args(["verify", "m.yaml", "--manifest", "m.yaml"])
    assert str(args.manifest) == "m.yaml"
    assert isinstance(args, argparse.Namespace)
