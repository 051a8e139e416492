"""Which records of a ledger are evidence, judged by trust from the project.

Layer: judging rooms (ledger; asks signing which trust file to use and
whether a signature holds).  A ledger *signs* when any of its records is
signed or ``$FTMANIFEST_LEDGER_KEY`` is set.  Then a record counts - for
verify's preflight check, the history audit and the report show, ``ledger
list`` - only when its signature verifies against the trust file; every other
record is *untrusted*, listed with the reason, and evidence for nothing
(one forged, unsigned preflight record silenced "preflight
missing").  A ledger that does not sign is read as before: its hash links are
all there is.

The trust file comes from the project, never from the ledger folder, which
whoever appends records can write: ``--trust``, ``$FTMANIFEST_TRUST_FILE``,
else ``.ftmanifest/allowed_signers`` at the root of the work tree holding the
manifest (``--manifest M``: ``signing.locate`` chooses it as for that
manifest's own signature) or the current folder; outside a work tree, that
folder.  A trust file that lies inside the ledger folder is refused, whoever
named it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ftmanifest.errors import FtManifestError
from ftmanifest.ledger.judge import signature_problems
from ftmanifest.ledger.recordfile import KEY_ENV, Contents, Entry, Problem
from ftmanifest.ledger.store import Ledger
from ftmanifest.signing.errors import TrustFileNotFoundError
from ftmanifest.signing.locate import (
    DEFAULT_TRUST,
    TRUST_ENV,
    TrustSource,
    choose_trust_file,
    refuse_inside,
)
from ftmanifest.signing.trust import load_trust


@dataclass(frozen=True)
class LedgerTrust:
    """The trust file that judges a ledger's signatures, or where none was found."""

    store: Any  # signing.trust.TrustStore; None when there is none
    source: TrustSource | None = None
    missing: Problem | None = None  # why there is none: where trust was looked for

    def to_dict(self) -> dict[str, Any]:
        if self.source is not None:
            return self.source.to_dict()
        gone = self.missing
        return {"path": gone.file if gone else None, "missing": True,
                "description": gone.observed if gone else None}  # fmt: skip


@dataclass(frozen=True)
class Untrusted:
    """A record that is no evidence, and why."""

    entry: Entry
    why: str

    def to_dict(self) -> dict[str, str]:
        return {"record": self.entry.id, "file": str(self.entry.file), "why": self.why}

    def warning(self) -> str:
        return untrusted_warning(self.to_dict())


def untrusted_warning(row: Mapping[str, str]) -> str:
    """The warning for one row of :meth:`Untrusted.to_dict`."""
    short = row["record"].removeprefix("sha256:")[:12]
    return (
        f"untrusted record {short} ({row['file']}): {row['why']}; it is not evidence for anything"
    )


@dataclass(frozen=True)
class Evidence:
    """The records that count (in ledger order) and those that do not."""

    entries: list[Entry]
    untrusted: list[Untrusted]


def choose_ledger_trust(
    ledger: Path,
    manifest: Path | None = None,
    option: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> LedgerTrust:
    """The project's trust file for the ledger folder ``ledger``; raises for a
    trust file that is unusable or lies inside ``ledger``."""
    # without a manifest the current folder stands where one would be named:
    # the project that runs the command, not the folder being judged
    anchor = manifest if manifest is not None else Path.cwd() / "ftmanifest.yaml"
    try:
        source = choose_trust_file(anchor, option, environ)
    except TrustFileNotFoundError as exc:
        return LedgerTrust(None, missing=_no_trust(exc.path or "", exc.observed, manifest))
    refuse_inside(
        source,
        ledger,
        "the ledger folder",
        "whoever can append records",
        "name the project's allowed_signers; never keep the trust file in the ledger",
    )
    return LedgerTrust(load_trust(source.path), source)


def reading_trust(ledger: Path, manifest: Path | None, option: Path | None = None) -> LedgerTrust:
    """:func:`choose_ledger_trust` for a reader that warns instead of failing
    (verify, audit): an unusable trust file leaves every signed record unchecked."""
    try:
        return choose_ledger_trust(ledger, manifest, option)
    except FtManifestError as exc:
        where = exc.path or str(option or DEFAULT_TRUST)
        return LedgerTrust(None, missing=_no_trust(where, f"{exc.message}: {where}", manifest))


def signs(entries: Sequence[Entry], environ: Mapping[str, str] | None = None) -> bool:
    """Whether the ledger signs: a record is signed, or a ledger key is configured."""
    env = os.environ if environ is None else environ
    return bool(env.get(KEY_ENV, "").strip()) or any(e.signature is not None for e in entries)


def evidence(
    entries: Sequence[Entry], trust: LedgerTrust | None, environ: Mapping[str, str] | None = None
) -> Evidence:
    """Split ``entries`` into evidence and untrusted records (all are evidence
    in a ledger that does not sign)."""
    if not signs(entries, environ):
        return Evidence(list(entries), [])
    good: list[Entry] = []
    bad: list[Untrusted] = []
    for entry in entries:
        why = _why_untrusted(entry, trust)
        if why is None:
            good.append(entry)
        else:
            bad.append(Untrusted(entry, why))
    return Evidence(good, bad)


def check_ledger(
    store: Ledger, trust: LedgerTrust, *, require_signed: bool, heads: Sequence[str] = ()
) -> tuple[Contents, list[Problem]]:
    """``Ledger.check`` with the project's trust; ``require_signed`` without a
    trust file is a problem naming where trust was looked for (required means
    required: a signature nobody checked proves nothing)."""
    contents, problems = store.check(trust=trust.store, require_signed=require_signed, heads=heads)
    if require_signed and trust.store is None and trust.missing is not None:
        problems.append(trust.missing)
    return contents, problems


def _why_untrusted(entry: Entry, trust: LedgerTrust | None) -> str | None:
    if entry.signature is None:
        return "not signed, in a ledger that signs"
    if trust is None or trust.store is None:
        where = trust.missing.file if trust is not None and trust.missing else str(DEFAULT_TRUST)
        return f"its signature cannot be checked: no trust file at {where}"
    for problem in signature_problems(entry, trust.store, require_signed=True):
        return problem.message + (f" ({problem.observed})" if problem.observed else "")
    return None


def _no_trust(path: str, observed: str | None, manifest: Path | None) -> Problem:
    near = "the manifest" if manifest is not None else "the current folder"
    return Problem(
        "ledger.no-trust",
        path,
        "no trust file to check the records' signatures against",
        expected=f"--trust PATH, ${TRUST_ENV}, or {DEFAULT_TRUST} at the root of the "
        f"repository holding {near} (outside a repository: in that folder); never a file "
        "beside the ledger",
        observed=observed or f"not found: {path}",
        hint=f"run from the project whose {DEFAULT_TRUST} trusts the ledger's signers, or "
        f"pass --manifest M or --trust PATH (CI: set {TRUST_ENV})",
    )
