"""Manifest: loading, validation, canonical form.

Layer: pure core.  Two entry points:

* ``load_document(path)`` - parse and check against the packaged JSON Schema;
  fast, no pydantic import (what ``lint`` uses).
* ``load_manifest(path)`` - the same, then build the pydantic ``Manifest``
  (what every command that acts on a manifest uses).
"""

from __future__ import annotations

import json

from ftmanifest.errors import ManifestError, ManifestInvalidError, UnsupportedVersionError
from ftmanifest.findings import Finding
from ftmanifest.location import format_loc
from ftmanifest.manifest.canonical import canonical_json, sha256_digest
from ftmanifest.manifest.load import Document, read_document
from ftmanifest.manifest.moved import moved_findings
from ftmanifest.manifest.renamed import renamed_keywords
from ftmanifest.manifest.unique import unique_findings
from ftmanifest.manifest.validate import schema_findings

TYPE_CHECKING = False  # no runtime `typing` on the lint path (see findings.py)

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from ftmanifest.manifest.model import Manifest

FORMAT_VERSION = 1

__all__ = ["Document", "LoadedManifest", "load_document", "load_manifest", "FORMAT_VERSION"]


def check_version(doc: Document) -> None:
    data = doc.data
    name = str(doc.path)
    if not isinstance(data, dict):
        raise ManifestError(
            "a manifest is a mapping of sections",
            path=name,
            line=1,
            column=1,
            expected="a mapping starting with 'ftmanifest: 1'",
            observed=type(data).__name__ if data is not None else "an empty document",
            hint="start from `ftmanifest init PATH`",
        )
    line, col = doc.position(("ftmanifest",))
    if "ftmanifest" not in data:
        raise ManifestError(
            "not an ftmanifest manifest: the format version is missing",
            path=name,
            line=1,
            column=1,
            field="ftmanifest",
            expected=f"ftmanifest: {FORMAT_VERSION}",
            observed="absent",
            hint=f"add 'ftmanifest: {FORMAT_VERSION}' as the first line",
        )
    version = data["ftmanifest"]
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ManifestError(
            "format version is not a positive integer",
            path=name,
            line=line,
            column=col,
            field="ftmanifest",
            expected=str(FORMAT_VERSION),
            observed=json.dumps(version, default=str),
            hint=f"write 'ftmanifest: {FORMAT_VERSION}'",
        )
    if version > FORMAT_VERSION:
        raise UnsupportedVersionError(
            f"manifest format {version} is newer than this ftmanifest understands",
            path=name,
            line=line,
            column=col,
            field="ftmanifest",
            expected=f"at most {FORMAT_VERSION}",
            observed=str(version),
            hint="upgrade ftmanifest (pip install -U ftmanifest)",
        )


def load_document(path: str | Path) -> Document:
    """Parse ``path`` and check it against the schema; raise on any problem."""
    doc = read_document(path)
    check_version(doc)
    moved = moved_findings(doc)
    # a moved field is named once, with where it went, not also as an unknown key
    gone = {f.loc for f in moved}
    problems = moved + [p for p in schema_findings(doc) if p.loc not in gone]
    problems = problems or unique_findings(doc)
    if problems:
        raise ManifestInvalidError(
            f"{len(problems)} schema problem(s)",
            path=str(doc.path),
            problems=problems,
        )
    return doc


class LoadedManifest:
    """A validated manifest and the document it came from."""

    def __init__(self, path: Path, document: Document, manifest: Manifest) -> None:
        self.path = path
        self.document = document
        self.manifest = manifest
        self._canonical: bytes | None = None

    def canonical(self) -> dict[str, Any]:
        """The JSON data whose RFC 8785 form is digested and signed (a fresh copy)."""
        import json

        data: dict[str, Any] = json.loads(self.canonical_bytes())
        return data

    def canonical_bytes(self) -> bytes:
        """The RFC 8785 form, computed once: the model is not changed after loading.

        Only what the file states (``exclude_unset``): a later ftmanifest
        that adds a field with a default does not change old digests.
        """
        if self._canonical is None:
            data = self.manifest.model_dump(mode="json", exclude_unset=True)
            self._canonical = canonical_json(data)
        return self._canonical

    def digest(self) -> str:
        return sha256_digest(self.canonical_bytes())


@renamed_keywords(path="manifest")
def load_manifest(manifest: str | Path) -> LoadedManifest:
    """Parse, schema-check and build the pydantic model of the file ``manifest``."""
    from pathlib import Path

    doc = load_document(manifest)
    return LoadedManifest(Path(manifest), doc, build_model(doc))


def build_model(doc: Document) -> Manifest:
    from pydantic import ValidationError

    from ftmanifest.manifest.model import Manifest  # lazy: pydantic; lint never builds the models

    try:
        return Manifest.model_validate_json(json.dumps(doc.data), strict=True)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = _data_loc(doc.data, tuple(err["loc"]))
            line, col = doc.position(loc)
            field = format_loc(loc) or "(document)"
            problems.append(
                Finding(
                    kind="schema",
                    rule="FTM000",
                    message=err["msg"],
                    path=str(doc.path),
                    line=line,
                    column=col,
                    field=field,
                    loc=loc,
                    observed=json.dumps(err.get("input"), default=str)[:80],
                )
            )
        raise ManifestInvalidError(
            f"{len(problems)} schema problem(s)",
            path=str(doc.path),
            problems=problems,
        ) from None


def _data_loc(data: Any, loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Drop pydantic's union tags from ``loc`` so it names places in the data."""
    out: list[Any] = []
    node = data
    for i, part in enumerate(loc):
        if isinstance(node, dict) and part in node:
            out.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            out.append(part)
            node = node[part]
        elif i == len(loc) - 1 and isinstance(node, dict):
            out.append(part)  # a missing field names itself
        # anything else is a tag pydantic adds for unions: skip it
    return tuple(out)
