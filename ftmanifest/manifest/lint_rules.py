"""The pinning rules: is a manifest's plain data complete enough to reproduce the run?

Layer: pure core - manifest (plain data in, ``Problem`` records out; no pydantic, no I/O,
no runtime ``typing``: it is on the lint and pre-commit path).  Each rule reads the
schema-valid data of a manifest and yields what is not pinned (a model revision that is
not a commit, a file without a digest, a package without an exact version, a seed not
set, ...), each at its data location with a fix; ``ftmanifest.lint`` runs them and turns
each problem into a located ``Finding``.  Rule ids are stable: never renumber, only add.
"""

from __future__ import annotations

import re

from ftmanifest.location import Loc, format_loc
from ftmanifest.manifest.patterns import COMMIT_RE
from ftmanifest.manifest.targets import pattern_errors

TYPE_CHECKING = False  # no runtime `typing` on the pre-commit path (see findings.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
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


def value_at(data: Any, *path: str | int) -> Any:
    node = data
    for part in path:
        if isinstance(node, dict) and isinstance(part, str):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            return None
    return node


def shown(value: Any) -> str:
    return "absent" if value is None else repr(value) if not isinstance(value, str) else value


# --- model -----------------------------------------------------------------


def _revision(data: dict[str, Any]) -> Iterator[Problem]:
    rev = value_at(data, "model", "revision")
    if value_at(data, "model", "repo") is None and rev is None:
        return  # a local folder has no hub commit: its tree digest pins it (FTM002)
    if not isinstance(rev, str) or not COMMIT_RE.match(rev):
        yield Problem(
            ("model", "revision"),
            "model revision is not pinned to a commit",
            "set model.revision to the 40-hex commit (`ftmanifest lock` resolves a branch)",
            expected="a 40-hex commit id",
            observed=shown(rev),
        )


def _model_files(data: dict[str, Any]) -> Iterator[Problem]:
    files = value_at(data, "model", "files") or []
    if not files:
        yield Problem(
            ("model", "files"),
            "model files are not listed with digests",
            "list every file under model.files (`ftmanifest lock` fills them)",
            expected="model.files with a digest each",
            observed="no files",
        )
    for i, f in enumerate(files):
        if not value_at(f, "digest"):
            yield Problem(
                ("model", "files", i),
                f"model file {value_at(f, 'path')!r} has no digest",
                "add its sha256 digest (`ftmanifest lock`)",
                expected="sha256:<hex>",
                observed="absent",
            )
    if files and not value_at(data, "model", "tree_digest"):
        yield Problem(
            ("model", "tree_digest"),
            "model tree digest is missing",
            "add model.tree_digest (`ftmanifest lock`)",
            expected="sha256:<hex>",
            observed="absent",
        )


# --- environment -----------------------------------------------------------


def _packages(data: dict[str, Any]) -> Iterator[Problem]:
    packages = value_at(data, "environment", "packages") or {}
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
                observed=shown(spec),
            )
    lock = value_at(data, "environment", "lock")
    if not value_at(lock, "digest"):
        yield Problem(
            ("environment", "lock", "digest"),
            "lock file digest is missing",
            "add environment.lock with path and sha256 digest of the lock file",
            expected="environment.lock.digest",
            observed="absent",
        )


def _python(data: dict[str, Any]) -> Iterator[Problem]:
    py = value_at(data, "environment", "python")
    if not isinstance(py, str) or not PY_VERSION_RE.match(py):
        yield Problem(
            ("environment", "python"),
            "python version is not exact",
            "set environment.python to the full version, e.g. 3.11.7",
            expected="X.Y.Z",
            observed=shown(py),
        )


def _code(data: dict[str, Any]) -> Iterator[Problem]:
    """The code that trains is pinned: a commit, locked on a clean tree."""
    code = value_at(data, "environment", "code") or {}
    commit = code.get("commit")
    if not isinstance(commit, str) or not COMMIT_RE.match(commit):
        yield Problem(
            ("environment", "code", "commit"),
            "the training code is not pinned: no git commit recorded",
            "keep the training scripts in a git repository with the manifest, commit them, "
            "then `ftmanifest lock` (it pins environment.code.commit)",
            expected="a 40-hex git commit",
            observed=shown(commit) if commit is not None else "absent (not in a git repository?)",
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
    backend = value_at(data, "environment", "backend") or {}
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
    seeds = value_at(data, "seeds") or {}
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
    entries = value_at(data, "data") or []
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
    entries = value_at(data, "data") or []
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
    method = value_at(data, "method") or {}
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
                observed=shown(targets),
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
    training = value_at(data, "training") or {}
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
    text = value_at(data, "experiment", "hypothesis")
    if not isinstance(text, str) or not text.strip():
        yield Problem(
            ("experiment", "hypothesis"),
            "no hypothesis",
            "state in experiment.hypothesis what should improve and by how much",
            expected="a sentence",
            observed="absent",
        )


def _guards(data: dict[str, Any]) -> Iterator[Problem]:
    guards = value_at(data, "experiment", "guards") or []
    if not guards:
        yield Problem(
            ("experiment", "guards"),
            "no guard says what must not get worse",
            "add experiment.guards (per-category metric, format validity, ...)",
            expected="at least one guard",
            observed="none",
        )
        return
    if value_at(data, "experiment", "task") == "classification":
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
