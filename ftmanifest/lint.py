"""Static pinning rules: is the manifest complete enough to reproduce the run?

Layer: pure core.  Rules read the schema-valid plain data of a ``Document``
(no pydantic, no I/O) and yield problems; ``lint_document`` turns them into
located ``Finding`` records.  Rule ids are stable: never renumber, only add.
"""

from __future__ import annotations

import re

from ftmanifest.errors import FtManifestError, ManifestInvalidError
from ftmanifest.findings import Finding, sort_findings
from ftmanifest.location import Loc, format_loc
from ftmanifest.manifest import load_document
from ftmanifest.manifest.fills import MARK, fill_marks
from ftmanifest.manifest.load import Document
from ftmanifest.manifest.patterns import COMMIT_RE
from ftmanifest.manifest.targets import pattern_errors

TYPE_CHECKING = False  # no runtime `typing` on the pre-commit path (see findings.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from typing import Any

EXACT_PIN_RE = re.compile(r"^===?\s*[A-Za-z0-9][A-Za-z0-9.+!_-]*$")
PY_VERSION_RE = re.compile(r"^\d+\.\d+\.\d+([a-z]+\d+)?$")


class Problem:
    __slots__ = ("loc", "message", "hint", "expected", "observed")

    def __init__(
        self,
        loc: Loc,
        message: str,
        hint: str,
        expected: str | None = None,
        observed: str | None = None,
    ) -> None:
        self.loc, self.message, self.hint = loc, message, hint
        self.expected, self.observed = expected, observed


class Rule:
    __slots__ = ("id", "title", "check")

    def __init__(
        self, id: str, title: str, check: Callable[[dict[str, Any]], Iterator[Problem]]
    ) -> None:
        self.id, self.title, self.check = id, title, check


def _get(data: Any, *path: str | int) -> Any:
    node = data
    for part in path:
        if isinstance(node, dict) and isinstance(part, str):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            return None
    return node


def _show(value: Any) -> str:
    return "absent" if value is None else repr(value) if not isinstance(value, str) else value


# --- model -----------------------------------------------------------------


def _revision(data: dict[str, Any]) -> Iterator[Problem]:
    rev = _get(data, "model", "revision")
    if _get(data, "model", "repo") is None and rev is None:
        return  # a local folder has no hub commit: its tree digest pins it (FTM002)
    if not isinstance(rev, str) or not COMMIT_RE.match(rev):
        yield Problem(
            ("model", "revision"),
            "model revision is not pinned to a commit",
            "set model.revision to the 40-hex commit (`ftmanifest lock` resolves a branch)",
            expected="a 40-hex commit id",
            observed=_show(rev),
        )


def _model_files(data: dict[str, Any]) -> Iterator[Problem]:
    files = _get(data, "model", "files") or []
    if not files:
        yield Problem(
            ("model", "files"),
            "model files are not listed with digests",
            "list every file under model.files (`ftmanifest lock` fills them)",
            expected="model.files with a digest each",
            observed="no files",
        )
    for i, f in enumerate(files):
        if not _get(f, "digest"):
            yield Problem(
                ("model", "files", i),
                f"model file {_get(f, 'path')!r} has no digest",
                "add its sha256 digest (`ftmanifest lock`)",
                expected="sha256:<hex>",
                observed="absent",
            )
    if files and not _get(data, "model", "tree_digest"):
        yield Problem(
            ("model", "tree_digest"),
            "model tree digest is missing",
            "add model.tree_digest (`ftmanifest lock`)",
            expected="sha256:<hex>",
            observed="absent",
        )


# --- environment -----------------------------------------------------------


def _packages(data: dict[str, Any]) -> Iterator[Problem]:
    packages = _get(data, "environment", "packages") or {}
    if not packages:
        yield Problem(
            ("environment", "packages"),
            "no package versions are pinned",
            "list packages with exact versions under environment.packages",
            expected="name: ==X.Y.Z entries",
            observed="none",
        )
    for name, spec in packages.items():
        if not isinstance(spec, str) or not EXACT_PIN_RE.match(spec.strip()):
            yield Problem(
                ("environment", "packages", name),
                f"package {name!r} is not pinned to an exact version",
                f"write '{name}: ==<installed version>'",
                expected="==X.Y.Z",
                observed=_show(spec),
            )
    lock = _get(data, "environment", "lock")
    if not _get(lock, "digest"):
        yield Problem(
            ("environment", "lock", "digest"),
            "lock file digest is missing",
            "add environment.lock with path and sha256 digest of the lock file",
            expected="environment.lock.digest",
            observed="absent",
        )


def _python(data: dict[str, Any]) -> Iterator[Problem]:
    py = _get(data, "environment", "python")
    if not isinstance(py, str) or not PY_VERSION_RE.match(py):
        yield Problem(
            ("environment", "python"),
            "python version is not exact",
            "set environment.python to the full version, e.g. 3.11.7",
            expected="X.Y.Z",
            observed=_show(py),
        )


def _code(data: dict[str, Any]) -> Iterator[Problem]:
    """The code that trains is pinned: a commit, locked on a clean tree."""
    code = _get(data, "environment", "code") or {}
    commit = code.get("commit")
    if not isinstance(commit, str) or not COMMIT_RE.match(commit):
        yield Problem(
            ("environment", "code", "commit"),
            "the training code is not pinned: no git commit recorded",
            "keep the training scripts in a git repository with the manifest, commit them, "
            "then `ftmanifest lock` (it pins environment.code.commit)",
            expected="a 40-hex git commit",
            observed=_show(commit) if commit is not None else "absent (not in a git repository?)",
        )
    elif code.get("dirty") is True:
        yield Problem(
            ("environment", "code", "dirty"),
            "the manifest was locked with uncommitted changes: the code cannot be checked",
            "commit the changes, then `ftmanifest lock` again",
            expected="false",
            observed="true",
        )


def _backend(data: dict[str, Any]) -> Iterator[Problem]:
    backend = _get(data, "environment", "backend") or {}
    kind = backend.get("kind")
    loc: Loc = ("environment", "backend")
    if kind is None:
        yield Problem(
            (*loc, "kind"),
            "backend kind is not recorded",
            "set environment.backend.kind to cuda, rocm, mps or cpu",
            expected="cuda|rocm|mps|cpu",
            observed="absent",
        )
        return
    if kind in ("cuda", "rocm"):
        runtime = "CUDA" if kind == "cuda" else "HIP"
        for key, what in (("runtime", f"{runtime} runtime version"), ("driver", "driver version")):
            if not backend.get(key):
                yield Problem(
                    (*loc, key),
                    f"{what} is not recorded for backend {kind}",
                    f"set environment.backend.{key} (`ftmanifest lock` probes it)",
                    expected=what,
                    observed="absent",
                )


# --- seeds and data --------------------------------------------------------


def _seeds(data: dict[str, Any]) -> Iterator[Problem]:
    seeds = _get(data, "seeds") or {}
    missing = [k for k in ("python", "numpy", "torch", "data_order") if seeds.get(k) is None]
    if missing:
        yield Problem(
            ("seeds", missing[0]),
            f"seeds not set: {', '.join(missing)}",
            "set every seed under seeds: python, numpy, torch, data_order",
            expected="an integer each",
            observed=f"missing {', '.join(missing)}",
        )


def _data(data: dict[str, Any]) -> Iterator[Problem]:
    entries = _get(data, "data") or []
    if not entries:
        yield Problem(
            ("data",),
            "no data entries",
            "list the data sets under data:",
            expected="at least one data entry",
            observed="none",
        )
    for i, entry in enumerate(entries):
        name = entry.get("name", f"#{i}")
        for key, fix in (
            ("digest", "`ftmanifest lock` computes it"),
            ("role", "train, eval, test, baseline-eval or other"),
            ("records", "the number of records"),
            ("license", "the license or rights it is used under"),
        ):
            if entry.get(key) is None:
                yield Problem(
                    ("data", i, key),
                    f"data entry {name!r} has no {key}",
                    f"add data[{i}].{key}: {fix}",
                    expected=key,
                    observed="absent",
                )


def _sealed_test(data: dict[str, Any]) -> Iterator[Problem]:
    entries = _get(data, "data") or []
    if not any(e.get("role") == "test" and e.get("sealed") for e in entries):
        tests = [i for i, e in enumerate(entries) if e.get("role") == "test"]
        loc: Loc = ("data", tests[0], "sealed") if tests else ("data",)
        yield Problem(
            loc,
            "no sealed test split",
            "mark the final test split 'role: test' and 'sealed: true'",
            expected="a data entry with role test and sealed true",
            observed="test split not sealed" if tests else "no test split",
        )


# --- method and training ---------------------------------------------------


def _lora_targets(data: dict[str, Any]) -> Iterator[Problem]:
    """LoRA names its targets (a list, ``all-linear`` or a regex, as peft reads
    them), and every pattern of the method compiles as peft compiles it."""
    method = _get(data, "method") or {}
    kind = method.get("kind")
    if kind not in ("lora", "peft"):
        return
    if kind == "lora":
        targets = method.get("target_modules")
        if not targets or (isinstance(targets, str) and not targets.strip()):
            yield Problem(
                ("method", "target_modules"),
                "LoRA target modules are not declared",
                "name them: a list such as [q_proj, v_proj], 'all-linear', or a regular "
                "expression over the whole module name",
                expected="module names, 'all-linear' or a regex",
                observed=_show(targets),
            )
            return
    where: Loc = ("method",) if kind == "lora" else ("method", "config")
    source = method if kind == "lora" else method.get("config") or {}
    for loc, pattern, why in pattern_errors(source):
        yield Problem(
            (*where, *loc),
            f"{format_loc((*where, *loc))} '{pattern}' is not a regular expression peft "
            f"can compile ({why})",
            "fix the pattern (peft compiles it with Python's re), or list the module names",
            expected="a valid regular expression",
            observed=pattern,
        )


def _step_sizing(data: dict[str, Any]) -> Iterator[Problem]:
    training = _get(data, "training") or {}
    loc: Loc = ("training",)
    if training.get("grad_accum") is None:
        yield Problem(
            (*loc, "grad_accum"),
            "gradient accumulation is not declared",
            "set training.grad_accum (1 when not accumulating)",
            expected="an integer >= 1",
            observed="absent",
        )
    if training.get("loss_normalization") is None:
        yield Problem(
            (*loc, "loss_normalization"),
            "loss normalisation is not declared",
            "set training.loss_normalization to per-token or per-sequence",
            expected="per-token|per-sequence",
            observed="absent",
        )


# --- hypothesis and guards -------------------------------------------------


def _hypothesis(data: dict[str, Any]) -> Iterator[Problem]:
    text = _get(data, "experiment", "hypothesis")
    if not isinstance(text, str) or not text.strip():
        yield Problem(
            ("experiment", "hypothesis"),
            "no hypothesis",
            "state in experiment.hypothesis what should improve and by how much",
            expected="a sentence",
            observed="absent",
        )


def _guards(data: dict[str, Any]) -> Iterator[Problem]:
    guards = _get(data, "experiment", "guards") or []
    if not guards:
        yield Problem(
            ("experiment", "guards"),
            "no guard says what must not get worse",
            "add experiment.guards (per-category metric, format validity, ...)",
            expected="at least one guard",
            observed="none",
        )
        return
    if _get(data, "experiment", "task") == "classification":
        if not any(g.get("kind") == "per_category" for g in guards):
            yield Problem(
                ("experiment", "guards"),
                "classification guards only a global average",
                "add a guard with kind: per_category and max_drop",
                expected="a per_category guard",
                observed="global metrics only",
            )


RULES: dict[str, Rule] = {
    r.id: r
    for r in (
        Rule("FTM001", "model revision is a 40-hex commit", _revision),
        Rule("FTM002", "every model file has a digest", _model_files),
        Rule("FTM010", "packages pinned exactly, lock file digest present", _packages),
        Rule("FTM011", "python version exact", _python),
        Rule("FTM012", "training code pinned to a git commit, locked clean", _code),
        Rule("FTM020", "backend kind, runtime and driver recorded", _backend),
        Rule("FTM030", "all seeds set", _seeds),
        Rule("FTM040", "data entries have digest, role, records, license", _data),
        Rule("FTM041", "a sealed test split exists", _sealed_test),
        Rule("FTM050", "LoRA declares its target modules; its patterns compile", _lora_targets),
        Rule("FTM060", "grad accumulation and loss normalisation declared", _step_sizing),
        Rule("FTM070", "a hypothesis is stated", _hypothesis),
        Rule("FTM071", "guards exist; classification guards are per-category", _guards),
    )
}


# --- values left to fill ---------------------------------------------------
# Not in RULES: it reads the text, not the data.  ``init`` marks each value a
# person must decide with a ``# FILL:`` comment on its line (``lock`` and
# ``manifest.edit`` drop the mark from a value they write).  A mark left means
# that value was never decided, whatever stands there: a placeholder is not a
# choice.  A mark where another rule already refuses the field adds nothing.

FILL_RULES = {"FTM003": "no value is left marked '# FILL:'"}


def _fills_left(doc: Document, found: list[Finding]) -> list[Finding]:
    if doc.format != "yaml" or MARK not in doc.text:
        return []
    taken = [f.loc for f in found if f.loc is not None]
    out = []
    for mark in fill_marks(doc.text):
        if doc.positions.get(mark.loc, (None,))[0] != mark.line:
            continue  # not a key of the document (a line inside a block string)
        if any(t[: len(mark.loc)] == mark.loc or mark.loc[: len(t)] == t for t in taken):
            continue
        value = _get(doc.data, *mark.loc)
        out.append(
            Finding.at(
                mark.loc,
                kind="lint",
                rule="FTM003",
                message=f"{format_loc(mark.loc)} is still to fill: {mark.decide}",
                path=str(doc.path),
                line=mark.line,
                column=mark.column,
                expected="a decided value, its '# FILL:' comment removed",
                observed=f"{_show(value)}, still marked FILL",
                hint=f"write the value of {format_loc(mark.loc)} and delete its '# FILL:' comment",
            )
        )
    return out


# --- variants ----------------------------------------------------
# Not in RULES: a variant is judged against its parent, found beside it or in
# the ledger, so these read files and build the pydantic models of both (the
# judgment ``verify`` makes, ``ftmanifest.ledger.parents``).  Only a manifest
# that sets experiment.parent pays for it; every other stays on the fast path.
# A parent found nowhere is a warning, not an error: committing a variant
# before its parent's file (or before the parent is planned) is legitimate,
# and verify still refuses a variant it cannot judge.

VARIANT_RULES = {
    "FTM080": "a variant declares every difference from its parent in experiment.changes",
    "FTM081": "a variant's parent is beside it or in the ledger (warning)",
}


_FIELD_PART_RE = re.compile(r'\.?([^.\[\]"]+)|\[("(?:[^"\\]|\\.)*"|[^\]]*)\]')


def field_loc(data: Any, field: str) -> Loc:
    """The data location of a diff field (``data[train].digest`` -> ``("data", 0,
    "digest")``), as far as it exists in ``data``: where to point the finding."""
    import json

    loc: list[str | int] = []
    node = data
    for m in _FIELD_PART_RE.finditer(field):
        key: str | int = m.group(1) if m.group(1) is not None else m.group(2)
        if m.group(1) is None and isinstance(key, str) and key.startswith('"'):
            key = json.loads(key)
        if isinstance(node, list):
            names = [_get(i, "name") or _get(i, "path") for i in node]
            if key in names:
                key = names.index(key)
            elif isinstance(key, str) and key.isdigit():
                key = int(key)
            else:
                break
        elif not isinstance(node, dict) or key not in node:
            break
        loc.append(key)
        node = _get(node, key)
    return tuple(loc)


def lint_document(doc: Document) -> list[Finding]:
    """Run every rule on a schema-valid document."""
    found = []
    for rule in RULES.values():
        for p in rule.check(doc.data):
            line, col = doc.position(p.loc)
            found.append(
                Finding(
                    kind="lint",
                    rule=rule.id,
                    message=p.message,
                    path=str(doc.path),
                    line=line,
                    column=col,
                    field=format_loc(p.loc) or None,
                    loc=p.loc,
                    expected=p.expected,
                    observed=p.observed,
                    hint=p.hint,
                )
            )
    found += _fills_left(doc, found)
    return sort_findings(found)


def is_variant(doc: Document) -> bool:
    """The document names a parent experiment (``experiment.parent``)."""
    return isinstance(_get(doc.data, "experiment", "parent"), str)


def lint_paths(
    paths: list[str], checks: Sequence[Callable[[Document], list[Finding]]] = ()
) -> tuple[list[Finding], int]:
    """Lint files: (every finding, number of files that were unusable).

    A file that cannot be read or does not match the schema yields its
    ``FTM000`` findings instead of lint findings.  ``checks`` run on each
    schema-valid document after the rules: the variant check
    (``ledger.parents.variant_lint``) reads the parent's manifest, which this
    pure layer does not; ``ftmanifest.lint_paths`` passes it.
    """
    findings: list[Finding] = []
    unusable = 0
    for path in paths:
        try:
            doc = load_document(path)
            findings.extend(lint_document(doc))
            for check in checks:
                findings.extend(check(doc))
        except ManifestInvalidError as exc:
            unusable += 1
            findings.extend(exc.problems)
        except FtManifestError as exc:
            unusable += 1
            findings.append(
                Finding(
                    kind="input",
                    rule="FTM000",
                    message=exc.message,
                    path=exc.path or path,
                    line=exc.line,
                    column=exc.column,
                    field=exc.field,
                    expected=exc.expected,
                    observed=exc.observed,
                    hint=exc.hint,
                )
            )
    return findings, unusable
