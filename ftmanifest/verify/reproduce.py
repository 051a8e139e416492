"""``reproduce``: what it takes to rerun a colleague's signed manifest on this machine.

Layer: judging rooms - drift/verify (orchestration).  Checks the signature and trust
first (a refusal propagates before anything is written), runs ``verify`` without the
signature and scan, sorts its rows into groups, writes exact package pins beside the
manifest and lists the commands that close the gaps.  Returns a ``ReproducePlan``; the
CLI prints it and chooses the exit code.

pip reads any requirements line starting with ``-`` as an option and splits
lines where ``str.splitlines`` does; the commands are pasted into a shell.
So every package is a PEP 508 name with a PEP 440 version or specifier (a
refusal names the field otherwise) and every word of a command is quoted
with ``shlex.quote``, whoever signed the manifest.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ftmanifest.errors import InputError
from ftmanifest.findings import Finding
from ftmanifest.fsutil import atomic_write_text
from ftmanifest.location import format_loc
from ftmanifest.manifest import load_manifest
from ftmanifest.manifest.patterns import COMMIT_RE, PACKAGE_NAME_PATTERN
from ftmanifest.safe_text import escape
from ftmanifest.signing.verify import verify_manifest_signature
from ftmanifest.statcache import cache_dir
from ftmanifest.verify import verify_manifest

GROUPS = ("packages", "python", "backend", "model", "data", "code", "other")
PLATFORM_KEYS = frozenset({"kind", "devices", "driver"})
# how verify words a model that is not here at all
_MISSING = re.compile(
    r"missing|not found|cannot find|no such|does not exist|absent|not here", re.IGNORECASE
)
_OPERATOR = re.compile(r"^\s*(===|==|~=|!=|<=|>=|<|>)")
_PACKAGE_NAME = re.compile(PACKAGE_NAME_PATTERN)
PREFLIGHT = "stack, step, overfit, determinism, throughput"


@dataclass(frozen=True)
class Row:
    field: str
    expected: str | None
    observed: str | None

    def to_dict(self) -> dict[str, str | None]:
        return {"field": self.field, "expected": self.expected, "observed": self.observed}


@dataclass
class ReproducePlan:
    manifest_path: Path
    manifest_digest: str
    signature: Any  # signing.verify.SignatureReport, None when not checked
    groups: dict[str, list[Row]]
    requirements_path: Path
    pins: list[str]
    unpinned: list[str]  # packages whose manifest value is not one exact version
    commands: list[str]
    notes: list[str] = field(default_factory=list)
    platform_change: bool = False
    platform_from: str = ""
    platform_to: str = ""
    model_missing: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def reproducible(self) -> bool:
        return not any(self.groups.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "manifest": str(self.manifest_path),
            "digest": self.manifest_digest,
            "signature": self.signature.to_dict() if self.signature is not None else None,
            "reproducible": self.reproducible,
            "groups": {g: [r.to_dict() for r in rows] for g, rows in self.groups.items() if rows},
            "model_missing": self.model_missing,
            "requirements": str(self.requirements_path),
            "pins": self.pins,
            "unpinned": self.unpinned,
            "commands": self.commands,
            "notes": self.notes,
            "platform_change": self.platform_change,
            "warnings": self.warnings,
        }


def group_of(finding: Finding) -> str:
    """The group a verify row belongs to, from its location."""
    loc = tuple(finding.loc or ())
    if not loc and finding.field:
        loc = tuple(re.split(r"[.\[\]]+", finding.field.strip(".[]")))
    head = loc[0] if loc else None
    if head == "environment" and len(loc) > 1:
        sub = loc[1]
        if sub == "packages":
            return "packages"
        if sub == "python":
            return "python"
        if sub == "backend":
            return "backend"
        if sub == "code":
            return "code"
        return "other"
    if head in ("model", "data"):
        return str(head)
    return "other"


def _is_platform(finding: Finding) -> bool:
    loc = tuple(finding.loc or ())
    return len(loc) > 2 and loc[:2] == ("environment", "backend") and loc[2] in PLATFORM_KEYS


def pin_line(name: str, value: str) -> str | None:
    """``name==version`` for an exact pin (``==x``, ``===x`` or a bare version); else None."""
    text = value.strip()
    match = _OPERATOR.match(text)
    if match is None:
        version = text
    elif match.group(1) in ("==", "==="):
        version = text[len(match.group(1)) :].strip()
    else:
        return None
    if not version or "*" in version or "," in version or " " in version:
        return None
    return f"{name}=={version}"


def requirement(name: str, value: str, manifest_path: Path) -> tuple[str | None, str]:
    """(the ``name==version`` line or None, the value shown when not one exact
    version) for a package of the manifest; raises ``InputError`` naming the
    field unless ``name`` is a PEP 508 name and ``value`` a PEP 440 version or
    specifier, so nothing pip reads as an option or a new line gets written."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    field = format_loc(("environment", "packages", name))
    if not _PACKAGE_NAME.fullmatch(name):
        raise _bad_package(manifest_path, field, "a distribution name (PEP 508)", name, name)
    line = pin_line(name, value)
    try:
        if line is not None:
            Version(line.split("==", 1)[1])
        else:
            SpecifierSet(value)
    except (InvalidVersion, InvalidSpecifier):
        raise _bad_package(
            manifest_path,
            field,
            "a PEP 440 version (==2.13.0) or specifier (>=2.0,<3)",
            value,
            name,
        ) from None
    return line, value.strip()


def _bad_package(
    manifest_path: Path, field: str, expected: str, observed: str, name: str
) -> InputError:
    return InputError(
        f"{field} cannot go into a requirements file: pip would read it as something else",
        path=str(manifest_path),
        field=field,
        expected=expected,
        observed=repr(observed),
        hint=f"write '{name}: ==<version>' (`ftmanifest lock` pins what is installed), "
        "sign the manifest again and rerun reproduce",
    )


def _sha256(path: Path) -> str | None:
    """``sha256:<hex>`` of a regular file; None when it is not one or cannot be read."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None
        h = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return None
    return "sha256:" + h.hexdigest()


def default_requirements_path(manifest_path: Path, digest: str) -> Path:
    """Outside the work tree: ftmanifest's cache, named by the manifest's stem and
    digest.  Beside the manifest it was an uncommitted file that made the
    colleague's next ``verify`` refuse the code as dirty."""
    short = digest.split(":", 1)[-1][:12]
    return cache_dir() / "reproduce" / f"{manifest_path.stem}-{short}.requirements.txt"


# PyTorch publishes its local builds (2.13.0+cpu, +cu128, +rocm6.4) on its own
# index, one per label; the package index has only the public version.
TORCH_FAMILY = frozenset({"torch", "torchvision", "torchaudio", "triton", "pytorch-triton"})
TORCH_INDEX = "https://download.pytorch.org/whl/{label}"
_TORCH_LABEL = re.compile(r"cpu|cu[0-9]{2,4}|rocm[0-9]+(\.[0-9]+){0,2}|xpu")


def installable(line: str) -> tuple[str, str | None, str | None]:
    """(the pin pip can install, the index it needs or None, a note or None) for
    ``name==version``.  A local version (``+cpu``) is on no package index: a
    PyTorch build keeps its exact pin and names PyTorch's index for its label;
    any other becomes its public version, with a note saying what differs."""
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    name, version = line.split("==", 1)
    local = Version(version).local
    if local is None:
        return line, None, None
    if canonicalize_name(name) in TORCH_FAMILY and _TORCH_LABEL.fullmatch(local):
        return line, TORCH_INDEX.format(label=local), None
    public = Version(version).public
    return (
        f"{name}=={public}",
        None,
        f"{name} {version} is a local build (+{local}) no index serves: the "
        f"requirements pin {public}; install the build the manifest names by hand",
    )


def build_plan(
    path: str | Path,
    *,
    requirements: Path | None = None,
    signature: bool = True,
    trust_path: Path | None = None,
    threshold: int = 1,
    code_dir: Path | None = None,
    allow_outside: bool = False,
    write: bool = True,
) -> ReproducePlan:
    """The plan to rerun the manifest at ``path`` here; raises on an untrusted signature
    before anything is observed or written."""
    manifest_path = Path(path)
    loaded = load_manifest(manifest_path)
    sig_report = None
    warnings: list[str] = []
    if signature:
        sig_report = verify_manifest_signature(
            manifest_path, loaded.canonical(), trust_path=trust_path, threshold=threshold
        )
    else:
        warnings.append(
            "signature NOT checked (--no-signature): this manifest may have been "
            "altered or signed by no one you trust"
        )
    req_path = requirements or default_requirements_path(manifest_path, loaded.digest())
    try:  # an earlier run's file is itself an uncommitted file
        earlier = req_path.exists()
    except OSError:
        earlier = False
    report = verify_manifest(
        manifest_path,
        signature=False,
        scan=False,
        code_dir=code_dir,
        allow_outside=allow_outside,
    )
    groups: dict[str, list[Row]] = {g: [] for g in GROUPS}
    platform = []
    for f in report.findings:
        groups[group_of(f)].append(Row(str(f.field or f.rule), f.expected, f.observed))
        if _is_platform(f):
            platform.append(f)
    model_rows = [f for f in report.findings if group_of(f) == "model"]
    model_missing = any(f.rule == "drift.model-unchecked" for f in model_rows) or any(
        _MISSING.search(str(f.observed or "")) for f in model_rows
    )

    m = loaded.manifest
    pins: list[str] = []
    unpinned: list[str] = []
    indexes: list[str] = []
    notes: list[str] = []
    for name, value in m.environment.packages.items():
        line, shown = requirement(name, value, manifest_path)
        if line is None:
            unpinned.append(f"{name} {shown}")
            continue
        pin, index, note = installable(line)
        pins.append(pin)
        if index is not None and index not in indexes:
            indexes.append(index)
        if note is not None:
            notes.append(note)
    text = (
        f"# exact pins from {escape(manifest_path.name)} ({loaded.digest()}), "
        "written by ftmanifest reproduce\n"
        + "".join(f"--extra-index-url {i}  # PyTorch's local builds\n" for i in indexes)
        + "".join(f"{p}\n" for p in pins)
        + "".join(f"# not one exact version, pin it by hand: {u}\n" for u in unpinned)
    )
    if write:
        try:
            req_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass  # the write below names the problem
        atomic_write_text(req_path, text)

    commands = [_shell("pip", "install", "-r", str(req_path))]
    lock = m.environment.lock
    if lock is not None and lock.digest:
        lock_path = manifest_path.parent / lock.path
        have = _sha256(lock_path)
        if have == lock.digest:
            try:
                hashed = "--hash=" in lock_path.read_text("utf-8", errors="replace")
            except OSError:
                hashed = False
            if hashed:
                install = _shell("pip", "install", "--require-hashes", "-r", str(lock_path))
                commands.append(install)
                notes.append(f"hash-pinned installs: {install}")
            else:
                install = _shell("pip", "install", "-r", str(lock_path))
                commands.append(install)
                notes.append(
                    f"lock file {lock_path} matches the manifest but has no --hash lines: "
                    f"{install} (--require-hashes would refuse it)"
                )
        elif have is None:
            notes.append(f"lock file {lock.path} is not beside the manifest: only the plain pins")
        else:
            notes.append(
                f"lock file {lock.path} differs from the manifest's digest: only the plain pins"
            )

    if m.model.repo is not None and model_missing:
        rev = m.model.revision or ""
        if COMMIT_RE.match(rev):
            commands.append(_shell("hf", "download", m.model.repo, "--revision", rev))
        else:
            notes.append(
                f"the manifest is not pinned: model.revision {rev or '(none)'!r} is not a "
                f"40-hex commit, so no download command is given for {m.model.repo}"
            )

    if earlier and any(f.field == "environment.code.dirty" for f in report.findings):
        notes.append(
            f"{req_path} (from an earlier run) may be what makes the code tree dirty: "
            "ignore it in .gitignore, or write it elsewhere with --requirements"
        )
    plan = ReproducePlan(
        manifest_path=manifest_path,
        manifest_digest=loaded.digest(),
        signature=sig_report,
        groups=groups,
        requirements_path=req_path,
        pins=pins,
        unpinned=unpinned,
        commands=commands,
        notes=notes,
        model_missing=model_missing,
        warnings=warnings,  # verify's own warning is only its skipped signature
    )
    if platform:
        plan.platform_change = True
        plan.platform_from = "; ".join(f"{f.field} {f.expected}" for f in platform)
        plan.platform_to = "; ".join(str(f.observed) for f in platform)
        plan.notes.append(
            f"platform differs ({plan.platform_from} -> {plan.platform_to}): redo the start "
            f"and quality checks (ftmanifest preflight when available: {PREFLIGHT}) "
            "before trusting results"
        )
    return plan


def _shell(*words: str) -> str:
    """A command line to paste into a shell: every word quoted."""
    return shlex.join(words)
