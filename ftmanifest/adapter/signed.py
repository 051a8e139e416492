"""The signed binding beside an adapter: sign it, read it, judge its subjects.

Layer: judging rooms - signing client (edge: reads and writes the envelope, hashes the
adapter's files).  The envelope is ``ENVELOPE_NAME`` in the adapter folder,
a DSSE/in-toto statement of type ``PREDICATE_TYPE`` whose subjects are every
other file of the folder.  Reading never raises on a refusal: a missing,
unsigned, malformed or untrusted binding and a changed, added or removed
adapter file are findings (``adapter.binding-*``, ``adapter.files-changed``).
A missing or malformed trust file is the user's input error (exit 2), as for
``verify``.  Trust is looked up as for a manifest (``signing.locate``), from
the manifest when one is given, else from the adapter folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ftmanifest.adapter.architecture import finding
from ftmanifest.adapter.binding import ENVELOPE_NAME, PREDICATE_TYPE, Binding
from ftmanifest.errors import FtManifestError
from ftmanifest.findings import Finding
from ftmanifest.fsutil import atomic_write_bytes
from ftmanifest.hashing.files import hash_files
from ftmanifest.hashing.walk import list_tree
from ftmanifest.signing import ENVELOPE_MAX_BYTES
from ftmanifest.signing.attest import sign_statement, verify_statement
from ftmanifest.signing.errors import (
    FileTooLargeError,
    NotRegularFileError,
    SignatureRefusedError,
    SigningInputError,
)
from ftmanifest.signing.intoto import Subject
from ftmanifest.signing.locate import choose_trust_file
from ftmanifest.signing.trust import load_trust
from ftmanifest.untrusted import read_untrusted


@dataclass(frozen=True)
class SignedBinding:
    """What reading the envelope established."""

    binding: Binding | None = None
    signers: tuple[str, ...] = ()
    findings: list[Finding] = field(default_factory=list)


def sign_binding(
    folder: Path, binding: Binding, key: Any, *, use_cache: bool = True
) -> tuple[Path, tuple[str, ...]]:
    """Sign ``binding`` with every file of ``folder`` (but the envelope) as a
    subject; write the envelope beside them.  Returns its path and the subjects."""
    import dataclasses

    listing = {r: p for r, p in list_tree(folder).items() if r != ENVELOPE_NAME}
    digests = hash_files(listing.values(), use_cache=use_cache)
    binding = dataclasses.replace(binding, file_sizes={r: _size(p) for r, p in listing.items()})
    subjects = []
    for rel, p in listing.items():
        got = digests[p]
        if isinstance(got, FtManifestError):
            raise got
        subjects.append(Subject.from_digest(rel, got.digest))
    envelope = sign_statement(subjects, PREDICATE_TYPE, binding.predicate(), key)
    target = folder / ENVELOPE_NAME
    atomic_write_bytes(target, envelope.to_bytes())
    return target, tuple(listing)


def read_signed(
    adapter_dir: Path,
    *,
    search_from: str | Path | None = None,
    trust_path: Path | None = None,
    now: datetime | None = None,
    use_cache: bool = True,
) -> SignedBinding:
    """Verify the signed binding of ``adapter_dir``: the binding and its
    signers, or the findings that say why not; then its subjects."""
    env = adapter_dir / ENVELOPE_NAME
    where = str(adapter_dir)
    bind_hint = f"bind it: ftmanifest bind {adapter_dir} --manifest M --key KEY"
    try:
        raw = read_untrusted(env, limit=ENVELOPE_MAX_BYTES, what="adapter binding",
                             hint="do not trust it; " + bind_hint)  # fmt: skip
    except FileNotFoundError:
        return SignedBinding(findings=[finding(
            "binding-missing", "the adapter has no signed binding", path=where,
            field=ENVELOPE_NAME, expected=f"a signed binding at {env}", observed="absent",
            hint=bind_hint,
        )])  # fmt: skip
    except (NotRegularFileError, FileTooLargeError) as exc:
        return SignedBinding(findings=[_malformed(env, exc, bind_hint)])
    source = choose_trust_file(Path(search_from) if search_from else env, trust_path)
    trust = load_trust(source.path)  # a bad trust file is the user's input error (exit 2)
    try:
        verified = verify_statement(raw, trust=trust, now=now, path=env,
                                    expected_predicate_type=PREDICATE_TYPE)  # fmt: skip
    except SignatureRefusedError as exc:
        return SignedBinding(findings=[finding(
            "binding-untrusted", f"the binding's signature is refused ({exc.reason})",
            path=str(env), field="signature", expected=exc.expected or "a trusted signature",
            observed=exc.observed or exc.message, hint=exc.hint, extra={"reason": exc.reason},
        )])  # fmt: skip
    except SigningInputError as exc:  # the envelope itself (trust was loaded above)
        return SignedBinding(findings=[_malformed(env, exc, bind_hint)])
    signers = tuple(sorted({p for s in verified.verdict.signatures
                            if s.status == "valid" for p in s.principals}))  # fmt: skip
    try:
        binding = Binding.from_predicate(verified.predicate)
    except ValueError as exc:
        findings = files_findings(adapter_dir, verified.statement, use_cache)
        return SignedBinding(None, signers, [finding(
            "binding-malformed", f"the signed binding is not one ftmanifest reads: {exc}",
            path=str(env), field="predicate", expected=PREDICATE_TYPE, observed=str(exc),
            hint=bind_hint,
        ), *findings])  # fmt: skip
    findings = files_findings(adapter_dir, verified.statement, use_cache, binding.file_sizes)
    return SignedBinding(binding, signers, findings)


def _malformed(env: Path, exc: Any, hint: str) -> Finding:
    """A binding file that is no signed binding: unsigned (no signatures) or malformed."""
    unsigned = exc.field == "signatures"
    return finding(
        "binding-unsigned" if unsigned else "binding-malformed",
        "the binding carries no signature" if unsigned
        else f"the binding is not a signed binding ftmanifest reads ({exc.reason})",
        path=str(env), field=exc.field or ENVELOPE_NAME,
        expected=f"a DSSE envelope signing a {PREDICATE_TYPE} statement",
        observed=exc.observed or exc.message, hint="do not trust it; " + hint,
        extra={"reason": exc.reason},
    )  # fmt: skip


def _size(path: Path) -> int:
    return path.stat().st_size


def files_findings(
    folder: Path, statement: Any, use_cache: bool, sizes: dict[str, int] | None = None
) -> list[Finding]:
    """Every adapter file is a subject, with the digest it was bound with.

    Only subjects of the bound size are hashed: a file that appeared, or one
    whose size is not the bound one (``sizes``, from the signed predicate), is
    refused by its name and size, so a terabyte of holes costs a ``stat``."""
    listing = {r: p for r, p in list_tree(folder).items() if r != ENVELOPE_NAME}
    bound = {s.name for s in statement.subjects}
    sizes = sizes or {}
    seen_size = {r: _stat_size(p) for r, p in listing.items()}
    to_hash = [p for r, p in listing.items()
               if r in bound and (r not in sizes or sizes[r] == seen_size[r])]  # fmt: skip
    digests = hash_files(to_hash, use_cache=use_cache)
    out: list[Finding] = []
    rebind = f"undo the change, or bind again: ftmanifest bind {folder} --manifest M --key KEY"
    for rel, p in listing.items():
        got = digests.get(p)
        if got is None:
            seen = seen_size[rel] if isinstance(seen_size[rel], str) else f"{seen_size[rel]} bytes"
        else:
            seen = got.message if isinstance(got, FtManifestError) else got.digest
        want = statement.digest_of(rel)
        if want is None or want != seen:
            out.append(finding(
                "files-changed", f"adapter file {rel} changed after binding"
                if want else f"adapter file {rel} appeared after binding",
                path=str(p), field=rel, expected=want or "no such file", observed=seen,
                hint=rebind,
            ))  # fmt: skip
    for rel in sorted(bound - set(listing)):
        out.append(finding(
            "files-changed", f"adapter file {rel} is gone since binding", path=str(folder / rel),
            field=rel, expected=statement.digest_of(rel), observed="absent", hint=rebind,
        ))  # fmt: skip
    return out


def _stat_size(path: Path) -> int | str:
    """The size of a regular file, else what it is (never opened)."""
    import stat

    try:
        st = path.stat()
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    return st.st_size if stat.S_ISREG(st.st_mode) else "not a regular file"
