"""Parquet: every text-bearing value, nested or not, plus names and metadata.

Layer: judging rooms - edge (reads files; pyarrow is imported only here, inside
functions).  Row groups are read in batches of ``BATCH`` rows; each column is flattened
with pyarrow's own kernels down to string or binary leaves, each leaf carrying the row
every value came from: structs through ``StructArray.flatten`` (parent nulls applied),
lists, large lists, fixed-size lists and maps through ``list_flatten`` /
``list_parent_indices``, dictionaries through ``dictionary_decode``, views and
fixed-size binary by a cast to the large types.  A leaf's values are joined one per line
(newlines inside become spaces) by ``binary_join`` and scanned as one buffer, so the
matcher runs once per leaf and batch.  Chat data (``list<struct<role, content>>``) thus
reports ``messages[].content`` and the row.  Column names and the schema's and fields'
key-value metadata are scanned too.  A column of a type with no text leaf (numbers,
dates) has nothing to scan; one that cannot be read or flattened (unions, unknown
extension types, a decode error) is a ``not-scanned`` finding naming the column.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ftmanifest.findings import Finding
from ftmanifest.held import open_binary
from ftmanifest.scan.text.text import scan_buffer
from ftmanifest.scan.unscanned import not_scanned

BATCH = 1024  # rows per batch: bounds memory for wide nested rows
_SKIP_META = frozenset({b"ARROW:schema"})  # the serialized schema, scanned as the schema


def scan_parquet(path: Path, secrets: bool, pii: bool, engine: str | None) -> list[Finding]:
    try:
        import pyarrow.parquet  # noqa: F401  (imported again where it is used)
    except ImportError:
        return [not_scanned(path, "Parquet needs pyarrow", "pip install pyarrow")]
    scan = _Scan(path, secrets, pii, engine)
    try:
        fh = open_binary(path)  # the bytes verify hashed, when it kept them (``held``)
    except OSError as exc:
        return [not_scanned(path, f"Parquet unreadable ({exc.strerror or exc})")]
    with fh:
        return _scan_file(scan, fh)


def _scan_file(scan: _Scan, fh: Any) -> list[Finding]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = scan.path
    try:
        pf = pq.ParquetFile(fh)
        scan.schema(pf.schema_arrow)
    except (OSError, pa.ArrowException, ValueError) as exc:
        return [*scan.out, not_scanned(path, f"Parquet unreadable ({exc})")]
    # One top-level column at a time (Parquet is columnar: this reads each page
    # once), so that a column that cannot be read is named and the others scanned.
    for name in pf.schema_arrow.names:
        row0 = 0
        try:
            for batch in pf.iter_batches(batch_size=BATCH, columns=[name]):
                scan.column(name, batch.column(0), row0)
                row0 += batch.num_rows
        except _Unscannable as exc:
            scan.failed(name, str(exc))
        except (OSError, pa.ArrowException, ValueError, TypeError) as exc:
            scan.failed(name, f"unreadable from row {row0 + 1} ({exc})")
    return scan.out


class _Scan:
    def __init__(self, path: Path, secrets: bool, pii: bool, engine: str | None) -> None:
        self.path, self.secrets, self.pii, self.engine = path, secrets, pii, engine
        self.out: list[Finding] = []

    def column(self, name: str, col: Any, row0: int) -> None:
        import pyarrow as pa

        for parts, values, rows in _leaves([name], col, pa.array(range(len(col)), pa.int64())):
            self._leaf(parts, values, rows, row0)

    def failed(self, name: str, why: str) -> None:
        self.out.append(not_scanned(self.path, f"Parquet column {name!r}: {why}"))

    def _leaf(self, parts: list[str], values: Any, rows: Any, row0: int) -> None:
        buf = _joined(values)
        if not buf:
            return
        where = _label(parts)
        for f in scan_buffer(
            buf, path=str(self.path), secrets=self.secrets, pii=self.pii, engine=self.engine
        ):
            info = {k: v for k, v in f.extra.items() if k != "span"}
            info.update(
                row=row0 + rows[(f.line or 1) - 1].as_py() + 1, column=where, column_path=parts
            )
            self.out.append(f._replace(line=None, column=None, extra=info))

    def schema(self, schema: Any) -> None:
        """Column names (nested too) and key-value metadata, one string per line."""
        items: list[tuple[dict[str, Any], str]] = []
        for key, value in (schema.metadata or {}).items():
            if key not in _SKIP_META:
                items += [({"schema_part": "metadata-key"}, _text(key))]
                items += [
                    ({"schema_part": "metadata-value", "metadata_key": _text(key)}, _text(value))
                ]
        stack = [([f.name], f) for f in reversed(list(schema))]
        while stack:
            parts, field = stack.pop()
            where = {"column": _label(parts), "column_path": parts}
            items.append(({**where, "schema_part": "column-name"}, field.name))
            for key, value in (field.metadata or {}).items():
                items.append(({**where, "schema_part": "field-metadata-key"}, _text(key)))
                meta = {**where, "schema_part": "field-metadata-value", "metadata_key": _text(key)}
                items.append((meta, _text(value)))
            stack += [([*parts, c.name], c) for c in reversed(_children(field.type))]
        if not items:
            return
        buf = "\n".join(t.replace("\n", " ") for _, t in items).encode("utf-8", "surrogatepass")
        for f in scan_buffer(
            buf, path=str(self.path), secrets=self.secrets, pii=self.pii, engine=self.engine
        ):
            info = {k: v for k, v in f.extra.items() if k != "span"}
            info.update(items[(f.line or 1) - 1][0])
            self.out.append(f._replace(line=None, column=None, extra=info))


class _Unscannable(Exception):
    pass


def _text(raw: bytes | str) -> str:
    return raw if isinstance(raw, str) else raw.decode("utf-8", "replace")


def _label(parts: list[str]) -> str:
    """``messages[].content``: ``[]`` a list element, ``{}`` a map entry."""
    out = parts[0]
    for p in parts[1:]:
        out += p if p in ("[]", "{}.key", "{}.value") else "." + p
    return out


def _children(t: Any) -> list[Any]:
    import pyarrow as pa

    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pa.types.is_map(t):
        return [t.key_field, t.item_field]
    if hasattr(t, "value_field"):  # list, large list, fixed-size list, list view
        return [t.value_field]
    return []


def _leaves(parts: list[str], arr: Any, rows: Any) -> list[tuple[list[str], Any, Any]]:
    """(column path, string/binary leaf array, row of each value) under ``arr``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out: list[tuple[list[str], Any, Any]] = []
    stack = [(parts, arr, rows)]
    while stack:
        parts, arr, rows = stack.pop()
        t = arr.type
        if isinstance(t, pa.ExtensionType):
            stack.append((parts, arr.storage, rows))
        elif pa.types.is_dictionary(t):
            stack.append((parts, arr.dictionary_decode(), rows))
        elif pa.types.is_struct(t):
            for child, sub in zip(_children(t), arr.flatten(), strict=True):
                stack.append(([*parts, child.name], sub, rows))
        elif pa.types.is_map(t):
            as_list = arr.cast(pa.list_(pa.struct([t.key_field, t.item_field])))
            entries = pc.list_flatten(as_list)
            sub_rows = rows.take(pc.list_parent_indices(as_list))
            stack.append(([*parts, "{}.key"], entries.field(0), sub_rows))
            stack.append(([*parts, "{}.value"], entries.field(1), sub_rows))
        elif _children(t):  # the list kinds
            if _is(t, "is_list_view", "is_large_list_view"):
                arr = arr.cast(pa.large_list(t.value_field))
            sub_rows = rows.take(pc.list_parent_indices(arr))
            stack.append(([*parts, "[]"], pc.list_flatten(arr), sub_rows))
        elif _is_text(t):
            out.append((parts, arr, rows))
        elif pa.types.is_union(t) or not (
            pa.types.is_primitive(t) or pa.types.is_decimal(t) or pa.types.is_null(t)
        ):
            raise _Unscannable(f"{_label(parts)} has type {t}, which the scanner cannot read")
    return out


def _is(t: Any, *checks: str) -> bool:
    """``pa.types.<check>(t)`` for any check this pyarrow has (views: 16+)."""
    import pyarrow as pa

    return any(getattr(pa.types, c, lambda _: False)(t) for c in checks)


def _is_text(t: Any) -> bool:
    return _is(t, "is_string", "is_large_string", "is_string_view", "is_binary",
               "is_large_binary", "is_binary_view", "is_fixed_size_binary")  # fmt: skip


def _joined(values: Any) -> bytes:
    """The leaf's values one per line: null is an empty line, newlines are spaces."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(values) == 0:
        return b""
    text = _is(values.type, "is_string", "is_large_string", "is_string_view")
    big = pa.large_string() if text else pa.large_binary()
    empty, nl, space = ("", "\n", " ") if text else (b"", b"\n", b" ")
    v = pc.fill_null(pc.replace_substring(values.cast(big), nl, space), pa.scalar(empty, big))
    whole = pa.LargeListArray.from_arrays(pa.array([0, len(v)], pa.int64()), v)
    joined = pc.binary_join(whole, pa.scalar(nl, big))[0]
    return bytes(joined.as_buffer().to_pybytes())
