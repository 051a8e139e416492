"""The drift rows of the interpreter judgement: file, field, expected, observed, fix.

Layer: judging rooms (verify), private to ``verify.interpreter``.  Every row is
a ``Finding`` of kind ``drift`` whose ``rule`` is its stable reason code:

- ``drift.module-record``: an installed file whose sha256 is not its RECORD's;
- ``drift.module-unrecorded``: a file in a distributions' folder no RECORD lists;
- ``drift.module-code``: a repository file that is not the pinned commit's blob;
- ``drift.module-untracked``: a repository file the pinned commit does not have;
- ``drift.module-unjudged``: a file no rule judges (and no allowed path holds);
- ``drift.bytecode``: a ``.pyc`` the loader runs that is not its source's compilation;
- ``drift.pth``: a ``.pth`` file no RECORD lists with its hash;
- ``drift.sitecustomize``: ``sitecustomize``/``usercustomize`` from an unjudged file;
- ``drift.editable``: an editable install of a pinned package;
- ``drift.startup-variable``: PYTHONPATH, LD_PRELOAD... set and not pinned with that value;
- ``drift.ld-so-preload``: ``/etc/ld.so.preload`` names a library;
- ``drift.interpreter``: the executable is not the base installation's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ftmanifest.findings import Finding
from ftmanifest.hashing.digests import FileDigest
from ftmanifest.manifest.patterns import normalize_name
from ftmanifest.verify.drift_row import row

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ftmanifest.location import Loc
    from ftmanifest.manifest.model import Manifest
    from ftmanifest.probe.records import Distribution, RecordedFile
    from ftmanifest.verify._interpreter_places import Where

MAX_ROWS = 12  # per rule; the rest in one row
ALLOW: Loc = ("environment", "interpreter", "allow_paths")
CODE: Loc = ("environment", "code", "commit")
_ALLOW_FIX = (
    "or, to run it unjudged on purpose, add its folder to environment.interpreter.allow_paths "
    "and sign again"
)


def _named(names: list[str]) -> str:
    unique = sorted(set(names))
    more = f" and {len(unique) - 3} more" if len(unique) > 3 else ""
    return ", ".join(unique[:3]) + more


def package_loc(manifest: Manifest, name: str) -> Loc:
    pinned = {normalize_name(n): n for n in manifest.environment.packages}
    key = pinned.get(normalize_name(name))
    return ("environment", "packages", key) if key else ("environment", "packages")


def reinstall(dist: Distribution) -> str:
    version = f"=={dist.version}" if dist.version else ""
    return f"pip install --force-reinstall --no-deps '{dist.name}{version}'"


def recorded_file(
    path: str,
    names: list[str],
    recorded: RecordedFile,
    digest: FileDigest | Exception | None,
    manifest: Manifest,
) -> Finding | None:
    """None when the file's sha256 is its RECORD's, else the row."""
    dist = recorded.distribution
    label = f"{dist.name} {dist.version or ''}".strip()
    have = digest.digest if isinstance(digest, FileDigest) else f"unreadable: {digest}"
    if recorded.digest is not None and recorded.digest == have:
        return None
    want = recorded.digest or recorded.problem or "a sha256 (RECORD gives none)"
    return row(
        "drift.module-record",
        package_loc(manifest, dist.name),
        f"installed file of {label} is not the file its RECORD lists (module {_named(names)})",
        f"{want} (RECORD of {label})",
        have,
        f"reinstall it: {reinstall(dist)}",
        path=path,
    )


def unrecorded(path: str, names: list[str], folder: str | None) -> Finding:
    return row(
        "drift.module-unrecorded",
        ALLOW,
        f"module {_named(names)} runs from a file no installed distribution's RECORD lists",
        f"a file listed in the RECORD of a distribution in {folder}",
        "listed by no RECORD",
        "remove it, or reinstall the package it should belong to; " + _ALLOW_FIX,
        path=path,
    )


def unjudged(path: str, names: list[str], words: str) -> Finding:
    return row(
        "drift.module-unjudged",
        ALLOW,
        f"module {_named(names)} runs from a file the manifest does not pin",
        "the pinned repository's files, an installed distribution's RECORD, the "
        "standard library, or environment.interpreter.allow_paths",
        words,
        "commit it to the training repository and lock, or install it as a package; " + _ALLOW_FIX,
        path=path,
    )


def not_in_commit(path: str, names: list[str], rel: str, commit: str, words: str) -> Finding:
    return row(
        "drift.module-untracked",
        CODE,
        f"module {_named(names)} runs from {rel}, which the pinned commit does not have ({words})",
        f"a file of commit {commit[:12]}",
        f"{words} file",
        f"commit {rel} (git add -f if it is ignored) and run ftmanifest lock, or stop importing it",
        path=path,
    )


def repo_changed(
    path: str, names: list[str], rel: str, commit: str, want: str, have: str
) -> Finding:
    return row(
        "drift.module-code",
        CODE,
        f"module {_named(names)} runs from {rel}, whose content is not the pinned commit's",
        f"blob {want} (commit {commit[:12]})",
        f"blob {have}",
        f"git checkout {commit[:12]} -- {rel}, or commit the change and lock again",
        path=path,
    )


def customize(name: str, path: str, words: str) -> Finding:
    return row(
        "drift.sitecustomize",
        ALLOW,
        f"{name} runs at every interpreter start from a file the manifest does not pin",
        f"no {name}, or one from an installed distribution's RECORD or the pinned repository",
        words,
        f"remove {path} (or the PYTHONPATH entry that finds it); " + _ALLOW_FIX,
        path=path,
    )


def bytecode(pyc: str, source: str, why: str, where: Where, manifest: Manifest) -> Finding:
    loc: Loc = ALLOW
    if where.rule == "record" and where.recorded is not None:
        loc = package_loc(manifest, where.recorded.distribution.name)
    elif where.rule == "repo":
        loc = CODE
    return row(
        "drift.bytecode",
        loc,
        f"the interpreter ran bytecode that is not the compilation of {source}",
        f"the compilation of {source} (its header claims it is)",
        why,
        f"delete it (rm '{pyc}'): the interpreter compiles the source again",
        path=pyc,
    )


def pth_problem(entry: Mapping[str, Any], where: Where) -> str | None:
    """Why a ``.pth`` file is not an installed one, or None when its RECORD lists it."""
    seen = entry.get("sha256")
    if seen is None:
        return f"unreadable: {entry.get('error')}"
    if where.rule != "record" or where.recorded is None:
        return "listed by no installed distribution's RECORD"
    if where.recorded.digest != f"sha256:{seen}":
        dist = where.recorded.distribution
        return f"sha256:{seen}, not the {where.recorded.digest} of {dist.name}'s RECORD"
    return None


def pth(path: str, entry: Mapping[str, Any], problem: str) -> Finding:
    lines = entry.get("import_lines") or []
    runs = f"; site runs its line(s) {', '.join(map(str, lines))} as code" if lines else ""
    return row(
        "drift.pth",
        ALLOW,
        "a .pth file the interpreter processes at start-up is not an installed one" + runs,
        "only .pth files listed, with their sha256, in an installed RECORD",
        problem,
        "remove it, or reinstall the package it belongs to; " + _ALLOW_FIX,
        path=path,
    )


def editable(dist: Distribution, manifest: Manifest) -> Finding:
    pins = manifest.environment.packages
    spec = next((v for k, v in pins.items() if normalize_name(k) == normalize_name(dist.name)), "")
    return row(
        "drift.editable",
        package_loc(manifest, dist.name),
        f"{dist.name} is an editable install of {dist.editable}: the manifest pins its "
        "version, not that folder's code",
        f"{dist.name}{spec} installed from a wheel (its files judged by its RECORD)",
        f"editable install of {dist.editable} (version {dist.version})",
        f"{reinstall(dist)}; or make the package part of the training repository",
        path=dist.info,
    )


def variable(name: str, value: str, when: str, pinned: str | None) -> Finding:
    at = "when the interpreter started" if when == "startup" else "in the process now"
    return row(
        "drift.startup-variable",
        ("environment", "env_vars", name),
        f"{name} is set {at}; it changes which code runs and the manifest does not pin this value",
        "unset" if pinned is None else f"{pinned!r} (pinned)",
        repr(value),
        f"unset {name} before starting Python, or pin it: environment.env_vars: "
        f"{{{name}: {value!r}}} and sign again",
        path=None,
    )


def preload_file(path: str, libraries: list[str]) -> Finding:
    return row(
        "drift.ld-so-preload",
        ALLOW,
        "the dynamic loader preloads libraries into every process",
        "no preloaded library, or allowed ones",
        ", ".join(libraries),
        f"remove them from {path}; " + _ALLOW_FIX,
        path=path,
    )


def foreign_executable(exe: str, homes: list[str]) -> Finding:
    return row(
        "drift.interpreter",
        ("environment", "python"),
        "the interpreter's standard library is not its own installation's "
        "(PYTHONHOME, or a moved prefix?)",
        f"an executable inside {' or '.join(homes)}",
        exe,
        "unset PYTHONHOME and start the venv's own python",
        path=exe,
    )


def capped(found: list[Finding]) -> list[Finding]:
    """At most ``MAX_ROWS`` rows a rule; the rest of each rule in one row."""
    out: list[Finding] = []
    by_rule: dict[str, list[Finding]] = {}
    for f in found:
        by_rule.setdefault(f.rule, []).append(f)
    for group in by_rule.values():
        out += group[:MAX_ROWS]
        rest = group[MAX_ROWS:]
        if rest:
            named = ", ".join(str(f.path) for f in rest[:20]) + (" ..." if len(rest) > 20 else "")
            first = rest[0]
            out.append(
                first._replace(
                    message=f"{len(rest)} more file(s): {first.message}", path=None, observed=named
                )
            )
    return out
