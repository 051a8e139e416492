"""Baseline files: one accepted finding of one file each, with the reason it is accepted.

Layer: judging rooms - core filtering; ``write`` goes through the one atomic writer
(``ftmanifest.fsutil``) and ``apply`` reads the digests of the files its
findings name (``ftmanifest.hashing``, stat-cached).  Format (JSON)::

  {"version": 2, "entries": [{"path": "models/clf.joblib", "digest": "sha256:...",
                              "rule": "pickle.unsafe-import", "fingerprint": "...",
                              "location": {"field": null, "line": null, "column": null,
                                           "offset": 53},
                              "reason": "..."}]}

An entry accepts the finding of ``rule`` with ``fingerprint`` at ``location``
in the file at ``path`` (relative to the baseline's folder) whose content has
``digest``, and nothing else: the same import or secret in another file, or in
this file once its bytes changed, is a finding again.  A finding about a file's
*name* has no digest (the name is what it judges).  Version 1 files keyed an
entry by rule and value alone, so accepting one file's import accepted it in
every file; they are refused with a message to regenerate them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ftmanifest.errors import InputError, InputNotFoundError
from ftmanifest.findings import Finding
from ftmanifest.fsutil import atomic_write_text
from ftmanifest.hashing.files import hash_files

VERSION = 2
REASON_PLACEHOLDER = "TODO: say why this finding is accepted"
_LOCATION = ("field", "line", "column", "offset")
_REGENERATE = "regenerate it with ftmanifest scan PATH... --write-baseline FILE"

Key = tuple[str, str | None, str, str, tuple[Any, ...]]
"""(path relative to the baseline's folder, content digest, rule, fingerprint, location)"""


@dataclass(frozen=True)
class Baseline:
    """The accepted findings of one baseline file; paths are relative to ``root``."""

    root: Path
    entries: dict[Key, dict[str, Any]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.entries)


def load(path: Path) -> Baseline:
    """The baseline at ``path``; an old (version 1) or broken file is an ``InputError``."""
    doc = _read(path)
    version = doc.get("version") if isinstance(doc, dict) else None
    if version == 1:
        raise InputError(
            "baseline version 1 accepts a rule's value in every file, not one finding of "
            "one file; it is no longer read",
            path=str(path),
            field="version",
            expected=str(VERSION),
            observed="1",
            hint=f"{_REGENERATE}, then review each entry's reason",
        )
    if version != VERSION:
        raise InputError(
            "unsupported baseline version",
            path=str(path),
            field="version",
            expected=str(VERSION),
            observed=repr(version),
            hint=_REGENERATE,
        )
    try:
        entries = {_entry_key(e): e for e in doc["entries"]}
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise InputError(
            "baseline file is not valid",
            path=str(path),
            field="entries",
            observed=f"{type(exc).__name__}: {exc}",
            hint=_REGENERATE,
        ) from None
    return Baseline(_root(path), entries)


def _read(path: Path) -> Any:
    if not path.exists():
        raise InputNotFoundError("baseline file does not exist", path=str(path),
                                 hint="create one with --write-baseline")  # fmt: skip
    if not path.is_file():  # a folder, a FIFO (whose open would block) or a device
        raise InputError(
            "baseline is not a regular file",
            path=str(path),
            expected="a JSON baseline file",
            hint="give the path of a file written by --write-baseline",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise InputError(
            f"cannot read the baseline file: {reason or exc}",
            path=str(path),
            expected="a JSON baseline file",
            hint="give the path of a file written by --write-baseline",
        ) from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InputError("baseline file is not valid JSON", path=str(path), observed=str(exc),
                         hint=_REGENERATE) from None  # fmt: skip


def _root(baseline_path: Path) -> Path:
    return Path(os.path.abspath(baseline_path)).parent


def _entry_key(e: Mapping[str, Any]) -> Key:
    loc = e["location"]
    if not isinstance(e["path"], str) or not isinstance(e["rule"], str):
        raise TypeError("path and rule must be strings")
    digest = e["digest"]
    if digest is not None and not isinstance(digest, str):
        raise TypeError("digest must be a string or null")
    return (e["path"], digest, e["rule"], str(e["fingerprint"]), tuple(loc[k] for k in _LOCATION))


def _location(f: Finding) -> tuple[Any, ...]:
    extra = f.extra or {}
    offset = extra.get("offset")
    return (f.field, f.line, f.column, offset if isinstance(offset, int) else None)


def _about_name(f: Finding) -> bool:
    return (f.extra or {}).get("in") == "name"


def _keys(findings: Sequence[Finding], root: Path) -> list[Key | None]:
    """Each finding's key (None: it cannot be accepted: no fingerprint, no path, no digest)."""
    content = {f.path for f in findings if f.fingerprint and f.path and not _about_name(f)}
    digests = _digests(content)
    out: list[Key | None] = []
    for f in findings:
        if not f.fingerprint or not f.path:
            out.append(None)
            continue
        digest = None if _about_name(f) else digests.get(f.path)
        if digest is None and not _about_name(f):
            out.append(None)  # unreadable now: nothing can say it is the accepted content
            continue
        rel = Path(os.path.relpath(os.path.abspath(f.path), root)).as_posix()
        out.append((rel, digest, f.rule, f.fingerprint, _location(f)))
    return out


def _digests(paths: Iterable[str]) -> dict[str, str]:
    wanted = sorted(paths)
    if not wanted:
        return {}
    got = hash_files([Path(p) for p in wanted])
    out = {}
    for p in wanted:
        digest = getattr(got.get(Path(p)), "digest", None)
        if isinstance(digest, str):
            out[p] = digest
    return out


def write(path: Path, findings: Sequence[Finding], previous: Baseline | None = None) -> int:
    """Accept every fingerprinted finding; an entry already there keeps its reason."""
    root = _root(path)
    kept = previous.entries if previous is not None and previous.root == root else {}
    entries: dict[Key, dict[str, Any]] = {}
    for key in _keys(findings, root):
        if key is None or key in entries:
            continue
        rel, digest, rule, fp, loc = key
        entries[key] = {
            "path": rel,
            "digest": digest,
            "rule": rule,
            "fingerprint": fp,
            "location": dict(zip(_LOCATION, loc, strict=True)),
            "reason": kept.get(key, {}).get("reason", REASON_PLACEHOLDER),
        }
    order = sorted(entries.values(), key=lambda e: (e["path"], e["rule"], e["fingerprint"],
                                                    json.dumps(e["location"])))  # fmt: skip
    atomic_write_text(path, json.dumps({"version": VERSION, "entries": order}, indent=2) + "\n")
    return len(entries)


def previous_reasons(path: Path) -> Baseline | None:
    """The baseline ``--write-baseline`` replaces, for its reasons; None when there is
    none or it is an old version (its entries cannot be matched to one file)."""
    if not path.exists():
        return None
    doc = _read(path)
    if isinstance(doc, dict) and doc.get("version") == 1:
        return None
    return load(path)


def apply(
    findings: Sequence[Finding], accepted: Baseline, baseline_path: str
) -> tuple[list[Finding], int]:
    """Drop accepted findings; add an info finding per entry that matched nothing."""
    keys = _keys(findings, accepted.root)
    known = accepted.entries
    kept = [f for f, k in zip(findings, keys, strict=True) if k is None or k not in known]
    seen = {k for k in keys if k is not None}
    here = {(k[0], k[2], k[3]) for k in keys if k is not None}
    stale = []
    for key in accepted.entries:
        if key in seen:
            continue
        changed = (key[0], key[2], key[3]) in here
        why = "the file changed since it was accepted" if changed else "it matches nothing"
        stale.append(
            Finding(
                kind="baseline",
                rule="scan.baseline-stale",
                severity="info",
                message=f"baseline entry for {key[2]} in {key[0]}: {why}",
                path=baseline_path,
                fingerprint=key[3],
                hint="review the finding again; rewrite the baseline with --write-baseline "
                "if it is still accepted, else remove the entry",
            )
        )
    return kept + stale, len(findings) - len(kept)
