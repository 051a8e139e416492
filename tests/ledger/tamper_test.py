"""Edited, removed, reordered and backdated records are caught by ``ledger check``.

Each attack is made on a five-record chain written through the library, and
judged by the real CLI: exit 1 and the rule named, in text and JSON.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from ftmanifest.ledger import Ledger
from ftmanifest.ledger.recordfile import file_name, record_id
from tests.ledger.conftest import body, check_json, fill, ledger_cli, rewrite, rules


@pytest.fixture
def chain(folder: Path) -> Ledger:
    store = Ledger(folder)
    fill(store, 5)
    assert len(store.read().entries) == 5
    return store


def _refused(folder: Path, rule: str, *args: str) -> dict:
    text = ledger_cli(folder, "check", *args)
    assert text.returncode == 1, text.stdout + text.stderr
    assert rule in text.stdout and "ledger NOT ok" in text.stdout
    code, report = check_json(folder, *args)
    assert code == 1 and report["ok"] is False
    assert rule in rules(report)
    return report


def test_an_untouched_chain_checks_clean(chain: Ledger) -> None:
    code, report = check_json(chain.root)
    assert (code, report["ok"], report["records"], report["problems"]) == (0, True, 5, [])
    assert len(report["heads"]) == 1
    seqs = [e.seq for e in chain.read().entries]
    assert seqs == [1, 2, 3, 4, 5]


def test_reformatting_a_record_is_not_an_edit(chain: Ledger) -> None:
    """The id hashes the canonical record: indentation and key order are no change."""
    entry = chain.read().entries[2]
    data = body(entry.file)
    record = dict(reversed(list(data["record"].items())))
    entry.file.write_text(json.dumps({"signature": None, "record": record}, separators=(",", ":")))
    code, report = check_json(chain.root)
    assert (code, report["ok"], report["records"]) == (0, True, 5)


def test_an_edited_reason_is_caught(chain: Ledger) -> None:
    entry = chain.read().entries[2]
    data = body(entry.file)
    data["record"]["note"] = "something else happened"
    entry.file.write_text(json.dumps(data, indent=1))
    report = _refused(chain.root, "ledger.record-edited")
    (row,) = [p for p in report["problems"] if p["rule"] == "ledger.record-edited"]
    assert row["file"] == str(entry.file)


def test_a_record_edited_in_place_one_byte_is_caught(chain: Ledger) -> None:
    entry = chain.read().entries[1]
    text = entry.file.read_text()
    assert '"r1"' in text
    entry.file.write_text(text.replace('"r1"', '"r7"'))
    _refused(chain.root, "ledger.record-edited")


def test_a_removed_middle_record_is_caught(chain: Ledger) -> None:
    entries = chain.read().entries
    entries[2].file.unlink()
    report = _refused(chain.root, "ledger.record-missing")
    (row,) = report["problems"]
    assert row["file"] == str(entries[3].file)
    assert row["expected"] == entries[2].id


def test_swapped_contents_are_caught(chain: Ledger) -> None:
    """Two files' contents swapped (or, the same, their names swapped)."""
    entries = chain.read().entries
    a, b = entries[1].file, entries[3].file
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)
    report = _refused(chain.root, "ledger.record-edited")
    edited = [p["file"] for p in report["problems"] if p["rule"] == "ledger.record-edited"]
    assert sorted(edited) == sorted([str(a), str(b)])
    assert "ledger.record-missing" in rules(report)  # their children now link to nothing


def test_a_record_renamed_to_another_time_is_caught(chain: Ledger) -> None:
    """Moving a record elsewhere in the listing by renaming its file."""
    entry = chain.read().entries[3]
    stamp, digest = entry.file.name.split("-", 1)
    entry.file.rename(entry.file.with_name("20000101T000000.000000Z-" + digest))
    _refused(chain.root, "ledger.record-edited")


def test_a_rewritten_record_whose_seq_disagrees_with_its_links(chain: Ledger) -> None:
    newest = chain.read().entries[-1]
    rewrite(newest, seq=2)  # name and id recomputed: only the position is wrong
    report = _refused(chain.root, "ledger.order")
    (row,) = report["problems"]
    assert (row["expected"], row["observed"]) == ("seq 5", "seq 2")


def test_a_rewritten_record_that_skips_its_parent(chain: Ledger) -> None:
    """prev rewritten to the grandparent, seq kept: the order no longer follows."""
    entries = chain.read().entries
    rewrite(entries[-1], prev=[entries[2].id])
    report = _refused(chain.root, "ledger.order")
    assert len(report["heads"]) == 2  # the skipped record is left dangling


def test_a_middle_record_rewritten_breaks_the_link_after_it(chain: Ledger) -> None:
    entries = chain.read().entries
    rewrite(entries[2], note="rewritten")
    report = _refused(chain.root, "ledger.record-missing")
    assert rules(report) == ["ledger.record-missing"]


def test_a_record_older_than_its_parent_is_caught(chain: Ledger) -> None:
    """Backdated with its name recomputed: only the order is wrong."""
    entries = chain.read().entries
    parent = datetime.fromisoformat(entries[-2].at)
    early = (parent - timedelta(seconds=5)).isoformat(timespec="microseconds")
    target = rewrite(entries[-1], at=early)
    assert target.name == file_name(body(target)["record"], record_id(body(target)["record"]))
    report = _refused(chain.root, "ledger.order")
    (row,) = report["problems"]
    assert "older than a record it follows" in row["message"]


def test_a_record_without_a_valid_time_is_caught(chain: Ledger) -> None:
    rewrite(chain.read().entries[-1], at="yesterday")
    _refused(chain.root, "ledger.order")


def test_removing_the_newest_record_needs_a_known_head(chain: Ledger) -> None:
    """The known limit of hash links: nothing links to the newest record yet,
    so removing it leaves a shorter, consistent chain that checks clean.  A
    head known from elsewhere (a report, a handoff) passed as ``--head`` is
    what catches it, as a whole id or a prefix."""
    newest = chain.read().entries[-1]
    assert check_json(chain.root, "--head", newest.id)[0] == 0
    short = newest.id.removeprefix("sha256:")[:16]
    assert check_json(chain.root, "--head", short)[0] == 0
    newest.file.unlink()
    code, report = check_json(chain.root)
    assert (code, report["records"]) == (0, 4)  # undetected without --head
    report = _refused(chain.root, "ledger.head-missing", "--head", newest.id)
    assert report["problems"][0]["expected"] == newest.id
    _refused(chain.root, "ledger.head-missing", "--head", short)


def test_check_of_a_missing_ledger_is_an_input_error(folder: Path) -> None:
    out = ledger_cli(folder, "check")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "there is no ledger to check" in out.stderr and str(folder) in out.stderr


@pytest.mark.parametrize("head", ["", " ", "a", "sha256:", "zzzzzzzzzzzzzzzz", "0123456789a"])
def test_a_head_too_short_to_name_a_record_is_refused(chain: Ledger, head: str) -> None:
    """A head of a few characters would match any record: it checks nothing,
    so it is refused rather than passed."""
    code, report = check_json(chain.root, "--head", head)
    assert code == 1 and rules(report) == ["ledger.head-missing"]
    assert "hex digits" in report["problems"][0]["expected"]


def test_a_head_prefix_may_carry_the_sha256_prefix(chain: Ledger) -> None:
    newest = chain.read().entries[-1]
    assert check_json(chain.root, "--head", newest.id[:23])[0] == 0  # sha256: + 16 hex
    assert check_json(chain.root, "--head", newest.id.upper().replace("SHA256", "sha256"))[0] == 0
    newest.file.unlink()
    assert check_json(chain.root, "--head", newest.id[:23])[0] == 1
