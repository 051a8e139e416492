"""A published model card holds no path of the machine it was written on, in any of
the forms a manifest or an audit's free text carries one: POSIX, a ``file:`` URL, a
Windows drive path or a network share.  The card is read back with the real
``huggingface_hub.ModelCard``; the controls (a web address, a path relative to the
project) are kept as written."""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from ftmanifest.results.mdtext import portable
from ftmanifest.results.modelcard import render_model_card
from tests.results.modelcard_test import card_data

USER = "zed42"  # a home folder's name that nothing else in the card holds

MACHINE_PATHS = {
    "posix": f"/home/{USER}/corp/train.jsonl",
    "file-url": f"file:///home/{USER}/corp/train.jsonl",
    "file-url-host": f"file://localhost/home/{USER}/corp/train.jsonl",
    "windows": rf"C:\Users\{USER}\corp\train.jsonl",
    "windows-slashes": f"D:/Users/{USER}/corp/train.jsonl",
    "network-share": rf"\\fileserver-{USER}\share\corp\train.jsonl",
}


def _card(tmp_path: Path, text: str) -> str:
    data = card_data(tmp_path / "project")
    data["limits"] = f"trained from {text} only"
    data["data"][0]["license"] = f"see {text}"
    data["experiment"]["hypothesis"] = f"rows of {text} (English)"
    return render_model_card(data).text


@pytest.mark.parametrize("form", sorted(MACHINE_PATHS))
def test_no_machine_path_reaches_the_card(tmp_path: Path, form: str) -> None:
    text = _card(tmp_path, MACHINE_PATHS[form])
    assert USER not in text, [line for line in text.splitlines() if USER in line]
    assert "corp/train.jsonl" in text  # the file is still named, by its last names
    ModelCard(text)  # the hub still reads it


@pytest.mark.parametrize(
    "kept", ["https://example.org/home/corp/train.jsonl", "data/corp/train.jsonl"]
)
def test_control_web_addresses_and_relative_paths_are_kept(tmp_path: Path, kept: str) -> None:
    text = _card(tmp_path, kept)
    assert kept in text.replace("\\", "")


def test_control_a_path_under_the_project_becomes_relative(tmp_path: Path) -> None:
    base = tmp_path / "project"
    shown = portable({"limits": f"from file://{base}/data/train.jsonl"}, base=str(base))
    assert shown == {"limits": "from data/train.jsonl"}
