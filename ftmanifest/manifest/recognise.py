"""Whether a file is a manifest, by its name or by its content.

Layer: pure core - manifest (reads one file's bytes, judges nothing but this).  The
pre-commit hook is handed every staged YAML, JSON and TOML file: a project's
``.pre-commit-config.yaml``, CI workflows, a model's ``config.json``, a
``pyproject.toml``.  A manifest is recognised by what makes it one, the
top-level ``ftmanifest:`` version key (a scalar: ``"ftmanifest": {...}`` in a
``package.json`` is another tool's settings), wherever it lies (``exp.yaml`` at the
root, as ``ftmanifest init`` and the README name it, or ``manifests/exp.yaml``).
A file that is plainly meant to be a manifest is linted even when it cannot be
read, so that a broken one fails rather than slipping through:

* its name ends ``.ftm.yaml``, ``.ftm.yml``, ``.ftm.json`` or ``.ftm.toml``;
* it does not parse, and a line starts with the ``ftmanifest`` key;
* it lies in a ``manifests/`` folder and does not parse, or is a mapping with
  a manifest's ``experiment`` and ``model`` sections but no version key.

Anything else is passed over.  A file without the word ``ftmanifest`` costs a
read and a byte search; one with it, a parse of its top level (what
``lint`` then checks in full).
"""

from __future__ import annotations

import json
import os
import re

from ftmanifest.manifest.load import MAX_BYTES, detect_format

TYPE_CHECKING = False  # no runtime `typing` on the pre-commit path (see findings.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

NAMED = re.compile(r"\.ftm\.(ya?ml|json|toml)$", re.IGNORECASE)
FOLDER = "manifests"
_WORD = b"ftmanifest"
# the version key at the start of a line: top level in YAML and TOML (column 0),
# and in JSON as pretty-printed or right after the opening brace
_KEY_AT_START = {
    "yaml": re.compile(rb"""(?m)^["']?ftmanifest["']?[ \t]*:"""),
    "toml": re.compile(rb"""(?m)^["']?ftmanifest["']?[ \t]*="""),
    "json": re.compile(rb"""(?m)(^[ \t]*|\{\s*)"ftmanifest"\s*:"""),
}
_SECTIONS = frozenset({"experiment", "model"})


def is_manifest(path: str) -> bool:
    """Whether ``lint`` should judge ``path`` (see the module's rules)."""
    if NAMED.search(path):
        return True
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError:
        return True  # lint says why it cannot be read
    fmt = detect_format(path)
    in_folder = os.path.basename(os.path.dirname(os.path.abspath(path))) == FOLDER
    if _WORD not in raw:
        if not in_folder:
            return False
        top = top_level(raw, fmt)
        return top is None or _SECTIONS <= top.keys()
    top = top_level(raw, fmt)
    if top is None:
        return in_folder or bool(_KEY_AT_START[fmt].search(raw))
    return "ftmanifest" in top and (top["ftmanifest"] or _SECTIONS <= top.keys())


def manifests_among(paths: Iterable[str]) -> list[str]:
    """The manifests among ``paths``, in their order."""
    return [p for p in paths if is_manifest(p)]


def top_level(raw: bytes, fmt: str) -> dict[str, bool] | None:
    """Each key of the document's top-level mapping and whether its value is a
    scalar (nothing for another kind of document), or None when the file is not
    well-formed.  Lenient on purpose: tags, duplicate keys and several YAML
    documents are lint's to refuse; each YAML document's keys count."""
    try:
        text = raw.decode("utf-8-sig")
        if fmt == "yaml":
            return _yaml_top_level(text)
        data = json.loads(text) if fmt == "json" else _toml_loads(text)
    except (ValueError, RecursionError):  # UnicodeDecodeError, JSON and TOML errors
        return None
    if not isinstance(data, dict):
        return {}
    return {k: not isinstance(v, (dict, list)) for k, v in data.items()}


def _yaml_top_level(text: str) -> dict[str, bool] | None:
    import yaml

    loader = getattr(yaml, "CBaseLoader", yaml.BaseLoader)
    try:
        docs = list(yaml.compose_all(text, Loader=loader))
    except (yaml.YAMLError, RecursionError, ValueError, TypeError):
        return None
    return {
        key.value: isinstance(value, yaml.ScalarNode)
        for doc in docs
        if isinstance(doc, yaml.MappingNode)
        for key, value in doc.value
        if isinstance(key, yaml.ScalarNode)
    }


def _toml_loads(text: str) -> dict[str, object]:
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10
        import tomli as tomllib
    # tomllib's own type; mypy targets 3.10, where tomli (untyped here) stands in
    data: dict[str, object] = tomllib.loads(text)
    return data
