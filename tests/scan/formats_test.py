"""Data formats read whole: nested Parquet, UTF-16/32 text, JSON string escapes."""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ftmanifest.findings import Finding
from ftmanifest.scan.engine import ScanOptions, scan_paths
from ftmanifest.scan.text.parquet import scan_parquet

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
    from ftmanifest.scan.text.parquet import _leaves, _Unscannable

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


# --- JSON string escapes -------------------------------------------------------------

URL_SECRET = "https://admin:S3cr3tPassw0rd9@db.example.com/x"


def _jsonl(tmp_path: Path, lines: list[str], name: str = "d.jsonl") -> list[Finding]:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines))
    return scan_paths([path], ScanOptions(jobs=1)).findings


def _escape_all(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


def test_unicode_escaped_token_is_found_at_its_raw_position(tmp_path: Path) -> None:
    line = '{"id": 7, "t": "key ' + _escape_all(GHP[:5]) + GHP[5:] + '"}'
    (f,) = _jsonl(tmp_path, ['{"id": 1}', line])
    assert (f.rule, f.line, f.column, f.extra["record"]) == ("secret.github-pat", 2, 21, 2)
    start, end = f.extra["span"]
    raw = (tmp_path / "d.jsonl").read_bytes()
    assert raw[start:end] == (_escape_all(GHP[:5]) + GHP[5:]).encode()
    assert f.extra["decoded"] == "json-string" and GHP not in (f.excerpt or "")


def test_escapes_that_hide_values_from_the_raw_bytes(tmp_path: Path) -> None:
    lines = [
        json.dumps({"t": "first line\n" + GHP}),  # \n glued to the token
        json.dumps({"u": URL_SECRET}).replace("/", "\\/"),  # \/ in a URL
        json.dumps({"m": "\U0001f600" + MAIL}),  # a surrogate pair before an address
    ]
    found = _jsonl(tmp_path, lines)
    assert [(f.rule, f.line) for f in found] == [
        ("secret.github-pat", 1),
        ("secret.url-password", 2),
        ("pii.email", 3),
    ]
    (mail,) = [f for f in found if f.rule == "pii.email"]
    from ftmanifest.scan.redact import fingerprint

    assert mail.fingerprint == fingerprint("pii.email", MAIL.encode())  # not "ude00ana..."


def test_found_raw_and_decoded_is_reported_once(tmp_path: Path) -> None:
    pem = (
        "-----BEGIN RSA PRIVATE KEY-----\n"
        "WbnxXcOdNX8Z5hs1UcAKKjdlT0NbJEjelMSA9lpER2YaXWwAPXPnVFmBLNIjvj0x\n"
        "-----END RSA PRIVATE KEY-----\n"
    )
    lines = [json.dumps({"k": pem}), json.dumps({"t": f"tok {GHP}\nnext", "q": 'say "hi"'})]
    found = _jsonl(tmp_path, lines)
    assert [(f.rule, f.line) for f in found] == [
        ("secret.private-key", 1),
        ("secret.github-pat", 2),
    ]


def test_malformed_json_lines_still_get_the_raw_scan(tmp_path: Path) -> None:
    lines = [
        '{"t": "unterminated \\u0067hp_' + GHP[4:],
        '{"a": "bad \\x escape ' + GHP + '", oops}',
        "not json at all \\ " + MAIL,
    ]
    found = _jsonl(tmp_path, lines)
    assert sorted((f.rule, f.line) for f in found) == [
        ("pii.email", 3),
        ("secret.github-pat", 1),
        ("secret.github-pat", 2),
    ]


def test_plain_json_and_gzip_json_decode_too(tmp_path: Path) -> None:
    import gzip

    doc = json.dumps({"cfg": {"hub": "\n" + GHP}}, indent=2)
    (f,) = _jsonl(tmp_path, [doc], name="c.json")
    assert f.line == 3
    path = tmp_path / "d.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.write('{"a": 1}\n' + json.dumps({"t": "x\n" + GHP}) + "\n")
    (g,) = scan_paths([path], ScanOptions(jobs=1)).findings
    assert g.line == 2 and g.extra["compressed"] == "gzip"


@settings(max_examples=300, deadline=None)
@given(text=st.text(), ascii_only=st.booleans(), slash=st.booleans())
def test_unescape_matches_json_and_maps_every_character(
    text: str, ascii_only: bool, slash: bool
) -> None:
    from ftmanifest.scan.text.json_strings import unescape

    raw = json.dumps(text, ensure_ascii=ascii_only)[1:-1]
    raw = raw.replace("/", "\\/") if slash else raw
    body = raw.encode("utf-8", "surrogatepass")
    decoded, offs = unescape(body, with_map=True)
    assert decoded == text.encode("utf-8", "surrogatepass")
    assert offs is not None and len(offs) == len(decoded) + 1 and offs[-1] == len(body)
    assert offs == sorted(offs)
    i = 0  # each character's raw bytes decode to that character alone
    for ch in _chars(text):
        n = len(ch.encode("utf-8", "surrogatepass"))
        piece = body[offs[i] : offs[i + n]]
        assert json.loads(b'"' + piece + b'"') == ch
        i += n


def _chars(text: str) -> list[str]:
    # json.dumps writes an adjacent high+low surrogate pair as one character
    out: list[str] = []
    for c in text:
        if out and "\ud800" <= out[-1] <= "\udbff" and "\udc00" <= c <= "\udfff":
            out[-1] = (out[-1] + c).encode("utf-16", "surrogatepass").decode("utf-16")
        else:
            out.append(c)
    return out


@settings(max_examples=200, deadline=None)
@given(
    data=st.lists(
        st.sampled_from(
            [
                b'"',
                b"\\",
                b"\\u",
                b"\\ud83d",
                b"\\ude00",
                b"\n",
                b"ghp_",
                b"0041",
                b"x",
                b"\xff",
                b"@a.de",
            ]
        ),
        max_size=60,
    ).map(b"".join),
    secret_at=st.integers(0, 60),
)
def test_scan_json_strings_never_raises_and_spans_are_in_the_buffer(
    data: bytes, secret_at: int
) -> None:
    from ftmanifest.scan.text.json_strings import scan_json_strings

    buf = data[:secret_at] + b'"\\n' + GHP.encode() + b'"' + data[secret_at:]
    lines = buf.count(b"\n") + 1
    found = scan_json_strings(buf, path="f.jsonl", base_line=1)
    assert (
        any(f.rule == "secret.github-pat" for f in found)
        or b'"' in data[:secret_at]
        or b"\\" in data
    )
    for f in found:
        s, e = f.extra["span"]
        assert 0 <= s < e <= len(buf) and 1 <= (f.line or 0) <= lines and (f.column or 0) >= 1


# --- UTF-16 / UTF-32 -----------------------------------------------------------------

WIDE = ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"]


def _wide_text(n: int = 400) -> tuple[str, list[int]]:
    lines = [f"line {i} \u00e9t\u00e9 \U0001f600 filler text" for i in range(n)]
    at = [3, n // 2, n - 1]
    lines[at[0]] = f"token {GHP}"
    lines[at[1]] = f"\U0001f600\u00e9 mail {MAIL}"
    lines[at[2]] = f"last {GHP}"
    return "\n".join(lines) + "\n", [i + 1 for i in at]


def _with_bom(text: str, codec: str) -> bytes:
    bom = {"utf-16-le": codecs.BOM_UTF16_LE, "utf-16-be": codecs.BOM_UTF16_BE,
           "utf-32-le": codecs.BOM_UTF32_LE, "utf-32-be": codecs.BOM_UTF32_BE}[codec]  # fmt: skip
    return bom + text.encode(codec)


@pytest.mark.parametrize("codec", WIDE)
def test_wide_text_with_a_bom_is_decoded_in_aligned_ranges(
    tmp_path: Path, codec: str, monkeypatch
) -> None:
    from ftmanifest.scan.text import readers

    text, lines = _wide_text()
    path = tmp_path / "w.txt"
    path.write_bytes(_with_bom(text, codec))
    size = path.stat().st_size
    want = [
        ("secret.github-pat", lines[0], 7),
        ("pii.email", lines[1], 9),
        ("secret.github-pat", lines[2], 6),
    ]
    whole, n = readers.scan_text_range(path, 0, size, secrets=True, pii=True)
    assert [(f.rule, f.line, f.column) for f in whole] == want and n == text.count("\n")
    assert all(f.extra["encoding"] == codec and "span" not in f.extra for f in whole)
    monkeypatch.setattr(readers, "CHUNK", 1000)
    monkeypatch.setattr(readers, "OVERLAP", 200)
    for piece in (997, 1500, 4099):  # odd cuts: never on a code unit
        found, base = [], 0
        for s in range(0, size, piece):
            part, nl = readers.scan_text_range(
                path, s, min(size, s + piece), secrets=True, pii=True
            )
            found += [(f.rule, f.line + base, f.column) for f in part]
            base += nl
        assert found == want and base == text.count("\n"), piece


@settings(max_examples=60, deadline=None)
@given(
    codec=st.sampled_from(WIDE),
    text=st.text(st.characters(blacklist_categories=["Cs"]), max_size=300),
    cuts=st.lists(st.integers(0, 2000), max_size=6),
)
def test_wide_ranges_count_every_line_once(
    tmp_path_factory, codec: str, text: str, cuts: list[int]
) -> None:
    from ftmanifest.scan.text import readers

    path = tmp_path_factory.mktemp("w") / "f.txt"
    path.write_bytes(_with_bom(text + f"\n{GHP}\n", codec))
    size = path.stat().st_size
    bounds = sorted({0, size, *(c % size for c in cuts)})
    found, base = [], 0
    for s, e in zip(bounds, bounds[1:], strict=False):
        part, nl = readers.scan_text_range(path, s, e, secrets=True, pii=False)
        found += [f.line + base for f in part if f.rule == "secret.github-pat"]
        base += nl
    assert base == text.count("\n") + 2
    # the planted token is on its own line; the fuzzed text may hold more lines
    assert text.count("\n") + 2 in found


def test_utf16_starting_with_nul_is_not_read_as_utf32(tmp_path: Path) -> None:
    """FF FE 00 00 is UTF-32-LE's mark and UTF-16-LE's mark before U+0000: read as
    UTF-32, the token after it was not found and nothing said not scanned."""
    from ftmanifest.scan import scan_paths

    path = tmp_path / "nul.txt"
    path.write_bytes(_with_bom("\x00\n" + GHP + "\n", "utf-16-le"))
    (row,) = scan_paths([path]).findings
    assert (row.rule, row.line) == ("secret.github-pat", 2)
    wide = tmp_path / "wide.txt"  # real UTF-32-LE keeps its reading
    wide.write_bytes(_with_bom("x\n" + GHP + "\n", "utf-32-le"))
    (row,) = scan_paths([wide]).findings
    assert (row.rule, row.line, row.extra["encoding"]) == ("secret.github-pat", 2, "utf-32-le")


def test_bomless_utf16_is_guessed_and_binary_stays_binary() -> None:
    from ftmanifest.scan.text.encodings import detect

    assert detect(("hello world\n" * 20).encode("utf-16-le")).codec == "utf-16-le"  # type: ignore[union-attr]
    assert detect(("hello world\n" * 20).encode("utf-16-be")).codec == "utf-16-be"  # type: ignore[union-attr]
    assert detect(bytes(range(256)) * 4) is None
    assert detect(b"plain text\n" * 20) is None


def test_engine_scans_utf16_with_a_bom(tmp_path: Path) -> None:
    path = tmp_path / "w.txt"
    text, lines = _wide_text(50)
    path.write_bytes(_with_bom(text, "utf-16-le"))
    found = scan_paths([path], ScanOptions(jobs=1)).findings
    assert [(f.rule, f.line) for f in found] == [
        ("secret.github-pat", lines[0]),
        ("pii.email", lines[1]),
        ("secret.github-pat", lines[2]),
    ]
