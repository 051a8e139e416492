"""Whatever a record file holds, reading and checking the ledger never crashes:
arbitrary bytes and arbitrary JSON under a valid record name become Problems.

The JSON cases reach past the name check: a record object is written under
the name its own content hashes to (when it has one), so the link, order and
signature judges see hostile ``seq``, ``prev``, ``at`` and ``signature``
values, and the canonical-JSON hashing sees values it cannot represent
(huge integers, NaN, lone surrogates, deep nesting).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ftmanifest.ledger import Ledger
from ftmanifest.ledger.recordfile import Contents, Problem, file_name, record_id
from ftmanifest.signing.trust import parse_trust

NAME = "20260101T000000.000000Z-0123456789abcdef0123.json"
TRUST = parse_trust(
    'me namespaces="ftmanifest" ssh-ed25519 '
    "AAAAC3NzaC1lZDI1NTE5AAAAILy7ewpfb1cFMJfoaaqn8P6pZ43TxH6z2yV45FxqHaiZ\n",
    Path("allowed_signers"),
)
FUZZ = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["\ud800", "sha256:" + "0" * 64, "2026-01-01T00:00:00+00:00", "x\udcff"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
records = st.fixed_dictionaries(
    {},
    optional={
        "format": st.one_of(st.just(1), json_values),
        "seq": st.one_of(st.integers(-3, 5), json_values),
        "prev": st.one_of(st.lists(st.sampled_from(["sha256:" + "0" * 64, "x"])), json_values),
        "at": st.one_of(
            st.sampled_from(["2026-01-01T00:00:00+00:00", "2026-01-01", ""]), json_values
        ),
        "attempt": json_values,
        "status": st.one_of(st.sampled_from(["started", "abandoned", "completed"]), json_values),
        "reason": json_values,
    },
)
signatures = st.one_of(
    st.none(),
    json_values,
    st.fixed_dictionaries(
        {
            "payload": st.text(max_size=8),
            "payloadType": st.sampled_from(["application/vnd.in-toto+json", "x"]),
            "signatures": st.lists(
                st.fixed_dictionaries({"keyid": st.text(max_size=4), "sig": st.text(max_size=8)}),
                max_size=2,
            ),
        }
    ),  # fmt: skip
)


def _judge(folder: Path) -> None:
    store = Ledger(folder)
    for trust, signed in ((None, False), (TRUST, True)):
        contents, problems = store.check(trust=trust, require_signed=signed, heads=["abc123"])
        assert isinstance(contents, Contents)
        assert all(isinstance(p, Problem) and p.rule.startswith("ledger.") for p in problems)
        contents.heads()
    from ftmanifest.ledger.attempts import attempts, counts

    for a in attempts(store.read().entries):
        a.to_dict()
        counts([a])


def _fresh(tmp_path: Path) -> Path:
    folder = tmp_path / "fuzz-ledger"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    Ledger(folder).append({"status": "planned", "attempt": "good"})
    return folder


@FUZZ
@given(data=st.binary(max_size=300))
def test_arbitrary_bytes_never_crash_check(tmp_path: Path, data: bytes) -> None:
    folder = _fresh(tmp_path)
    (folder / NAME).write_bytes(data)
    _judge(folder)


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True, allow_nan=True)


@FUZZ
@given(
    record=records,
    signature=signatures,
    top=json_values,
    wrap=st.integers(0, 2),
    depth=st.integers(500, 3000),
)
def test_arbitrary_json_never_crashes_check(
    tmp_path: Path, record: dict[str, Any], signature: Any, top: Any, wrap: int, depth: int
) -> None:
    folder = _fresh(tmp_path)
    if wrap == 0:  # a record object under the name it hashes to, when it has one
        try:
            name = file_name(record, record_id(record))
        except ValueError:  # no canonical form: any valid name
            name = NAME
        text = _dump({"record": record, "signature": signature})
    elif wrap == 1:  # any JSON document
        name, text = NAME, _dump(top)
    else:  # a record nested deeper than the parser or the hashing can follow
        name, text = NAME, '{"record": {"a": ' + "[" * depth + "]" * depth + "}}"
    (folder / name).write_text(text, encoding="utf-8", errors="surrogatepass")
    _judge(folder)


budget_keys = st.sampled_from(["steps", "hours", "gpu_hours", "max_steps", "max_hours", "x"])
numbers_or_not = st.one_of(st.integers(-5, 10**6), st.floats(0, 1e6), json_values)
views = st.fixed_dictionaries(
    {"attempt": st.sampled_from(["aaaa1111", "bbbb2222", ""])},
    optional={
        "status": st.one_of(st.sampled_from(["started", "completed", "abandoned"]), json_values),
        "reason": json_values,
        "experiment": st.one_of(
            st.fixed_dictionaries({"id": st.sampled_from(["e1", "e2"]), "parent": json_values}),
            json_values,
        ),
        "budget_used": st.dictionaries(budget_keys, numbers_or_not, max_size=3),
        "manifest": st.one_of(
            st.fixed_dictionaries(
                {
                    "digest": json_values,
                    "body": st.fixed_dictionaries(
                        {
                            "experiment": st.fixed_dictionaries(
                                {
                                    "budget": st.one_of(
                                        st.dictionaries(budget_keys, numbers_or_not), json_values
                                    ),
                                }
                            )
                        }
                    ),
                }
            ),
            json_values,
        ),  # fmt: skip
        "sealed": json_values,
    },
)


HOSTILE_BUDGET = {
    "attempt": "aaaa1111",
    "status": "completed",
    "budget_used": {"steps": 5},
    "manifest": {"body": {"experiment": {"budget": {"max_steps": "x"}}}},
}


@FUZZ
@given(fields=st.lists(views, min_size=1, max_size=4), fmt=st.sampled_from(["text", "json"]))
@example(fields=[HOSTILE_BUDGET], fmt="text")  # once: TypeError, int > str
def test_listing_well_formed_records_of_any_content_never_crashes(
    tmp_path: Path, fields: list[dict[str, Any]], fmt: str
) -> None:
    """Records with a valid name and links but hostile values (anyone can write
    them through the library) are listed: ``ledger list`` exits 0."""
    from ftmanifest.cli import main

    folder = _fresh(tmp_path)
    store = Ledger(folder)
    for f in fields:
        try:
            store.append(f)
        except ValueError:  # no canonical form (NaN, a huge int): never written
            continue
    assert main(["ledger", "list", "--ledger", str(folder), "--format", fmt]) == 0
    assert main(["ledger", "list", "--ledger", str(folder), "--family", "e1"]) == 0
