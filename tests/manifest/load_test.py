from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftmanifest.errors import (
    InputNotFoundError,
    ManifestError,
    ManifestInvalidError,
    UnsupportedVersionError,
)
from ftmanifest.manifest import load_document, load_manifest
from ftmanifest.manifest.load import MAX_BYTES, read_document
from tests.conftest import CLF, EXAMPLES


def _to_toml(value: object, prefix: str = "") -> str:
    """Enough of a TOML writer for the example manifests (tables, arrays of tables)."""
    assert isinstance(value, dict)
    simple, tables, arrays = [], [], []
    for k, v in value.items():
        if isinstance(v, dict):
            tables.append((k, v))
        elif isinstance(v, list) and v and all(isinstance(i, dict) for i in v):
            arrays.append((k, v))
        elif v is not None:
            simple.append(f"{json.dumps(k)} = {json.dumps(v)}")
    out = "\n".join(simple) + "\n"
    for k, v in tables:
        name = f"{prefix}{json.dumps(k)}"
        out += f"\n[{name}]\n" + _to_toml(v, name + ".")
    for k, items in arrays:
        name = f"{prefix}{json.dumps(k)}"
        for item in items:
            out += f"\n[[{name}]]\n" + _to_toml(item, name + ".")
    return out


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_yaml_json_and_toml_give_the_same_digest(example: Path, tmp_path: Path) -> None:
    loaded = load_manifest(example)
    as_json = tmp_path / "m.json"
    as_json.write_text(json.dumps(loaded.document.data, indent=1))
    as_toml = tmp_path / "m.toml"
    as_toml.write_text(_to_toml(loaded.document.data))
    assert load_manifest(as_json).digest() == loaded.digest()
    assert load_manifest(as_toml).digest() == loaded.digest()


def test_json_and_toml_keep_positions(tmp_path: Path) -> None:
    data = load_document(CLF).data
    as_json = tmp_path / "m.json"
    as_json.write_text(json.dumps(data, indent=1))
    doc = read_document(as_json)
    line, _ = doc.position(("model", "revision"))
    assert as_json.read_text().splitlines()[line - 1].strip().startswith('"revision"')
    as_toml = tmp_path / "m.toml"
    as_toml.write_text(_to_toml(data))
    doc = read_document(as_toml)
    line, _ = doc.position(("model", "revision"))
    assert as_toml.read_text().splitlines()[line - 1].startswith('"revision"')


def test_comments_and_key_order_do_not_change_the_digest(tmp_path: Path) -> None:
    text = CLF.read_text()
    edited = tmp_path / "m.yaml"
    edited.write_text(
        text.replace("# every department", "# each department")
        .replace("  task: classification\n", "")
        .replace(
            "  owner: ml-platform@example.org\n",
            "  owner: ml-platform@example.org\n  task: classification\n",
        )
    )
    assert load_manifest(edited).digest() == load_manifest(CLF).digest()
    edited.write_text(text.replace("max_drop: 0.02", "max_drop: 0.03"))
    assert load_manifest(edited).digest() != load_manifest(CLF).digest()


def _error(tmp_path: Path, content: bytes | str, name: str = "m.yaml") -> ManifestError:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ManifestError) as info:
        load_document(path)
    err = info.value
    assert err.path == str(path)
    return err


def test_duplicate_key_is_refused_with_both_lines(tmp_path: Path) -> None:
    err = _error(
        tmp_path, "ftmanifest: 1\nexperiment: {id: a}\nmodel: {repo: x}\nexperiment: {id: b}\n"
    )
    assert "duplicate key 'experiment'" in err.message and "line 2" in err.message
    assert err.line == 4


def test_duplicate_key_in_json(tmp_path: Path) -> None:
    err = _error(tmp_path, '{"ftmanifest": 1,\n "ftmanifest": 1}', name="m.json")
    assert "duplicate key" in err.message and err.line == 2


def test_non_utf8_names_line_and_column(tmp_path: Path) -> None:
    err = _error(tmp_path, b"ftmanifest: 1\nexperiment:\n  id: caf\xe9\n")
    assert err.line == 3 and err.column == 10 and "UTF-8" in err.message


def test_oversized_file_is_refused(tmp_path: Path) -> None:
    err = _error(tmp_path, "ftmanifest: 1\n" + "#" * MAX_BYTES)
    assert "too large" in err.message


def test_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    lines = ["a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9]"]
    for prev, cur in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{cur}: &{cur} [{', '.join(['*' + prev] * 9)}]")
    err = _error(tmp_path, "\n".join(lines) + "\n")
    assert "alias" in err.message


def test_small_aliases_are_fine(tmp_path: Path) -> None:
    text = CLF.read_text().replace(
        "    - kind: per_category", "    - &guard\n      kind: per_category", 1
    )
    path = tmp_path / "m.yaml"
    path.write_text(text)
    assert load_manifest(path).manifest.experiment.guards[0].kind == "per_category"


def test_newer_format_version_says_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(CLF.read_text().replace("ftmanifest: 1", "ftmanifest: 7"))
    with pytest.raises(UnsupportedVersionError) as info:
        load_document(path)
    assert "upgrade ftmanifest" in (info.value.hint or "")
    assert info.value.observed == "7" and info.value.line == 4


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("experiment: {id: a}\n", "format version is missing"),
        ("ftmanifest: one\n", "not a positive integer"),
        ("- a\n- b\n", "mapping of sections"),
        ("ftmanifest: 1\nx: .nan\n", "NaN"),
        ("ftmanifest: 1\nx: !!python/object:os.system {}\n", "tags are not supported"),
        ("ftmanifest: 1\n<<: {a: 1}\n", "merge keys"),
        ("ftmanifest: 1\n? [a, b]\n: 1\n", "not a string"),
        ("ftmanifest: 1\nexperiment: [\n", "YAML syntax"),
    ],
)
def test_bad_documents_get_a_clear_error(tmp_path: Path, content: str, expected: str) -> None:
    assert expected in _error(tmp_path, content).message


def test_yaml12_scalars(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "ftmanifest: 1\na: yes\nb: 0o17\nc: 2.0e-4\nd: ~\ne: '12'\nf: 2026-01-02\ng: 0x1F\n"
    )
    data = read_document(path).data
    assert data == {
        "ftmanifest": 1,
        "a": "yes",
        "b": 15,
        "c": 2.0e-4,
        "d": None,
        "e": "12",
        "f": "2026-01-02",
        "g": 31,
    }


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputNotFoundError) as info:
        load_document(tmp_path / "nope.yaml")
    assert isinstance(info.value, FileNotFoundError)


def test_schema_problems_are_all_reported_with_lines(mutate) -> None:  # type: ignore[no-untyped-def]
    path = mutate("  r: 16\n", "  r: sixteen\n", ("  owner:", "  ownr:"))
    with pytest.raises(ManifestInvalidError) as info:
        load_document(path)
    problems = {p.field: p for p in info.value.problems}
    assert set(problems) == {"method.r", "experiment.ownr"}
    assert problems["experiment.ownr"].hint == "did you mean 'owner'?"
    text = path.read_text().splitlines()
    assert "sixteen" in text[problems["method.r"].line - 1]
    assert text[problems["experiment.ownr"].line - 1].strip().startswith("ownr:")


# --- where a syntax error starts, huge integers, what is not a file -----


def test_yaml_error_points_where_the_unclosed_construct_starts(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text('ftmanifest: 1\nexperiment:\n  id: "x\n  task: a\nmodel:\n  path: m\n')
    with pytest.raises(ManifestError) as err:
        read_document(path)
    assert (err.value.line, err.value.column) == (3, 7)  # the opening quote, not the end
    assert "quoted scalar" in err.value.message and "line 7" in err.value.message
    path.write_text("ftmanifest: 1\nexperiment: {id: x\nmodel:\n  path: m\n")
    with pytest.raises(ManifestError) as err:
        read_document(path)
    assert (err.value.line, err.value.column) == (2, 13)  # the `{` left open


def test_tab_in_indentation_is_named(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    for text in ("ftmanifest: 1\nexperiment:\n\tid: x\n", "a:\n  b: 1\n\t c: 2\n"):
        path.write_text(text)
        with pytest.raises(ManifestError) as err:
            read_document(path)
        assert "tab in the indentation" in err.value.message
        assert err.value.line == 3 and err.value.hint and "spaces" in err.value.hint


@pytest.mark.parametrize(
    ("name", "text", "field"),
    [
        ("m.yaml", "ftmanifest: 1\nseeds: {python: 99999999999999999999}\n", "seeds.python"),
        ("m.yaml", "experiment: {changes: {lr: -9007199254740992}}\n", "experiment.changes.lr"),
        ("m.json", '{"experiment": {"changes": {"lr": 99999999999999999999}}}',
         "experiment.changes.lr"),
        ("m.toml", "[seeds]\ntorch = 9223372036854775807\n", "seeds.torch"),
        ("m.yaml", "experiment: {changes: {lr: 1e400}}\n", "experiment.changes.lr"),
        ("m.json", '{"experiment": {"changes": {"lr": 1e400}}}', "experiment.changes.lr"),
    ],
)  # fmt: skip
def test_numbers_the_canonical_form_cannot_hold_are_refused_naming_the_field(
    tmp_path: Path, name: str, text: str, field: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ManifestError) as err:
        read_document(path)
    assert err.value.field == field
    assert err.value.exit_code == 2


def test_the_largest_exact_integer_is_still_a_number(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("a: 9007199254740991\nb: -9007199254740991\n")
    assert read_document(path).data == {"a": 2**53 - 1, "b": -(2**53 - 1)}


def test_schema_bounds_every_integer_field() -> None:
    """The model refuses what lint's schema refuses: integers get a maximum."""
    from pydantic import ValidationError

    from ftmanifest.manifest.schema import generate
    from ftmanifest.manifest.training import Seeds

    with pytest.raises(ValidationError):
        Seeds(python=2**53)

    def integers(node: object) -> list[dict[str, object]]:
        if isinstance(node, dict):
            own = [node] if node.get("type") == "integer" and "const" not in node else []
            return own + [i for v in node.values() for i in integers(v)]
        if isinstance(node, list):
            return [i for v in node for i in integers(v)]
        return []

    found = integers(generate())
    assert found and all(i.get("maximum") == 2**53 - 1 for i in found), found


def test_fifo_and_device_are_refused_without_blocking(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "m.yaml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/null")):
        with pytest.raises(ManifestError) as err:
            read_document(path)
        assert "not a regular file" in err.value.message


def test_a_folder_is_refused_with_a_fix(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as err:
        read_document(tmp_path)
    assert "is a directory" in err.value.message and "*.yaml" in (err.value.hint or "")
