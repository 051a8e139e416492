"""Data formats read whole (issue 9): nested Parquet, UTF-16/32 text, JSON string escapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ftmanifest.findings import Finding
from ftmanifest.scan.engine import ScanOptions, scan_paths
from ftmanifest.scan.parquet import scan_parquet

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

GHP = "ghp_SulEETldq8b8Vw2zbJYAxyL1aCcTlN99mhWp"
MAIL = "ana.silva@uni-lisboa.pt"


def _pq(tmp_path: Path, table: Any, name: str = "d.parquet") -> list[Finding]:
    path = tmp_path / name
    pq.write_table(table, path)
    return scan_parquet(path, True, True, None)


def _where(found: list[Finding]) -> list[tuple[str, int | None, str]]:
    return sorted((f.rule, f.extra.get("row"), f.extra["column"]) for f in found)


def test_chat_format_messages_are_scanned(tmp_path: Path) -> None:
    msg = pa.struct([("role", pa.string()), ("content", pa.string())])
    rows = [
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        None,
        [{"role": "user", "content": f"my token is {GHP}"}, None, {"role": None, "content": None}],
        [{"role": "assistant", "content": f"mail {MAIL}"}],
    ]
    found = _pq(tmp_path, pa.table({"id": [1, 2, 3, 4], "messages": pa.array(rows, pa.list_(msg))}))
    assert _where(found) == [
        ("pii.email", 4, "messages[].content"),
        ("secret.github-pat", 3, "messages[].content"),
    ]
    assert found[0].line is None and found[0].extra["column_path"][0] == "messages"
    assert all(GHP not in (f.excerpt or "") + f.message for f in found)


def test_struct_map_large_list_dictionary_and_binary(tmp_path: Path) -> None:
    table = pa.table(
        {
            "meta": pa.array(
                [{"a": {"b": "x"}}, {"a": {"b": GHP}}, None],
                pa.struct([("a", pa.struct([("b", pa.string())]))]),
            ),
            "tags": pa.array(
                [[("k", "v")], [], [("owner", MAIL)]], pa.map_(pa.string(), pa.string())
            ),
            "big": pa.array([["a"], [GHP], None], pa.large_list(pa.large_string())),
            "cat": pa.array(["x", "y", GHP]).dictionary_encode(),
            "raw": pa.array([GHP.encode(), None, b"\xff\x00"], pa.binary()),
            "lraw": pa.array([None, b"z", MAIL.encode()], pa.large_binary()),
            "fixed": pa.array([[GHP], [], []], pa.list_(pa.string())),
        }
    )
    assert _where(_pq(tmp_path, table)) == [
        ("pii.email", 3, "lraw"),
        ("pii.email", 3, "tags{}.value"),
        ("secret.github-pat", 1, "fixed[]"),
        ("secret.github-pat", 1, "raw"),
        ("secret.github-pat", 2, "big[]"),
        ("secret.github-pat", 2, "meta.a.b"),
        ("secret.github-pat", 3, "cat"),
    ]


def test_views_fixed_size_and_nested_lists(tmp_path: Path) -> None:
    if not hasattr(pa, "string_view"):
        pytest.skip("this pyarrow has no string_view")
    table = pa.table(
        {
            "sv": pa.array(["a", GHP], pa.string_view()),
            "fsb": pa.array([b"0" * 40, GHP.encode()], pa.binary(40)),
            "deep": pa.array(
                [[[{"t": [MAIL]}]], []],
                pa.list_(pa.list_(pa.struct([("t", pa.list_(pa.string()))]))),
            ),
            "fsl": pa.array([["x", "y"], [GHP, "z"]], pa.list_(pa.string(), 2)),
        }
    )
    path = tmp_path / "v.parquet"
    pq.write_table(table, path)
    assert _where(scan_parquet(path, True, True, None)) == [
        ("pii.email", 1, "deep[][].t[]"),
        ("secret.github-pat", 2, "fsb"),
        ("secret.github-pat", 2, "fsl[]"),
        ("secret.github-pat", 2, "sv"),
    ]


def test_rows_count_across_batches_and_row_groups(tmp_path: Path) -> None:
    n = 5000
    text = ["filler"] * n
    text[4321] = f"tok {GHP}"
    path = tmp_path / "rg.parquet"
    pq.write_table(pa.table({"t": text}), path, row_group_size=777)
    (f,) = scan_parquet(path, True, True, None)
    assert f.extra["row"] == 4322


def test_column_names_and_metadata_are_scanned(tmp_path: Path) -> None:
    field = pa.field(f"note_{MAIL}", pa.int64(), metadata={"origin": f"token {GHP}"})
    schema = pa.schema(
        [field, pa.field("s", pa.struct([(f"by {MAIL}", pa.string())]))]
    ).with_metadata({"source": f"exported by {MAIL}"})
    table = pa.table({field.name: [1], "s": [{f"by {MAIL}": "x"}]}, schema=schema)
    parts = sorted(
        (f.rule, f.extra["schema_part"], f.extra.get("column")) for f in _pq(tmp_path, table)
    )
    assert parts == [
        ("pii.email", "column-name", f"note_{MAIL}"),
        ("pii.email", "column-name", f"s.by {MAIL}"),
        ("pii.email", "metadata-value", None),
        ("secret.github-pat", "field-metadata-value", f"note_{MAIL}"),
    ]


def test_unreadable_column_is_not_scanned_by_name(tmp_path: Path) -> None:
    path = tmp_path / "u.parquet"
    pq.write_table(pa.table({"broken": ["a", "b"], "ok": ["c", GHP]}), path)
    data = bytearray(path.read_bytes())
    data[4:12] = b"\xff" * 8  # the first column chunk's page header
    path.write_bytes(bytes(data))
    found = scan_parquet(path, True, True, None)
    assert [(f.kind, f.severity) for f in found] == [("not-scanned", "error"), ("secret", "error")]
    assert "'broken'" in found[0].message and found[1].extra["column"] == "ok"


def test_union_column_is_not_scanned_by_name() -> None:
    from ftmanifest.scan.parquet import _leaves, _Unscannable

    union = pa.UnionArray.from_sparse(
        pa.array([0, 1], pa.int8()), [pa.array(["a", "b"]), pa.array([1, 2])]
    )
    with pytest.raises(_Unscannable, match="u has type"):
        _leaves(["u"], union, pa.array([0, 1], pa.int64()))


def test_engine_routes_parquet(tmp_path: Path) -> None:
    msg = pa.struct([("role", pa.string()), ("content", pa.string())])
    path = tmp_path / "chat.parquet"
    pq.write_table(
        pa.table({"messages": pa.array([[{"role": "u", "content": GHP}]], pa.list_(msg))}), path
    )
    (f,) = scan_paths([path], ScanOptions(jobs=1)).findings
    assert (f.extra["row"], f.extra["column"]) == (1, "messages[].content")
