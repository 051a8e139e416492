"""``audit``: the handoff gate over a run folder and its signed manifest.

Layer: judging rooms - results/orchestration.  ``gather`` does the I/O once (verify, the
adapter check, hashing the deliverable, the scan, modes and ``--fix-perms``)
into an ``AuditSubject``; the checks of ``AUDIT_CHECKS`` (a ``checks.registry``)
turn it into ``Finding`` rows; ``AuditReport`` carries both.  Never raises on
a refusal, only on unusable input.  Rows audit makes itself have kind
``audit`` and rule ``audit.<name>``; rows it carries from verify (``drift``),
check-adapter (``adapter``) and the scanner (``secret``, ``pii``, ...) keep
their kind and rule and get ``extra["check"]``, the audit check they came from.

Run folder layout: ``data/``, ``logs/``, ``checkpoints/``, ``keys/`` and the
deliverable at ``RUN_DIR/<export.path>`` (else ``export.path`` beside the
manifest).  Everything in RUN_DIR except ``.git`` is scanned, with the
manifest's data and the model's pickles; in ``keys/`` a private key is not a
finding (its modes are), anything else there is.

``AuditReport.to_dict()`` (the handoff report's input)::

  {"ok": bool, "run_dir": str,
   "manifest": {"path": str, "digest": "sha256:..."},
   "signature": {"checked": bool, "ok": bool, "report": {...} | null},
   "deliverable": {"path": str | null, "kind": "adapter" | "model" | "merged" | null,
                   "tree_digest": str | null,
                   "files": [{"path": rel, "digest": "sha256:...", "size": int}],
                   "binding": AdapterReport.to_dict() | null},
   "model": {"repo", "path", "revision", "tree_digest", "license", "terms_accepted"},
   "environment": Environment.model_dump(mode="json") | null,
   "data": [{"name", "role", "path", "digest", "records", "license",
             "contains_personal_data"}],
   "comparison": {"path": str, "digest": str, "result": Comparison.to_dict() | null} | null,
   "findings": [Finding.to_dict()...],
   "perms_changes": [{"path": str, "old": "0644", "new": "0640"}],
   "warnings": [str]}
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.checks import FunctionCheck, registry, run_checks
from ftmanifest.errors import FtManifestError, InputNotFoundError
from ftmanifest.findings import Finding
from ftmanifest.fsutil import locate
from ftmanifest.hashing.files import hash_file
from ftmanifest.hashing.tree import hash_tree
from ftmanifest.hfcache import hub_snapshot
from ftmanifest.manifest import load_manifest
from ftmanifest.results import audit_perms as perms
from ftmanifest.results.audit_rights import rights_findings
from ftmanifest.results.audit_split import split_findings
from ftmanifest.results.comparison_file import no_guards, rejudge
from ftmanifest.statcache import cache_dir
from ftmanifest.verify import scan_for_verify, verify_manifest

if TYPE_CHECKING:
    from ftmanifest.manifest.model import Manifest

# Files the comparison check looks for in RUN_DIR (``compare --out``), first found wins.
COMPARISON_FILES = ("comparison.json", "results/comparison.json")
SKIP_SCAN = frozenset({".git"})
# In ``keys/`` a private key is what the folder is for (its modes are judged);
# anything else there, a note with a token in it, is scanned like the rest.
KEY_FILE_RULES = frozenset({"secret.private-key", "secret.age-identity"})


@dataclass
class AuditSubject:
    """Everything the audit checks read, gathered once."""

    run_dir: Path
    manifest_path: Path
    verify: Any  # verify.VerifyReport
    deliverable: Path | None = None
    tree: Any = None  # hashing.TreeResult of the deliverable
    adapter: Any = None  # adapter.check.AdapterReport
    deliverable_error: FtManifestError | None = None
    scan: list[Finding] = field(default_factory=list)
    scan_skipped: bool = False
    loose: list[perms.PermProblem] = field(default_factory=list)
    unfixed: list[perms.PermProblem] = field(default_factory=list)
    changes: list[perms.PermChange] = field(default_factory=list)
    comparison: Path | None = None
    compared: Any = None  # results.guards.Comparison, made again by the comparison check
    data_paths: dict[int, Path] = field(default_factory=dict)  # data index -> located path


def _carry(rows: Iterable[Finding], check: str) -> list[Finding]:
    return [f._replace(extra={**f.extra, "check": check}) for f in rows]


def _signature(_m: Manifest, s: AuditSubject) -> list[Finding]:
    return _carry((f for f in s.verify.findings if f.field == "signature"), "signature")


def _drift(_m: Manifest, s: AuditSubject) -> list[Finding]:
    return _carry((f for f in s.verify.findings if f.field != "signature"), "drift")


def _deliverable(m: Manifest, s: AuditSubject) -> list[Finding]:
    def row(rule: str, message: str, hint: str, **kw: Any) -> Finding:
        return Finding.at(("export", "path"), kind="audit", rule=rule, message=message,
                          hint=hint, **kw)  # fmt: skip

    if m.export is None:
        return [row("audit.deliverable-undeclared", "the manifest declares no export",
                    "add an export section naming the adapter or model folder")]  # fmt: skip
    if s.deliverable is None:
        return [row("audit.deliverable-missing", "the deliverable is not in the run folder",
                    "save the adapter/model to export.path (in RUN_DIR or beside the manifest)",
                    path=str(s.run_dir / m.export.path), expected="a folder",
                    observed="not found")]  # fmt: skip
    out = []
    if s.deliverable_error is not None:
        e = s.deliverable_error
        out.append(row("audit.deliverable-unusable", f"the deliverable cannot be checked: "
                       f"{e.message}", e.hint or "fix the deliverable's files",
                       path=e.path or str(s.deliverable), observed=e.observed))  # fmt: skip
    if s.adapter is not None:
        out += _carry((f for f in s.adapter.findings if f.severity != "info"), "deliverable")
    return out


def _scan(_m: Manifest, s: AuditSubject) -> list[Finding]:
    if s.scan_skipped:
        return [Finding.at(("security", "scan", "on"), kind="audit", rule="audit.scan-skipped",
                           severity="warning", message="the policy does not scan on audit",
                           hint="add audit to security.scan.on")]  # fmt: skip
    return _carry(s.scan, "scan")


def _personal_data(m: Manifest, s: AuditSubject) -> list[Finding]:
    out = []
    for i, entry in enumerate(m.data):
        where = s.data_paths.get(i)
        if entry.contains_personal_data is not False or where is None:
            continue
        hits = [f for f in s.scan if f.kind == "pii" and _under(f.path, where)]
        if hits:
            rules = sorted({f.rule for f in hits})
            out.append(Finding.at(
                ("data", i, "contains_personal_data"), kind="audit",
                rule="audit.undeclared-personal-data",
                message=f"data set {entry.name!r} is declared without personal data, "
                f"but the scan found {len(hits)} hit(s)",
                path=str(s.manifest_path.parent / entry.path),
                expected="false (no personal data)",
                observed=f"{len(hits)} personal-data hit(s): {', '.join(rules)}",
                hint=f"remove the personal data and re-lock, or set "
                f"data[{i}].contains_personal_data: true (and a retention period)",
            ))  # fmt: skip
    return out


def _under(path: str | None, top: Path) -> bool:
    if path is None:
        return False
    p, top = Path(path).resolve(), top.resolve()
    return p == top or top in p.parents


def _permissions(_m: Manifest, s: AuditSubject) -> list[Finding]:
    hint = f"ftmanifest audit {s.run_dir} --manifest {s.manifest_path} --fix-perms"
    return [
        perms.problem_finding(p, perms.shared_hint(p.shared) if p.shared else hint) for p in s.loose
    ] + [perms.unfixed_finding(p) for p in s.unfixed]


def _rights(m: Manifest, _s: AuditSubject) -> list[Finding]:
    return rights_findings(m)


def comparison_findings(m: Manifest, s: AuditSubject) -> list[Finding]:
    """The manifest has guards; the comparison is present, made from results that
    are still the same, under this manifest, against the pinned baseline, on an eval
    or test split, and every guard holds when made again (``comparison_file.rejudge``)."""
    none = no_guards(m, s.manifest_path)
    if s.comparison is None:
        return none + [Finding.at(("experiment", "guards"), kind="audit",
                           rule="audit.comparison-missing",
                           message="no comparison of the candidate with the baseline",
                           path=str(s.run_dir / COMPARISON_FILES[0]), observed="not found",
                           hint="ftmanifest compare M --baseline B --candidate C "
                           f"--out {s.run_dir / COMPARISON_FILES[0]}")]  # fmt: skip
    adapter = m.export is not None and m.export.kind == "adapter" and s.tree is not None
    loaded = load_manifest(s.manifest_path)  # the comparison's results are scored again
    rows, s.compared = rejudge(
        m, s.verify.manifest_digest, s.comparison, s.tree.digest if adapter else None, loaded
    )
    return none + rows


def _split(_m: Manifest, s: AuditSubject) -> list[Finding]:
    """The eval and test splits judged from their records, not from the results
    files: repeated ids, guards naming a category no record has (``audit_split``)."""
    return split_findings(load_manifest(s.manifest_path))


def _ledger(_m: Manifest, s: AuditSubject) -> list[Finding]:
    """What the ledger recorded about the experiment, flagged for the reviewer:
    attempts over budget, a sealed split used more than once, a damaged ledger."""
    history = s.verify.ledger
    if history is None:
        return []
    out = []
    for row in history["over_budget"]:
        out.append(Finding.at(("experiment", "budget"), kind="audit", rule="audit.over-budget",
                              message=f"attempt {row['attempt']} ({row['status']}) spent more "
                              "than experiment.budget", severity="warning",
                              path=history["ledger"], expected="within experiment.budget",
                              observed="; ".join(row["over"]),
                              hint="compare variants at the same budget, or say why not"),
                   )  # fmt: skip
    for split, use in history["sealed"].items():
        if use["family_uses"] >= 2:
            out.append(Finding.at(("data",), kind="audit", rule="audit.sealed-reused",
                                  message=f"sealed split {split!r} was used "
                                  f"{use['family_uses']} times by this experiment's family",
                                  severity="warning", path=history["ledger"],
                                  expected="at most 1 use", observed=f"{use['family_uses']} uses",
                                  hint="report results on the sealed split once; choose settings "
                                  "on the eval split"))  # fmt: skip
    for problem in history["problems"]:
        out.append(Finding.at(("experiment",), kind="audit", rule="audit.ledger-damaged",
                              message=f"the ledger is damaged: {problem}", severity="warning",
                              path=history["ledger"],
                              hint="run `ftmanifest ledger check` and restore it from "
                              "version control"))  # fmt: skip
    return out


AUDIT_CHECKS = registry(
    FunctionCheck("signature", ("verify",), _signature),
    FunctionCheck("drift", ("verify",), _drift),
    FunctionCheck("deliverable", ("deliverable", "adapter", "deliverable_error"), _deliverable),
    FunctionCheck("scan", ("scan", "scan_skipped"), _scan),
    FunctionCheck("personal-data", ("scan", "data_paths"), _personal_data),
    FunctionCheck("permissions", ("loose", "unfixed"), _permissions),
    FunctionCheck("rights", (), _rights),
    FunctionCheck("split", (), _split),
    FunctionCheck("comparison", ("comparison",), comparison_findings),
    FunctionCheck("ledger", ("verify",), _ledger),
)


@dataclass
class AuditReport:
    subject: AuditSubject
    manifest: Manifest
    findings: list[Finding]

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    @property
    def perm_changes(self) -> list[perms.PermChange]:
        return self.subject.changes

    def to_dict(self) -> dict[str, Any]:
        s, m, v = self.subject, self.manifest, self.subject.verify
        sig_rows = [f for f in v.findings if f.field == "signature"]
        tree = s.tree
        export = m.export
        return {
            "ok": self.ok,
            "run_dir": str(s.run_dir),
            "manifest": {"path": str(s.manifest_path), "digest": v.manifest_digest},
            "signature": {
                "checked": v.signature_checked,
                "ok": v.signature_checked and not sig_rows,
                "report": v.signature.to_dict() if v.signature is not None else None,
            },
            "deliverable": {
                "path": str(s.deliverable) if s.deliverable else None,
                "kind": export.kind if export else None,
                "tree_digest": tree.digest if tree else None,
                "files": [{"path": rel, "digest": d.digest, "size": d.size}
                          for rel, d in (tree.files.items() if tree else ())],
                "binding": s.adapter.to_dict() if s.adapter is not None else None,
            },  # fmt: skip
            "model": {k: getattr(m.model, k) for k in
                      ("repo", "path", "revision", "tree_digest", "license", "terms_accepted")},
            "environment": v.environment.model_dump(mode="json") if v.environment else None,
            "data": [{k: getattr(e, k) for k in ("name", "role", "path", "digest", "records",
                                                  "license", "contains_personal_data")}
                     for e in m.data],
            "comparison": _comparison(s),
            "findings": [f.to_dict() for f in self.findings],
            "perms_changes": [c.to_dict() for c in s.changes],
            "warnings": list(v.warnings),
            "history": v.ledger,
        }  # fmt: skip


def _comparison(s: AuditSubject) -> dict[str, Any] | None:
    """The comparison file and the comparison made again from it (None: none)."""
    if s.comparison is None:
        return None
    try:
        ref: dict[str, Any] = _file_ref(s.comparison) or {}
    except FtManifestError:
        ref = {"path": str(s.comparison), "digest": None}
    ref["result"] = s.compared.to_dict() if s.compared is not None else None
    return ref


def _file_ref(path: Path | None) -> dict[str, str] | None:
    if path is None:
        return None

    return {"path": str(path), "digest": hash_file(path, use_cache=False).digest}


def audit(
    run_dir: str | Path,
    manifest_path: str | Path,
    *,
    signature: bool = True,
    trust_path: Path | None = None,
    threshold: int = 1,
    fix_perms: bool = False,
    use_cache: bool = True,
    allow_outside: bool = False,
    only: Iterable[str] | None = None,
) -> AuditReport:
    """Audit ``run_dir`` against the manifest; ``fix_perms`` tightens loose modes first."""
    run, mpath = Path(run_dir), Path(manifest_path)
    if not run.is_dir():
        raise InputNotFoundError("the run folder does not exist", path=str(run),
                                 hint="name the folder the training run wrote")  # fmt: skip
    manifest = load_manifest(mpath).manifest
    report = verify_manifest(mpath, signature=signature, trust_path=trust_path,
                             threshold=threshold, use_cache=use_cache,
                             allow_outside=allow_outside, scan=False)  # fmt: skip
    s = AuditSubject(run, mpath, report)
    s.data_paths = _data_paths(manifest, mpath, allow_outside)
    _gather_deliverable(s, manifest, trust_path, use_cache, allow_outside)
    _gather_scan(s, manifest, use_cache, allow_outside)
    _gather_perms(s, manifest, fix_perms)
    s.comparison = next((run / n for n in COMPARISON_FILES if (run / n).is_file()), None)
    return AuditReport(s, manifest, run_checks(AUDIT_CHECKS, manifest, s, only=only))


def _data_paths(manifest: Manifest, mpath: Path, allow_outside: bool) -> dict[int, Path]:
    out = {}
    for i, entry in enumerate(manifest.data):
        path, _ = locate(mpath.parent, entry.path, ("data", i, "path"), allow_outside)
        if path is not None:  # otherwise already a drift row
            # shown as declared; a link itself is judged by its target (walks never follow one)
            out[i] = path.resolve() if path.is_symlink() else path
    return out


def _gather_deliverable(
    s: AuditSubject,
    manifest: Manifest,
    trust_path: Path | None,
    use_cache: bool,
    allow_outside: bool,
) -> None:
    export = manifest.export
    if export is None:
        return
    found = [p for p in (s.run_dir / export.path, s.manifest_path.parent / export.path)
             if p.is_dir()]  # fmt: skip
    if not found:
        return
    s.deliverable = found[0]
    try:
        s.tree = hash_tree(s.deliverable, use_cache=use_cache)
        if export.kind == "adapter":
            from ftmanifest.adapter.check import check_adapter

            s.adapter = check_adapter(s.deliverable, manifest=s.manifest_path,
                                      trust_path=trust_path, use_cache=use_cache,
                                      allow_outside=allow_outside)  # fmt: skip
    except FtManifestError as exc:
        s.deliverable_error = exc


def _gather_scan(s: AuditSubject, manifest: Manifest, use_cache: bool, allow_outside: bool) -> None:
    from ftmanifest.scan import baseline as scan_baseline
    from ftmanifest.scan.cache import scan_cached
    from ftmanifest.scan.engine import ScanOptions
    from ftmanifest.scan.judge import failing

    policy = manifest.security.scan
    if "audit" not in policy.on:
        s.scan_skipped = True
        return
    found = scan_for_verify(manifest, s.manifest_path, use_cache=use_cache,
                            allow_outside=allow_outside)  # fmt: skip
    tops = sorted(p for p in s.run_dir.iterdir() if p.name not in SKIP_SCAN)
    if tops:
        options = ScanOptions(secrets=policy.secrets, pii=policy.pii, pickles=policy.pickles)
        run_rows = scan_cached(tops, options, use_cache=use_cache, symlink_root=s.run_dir).findings
        run_rows = [f for f in run_rows if not _key_in_keys(f, s.run_dir)]
        if policy.baseline:
            accepted = scan_baseline.load(s.manifest_path.parent / policy.baseline)
            run_rows, _ = scan_baseline.apply(run_rows, accepted, policy.baseline)
        found += failing(run_rows)
    seen: set[tuple[Any, ...]] = set()
    for f in found:  # the run folder may hold the data too: one row per hit
        key = (f.rule, str(Path(f.path).resolve()) if f.path else None, f.line, f.column)
        if key not in seen:
            seen.add(key)
            s.scan.append(f)


def _key_in_keys(f: Finding, run_dir: Path) -> bool:
    if f.rule not in KEY_FILE_RULES or not f.path or f.extra.get("in") == "name":
        return False
    return Path(f.path).parent == run_dir / "keys" or run_dir / "keys" in Path(f.path).parents


def _gather_perms(s: AuditSubject, manifest: Manifest, fix_perms: bool) -> None:
    roots: list[tuple[str, Path]] = [("data", p) for p in s.data_paths.values()]
    roots += [("data", s.run_dir / "data"), ("checkpoints", s.run_dir / "checkpoints")]
    if s.deliverable is not None:
        roots.append(("checkpoints", s.deliverable))
    roots += [("logs", s.run_dir / "logs"), ("keys", s.run_dir / "keys")]
    caches, shared = _cache_roots(manifest, s.manifest_path)
    s.loose, s.unfixed, s.changes = perms.judge(
        roots + caches, manifest.security.max_modes, fix=fix_perms, shared=shared
    )


def _cache_roots(
    manifest: Manifest, manifest_path: Path
) -> tuple[list[tuple[str, Path]], dict[Path, str]]:
    """The caches the run used: the base model's folder (a local ``model.path``, or
    the pinned repo's whole hub-cache folder, blobs included) judged as weights, and
    ftmanifest's own cache (digests and scan fingerprints of the data) as data.
    The hub cache's folder is shared with every run and user of that cache:
    it is named in the second item, so ``--fix-perms`` never changes it."""
    out: list[tuple[str, Path]] = []
    shared: dict[Path, str] = {}
    m = manifest.model
    try:
        if m.path is not None:
            out.append(("checkpoints", manifest_path.parent / m.path))
        elif m.repo is not None and m.revision:
            folder = hub_snapshot(m.repo, m.revision).folder.parent.parent
            out.append(("checkpoints", folder))
            shared[folder] = f"Hugging Face hub cache ({folder.parent})"
    except FtManifestError:
        pass  # a base that is not here is already a drift row
    try:
        out.append(("data", cache_dir()))
    except (OSError, RuntimeError):
        pass
    return out, shared
