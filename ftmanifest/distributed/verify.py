"""``verify --distributed``: every rank verifies itself, every rank reaches one verdict.

Layer: edges - distributed (orchestration over ``verify``, ``comm`` and ``shard``;
``judge`` is pure).  ``verify_job`` gathers first the manifest's digest
(ranks holding different manifests are refused before anything is hashed),
then hashes the manifest's files once over the job (``shard``), then gathers
each rank's fingerprint (``fingerprint.of_report``).  Every rank judges the same gathered
list with the same code, so all ranks print the same verdict and exit with
the same code.  A rank whose verify raised still sends its error, so the
others do not wait for the deadline.

The rows, one per (rank, field):

- *differs*: a field on which ranks disagree (environment, ftmanifest
  version, the digest of a file read).  Expected is the value most ranks
  have; a tie goes to the lowest rank's value, so in a job of two, rank 1 is
  named when it differs from rank 0.  Every rank with another value is a row.
- *drift*: a rank's own verify rows against the manifest; the same row on
  every rank is shown once, as rank ``all``.  A rank's drift row on a field
  stands in for its *differs* row there (it says more: the manifest's value
  and the fix).
- *error*: a rank whose verify could not run (exit 2 on every rank; 3 for a bug).
- *job*: ``distributed.world_size``, ``nodes`` (distinct node ranks) and
  ``strategy`` against the job (rank ``job``); these can be accepted on
  purpose like any drift row.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.distributed.agree import ranks_text
from ftmanifest.distributed.fingerprint import base, flatten, of_error, of_report, sane
from ftmanifest.distributed.shard import plan_manifest
from ftmanifest.errors import EXIT_OK, EXIT_REFUSED, FtManifestError
from ftmanifest.findings import Finding
from ftmanifest.manifest import load_manifest
from ftmanifest.verify import apply_acceptances

if TYPE_CHECKING:
    from ftmanifest.distributed.comm import Comm
    from ftmanifest.manifest.model import Manifest
    from ftmanifest.verify import Acceptance, VerifyReport

ABSENT = "(absent)"


@dataclass
class JobVerdict:
    """What every rank concludes from the gathered fingerprints."""

    rows: list[Finding]
    prints: list[dict[str, Any]]
    exit_code: int
    accepted: list[Acceptance] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exit_code == EXIT_OK

    @property
    def nodes(self) -> int:
        return len({fp["node_rank"] for fp in self.prints})

    @property
    def hosts(self) -> list[str]:
        return sorted({str(fp["host"]) for fp in self.prints})

    def named(self) -> dict[int, list[str]]:
        """{rank: fields} of the ranks a row names (``all`` names every rank)."""
        out: dict[int, list[str]] = {}
        for row in self.rows:
            for rank in row.extra.get("ranks", ()):
                out.setdefault(rank, []).append(row.field or row.rule)
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "exit_code": self.exit_code,
            "world_size": len(self.prints),
            "nodes": self.nodes,
            "hosts": self.hosts,
            "rows": [_row_dict(r) for r in self.rows],
            "accepted": [{**_row_dict(a.finding), "reason": a.reason} for a in self.accepted],
            "ranks": self.prints,
        }


def _row_dict(row: Finding) -> dict[str, Any]:
    out = row.to_dict()
    out.pop("extra", None)
    return {"rank": row.extra.get("rank"), "host": row.extra.get("host"), **out}


def _row(rule: str, rank: str, ranks: Sequence[int], host: str, **fields: Any) -> Finding:
    return Finding(
        kind="drift",
        rule=rule,
        extra={"rank": rank, "ranks": list(ranks), "host": host},
        **fields,
    )


def judge_manifests(answers: Sequence[Mapping[str, Any]]) -> JobVerdict | None:
    """None when every rank loaded the same manifest; else the refusal naming ranks."""
    prints = [dict(a) for a in answers]
    digests = [a.get("manifest_digest") for a in answers]
    errors = [a for a in answers if a.get("error")]
    if not errors and len(set(digests)) == 1:
        return None
    rows = [_error_row(a) for a in errors]
    rows += _differs([a for a in answers if not a.get("error")], "manifest", digests_only=True)
    code = max([EXIT_REFUSED, *(int(a["error"]["exit_code"]) for a in errors)])
    return JobVerdict(rows, prints, code)


def _error_row(fp: Mapping[str, Any]) -> Finding:
    err = fp["error"]
    return _row(
        "distributed.rank-error",
        str(fp["rank"]),
        [fp["rank"]],
        str(fp["host"]),
        message=f"rank {fp['rank']} could not verify: {err['message']}",
        field=err.get("field") or "verify",
        expected="a manifest this rank can judge",
        observed=err["message"],
        hint=err.get("hint"),
    )


def _expected(values: Mapping[int, str]) -> str:
    """The value most ranks have; a tie goes to the lowest rank's."""
    counts = Counter(values.values())
    top = max(counts.values())
    return next(v for _, v in sorted(values.items()) if counts[v] == top)


def _differs(
    prints: Sequence[Mapping[str, Any]], what: str = "", *, digests_only: bool = False
) -> list[Finding]:
    if digests_only:
        flat = {fp["rank"]: {"manifest": str(fp.get("manifest_digest"))} for fp in prints}
    else:
        flat = {fp["rank"]: flatten(fp) for fp in prints}
    hosts = {fp["rank"]: str(fp["host"]) for fp in prints}
    keys = sorted({k for f in flat.values() for k in f})
    rows = []
    for key in keys:
        values = {rank: f.get(key, ABSENT) for rank, f in flat.items()}
        if len(set(values.values())) < 2:
            continue
        want = _expected(values)
        agree = ranks_text([r for r, v in values.items() if v == want])
        others: dict[str, list[int]] = {}  # one row per value: ranks 2,3 of one node alike
        for rank, value in sorted(values.items()):
            if value != want:
                others.setdefault(value, []).append(rank)
        for value, ranks in others.items():
            shown = ranks_text(ranks)
            rows.append(
                _row(
                    "distributed.rank-differs",
                    shown,
                    ranks,
                    ",".join(sorted({hosts[r] for r in ranks})),
                    message=f"rank(s) {shown} differ from rank(s) {agree} on {key}",
                    field=key,
                    expected=f"{want} (as rank {agree})",
                    observed=value,
                    hint="make every rank's environment and files the same "
                    "(the same image, venv, checkout and data)",
                )
            )
    return rows


def _drift(prints: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """Each rank's own rows against the manifest; a row every rank has is shown once."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for fp in prints:
        for f in fp.get("findings") or []:
            key = tuple(
                None if v is None else str(v)
                for v in (f.get("field") or f.get("rule"), f.get("expected"), f.get("observed"))
            )
            groups.setdefault(key, []).append({**f, "_rank": fp["rank"], "_host": fp["host"]})
    rows = []
    everyone = len(prints) > 1
    for (name, expected, observed), hits in groups.items():
        ranks = [h["_rank"] for h in hits]
        shown = "all" if everyone and len(hits) == len(prints) else ranks_text(ranks)
        hosts = sorted({str(h["_host"]) for h in hits})
        rows.append(
            _row(
                "distributed.drift",
                shown,
                ranks,
                ",".join(hosts),
                message=str(hits[0].get("message") or "drift"),
                field=name,
                expected=f"{expected} (manifest)",
                observed=observed,
                hint=hits[0].get("hint"),
                path=hits[0].get("path"),
            )
        )
    return rows


def _covers(row: Finding, name: str | None) -> bool:
    """Whether drift ``row`` already says what a differs row on ``name`` would: the same
    field, or an unlisted model file (``model.files`` naming the file's path)."""
    if row.field == name:
        return True
    return row.field == "model.files" and name == f"model.files[{json.dumps(row.path)}]"


def job_rows(manifest: Manifest, prints: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """``distributed.world_size``, ``nodes`` and ``strategy`` against the job."""
    want = manifest.distributed
    nodes = len({fp["node_rank"] for fp in prints})
    strategies = {fp["rank"]: str(fp.get("strategy")) for fp in prints}
    seen: list[tuple[str, Any, Any, str]] = [
        ("world_size", want.world_size, len(prints), "WORLD_SIZE"),
        ("nodes", want.nodes, nodes, "node ranks (GROUP_RANK)"),
        ("strategy", want.strategy, _expected(strategies) if strategies else "?", "launch"),
    ]
    rows = []
    for name, expected, observed, source in seen:
        if str(expected) == str(observed):
            continue
        hint = f"start the job as the manifest says, or change distributed.{name}"
        if name == "strategy":
            hint += (
                " (outside the Trainer, FSDP and DeepSpeed are seen through accelerate's "
                "ACCELERATE_USE_FSDP / ACCELERATE_USE_DEEPSPEED variables)"
            )
        rows.append(
            Finding.at(
                ("distributed", name),
                kind="drift",
                rule="distributed.job",
                message=f"the job's {name} ({source}) differs from the manifest",
                expected=str(expected),
                observed=str(observed),
                hint=hint,
                extra={"rank": "job", "ranks": [], "host": ""},
            )
        )
    return rows


def judge(
    prints: Sequence[Mapping[str, Any]],
    manifest: Manifest | None,
    accept: Mapping[str, str] | None = None,
) -> JobVerdict:
    """The verdict every rank computes from the same gathered fingerprints."""
    errors = [fp for fp in prints if fp.get("error")]
    usable = [fp for fp in prints if not fp.get("error")]
    drift = _drift(usable)
    # a rank's drift row on a field already says it differs there (with the fix)
    differs = []
    for row in _differs(usable):
        ranks = [
            r
            for r in row.extra["ranks"]
            if not any(r in d.extra["ranks"] and _covers(d, row.field) for d in drift)
        ]
        if ranks:
            shown = ranks_text(ranks)
            extra = {**row.extra, "ranks": ranks, "rank": shown}
            differs.append(row._replace(extra=extra))
    rows = [_error_row(fp) for fp in errors]
    accepted: list[Acceptance] = []
    # every rank applied --accept to its own drift rows (the ranks agreed on the same
    # arguments), keeping those no --accept covers; the job's rows take it here, under
    # the field each shows, except a file the manifest does not list (as verify does)
    unlisted = [r for r in differs if (r.field or "").startswith('model.files["')]
    jobs = job_rows(manifest, prints) if manifest is not None else []
    kept = [r for r in differs if r not in unlisted] + jobs
    if manifest is not None:
        kept, accepted, _ = apply_acceptances(kept, accept or {})
    rows += [r for r in differs if r in unlisted or r in kept] + drift
    rows += [r for r in jobs if r in kept]
    code = EXIT_REFUSED if rows else EXIT_OK
    if errors:
        code = max([code, *(int(fp["error"]["exit_code"]) for fp in errors)])
    return JobVerdict(rows, [dict(fp) for fp in prints], code, accepted)


def gather_verdict(
    comm: Comm,
    build: Callable[[], tuple[dict[str, Any], Manifest | None]],
    on_error: Callable[[BaseException], dict[str, Any]],
    accept: Mapping[str, str] | None = None,
) -> tuple[JobVerdict, BaseException | None]:
    """Build this rank's fingerprint (``build``; ``on_error`` when it raises), gather
    every rank's, and judge.  Returns the verdict and this rank's own error, if any."""
    own_error: BaseException | None = None
    manifest = None
    try:
        fp, manifest = build()
    except Exception as exc:  # every rank must answer, whatever went wrong here
        own_error = exc
        fp = on_error(exc)
    prints = sane(comm.all_gather_json(fp, "the ranks' fingerprints"))
    return judge(prints, manifest, accept), own_error


def agree_on_manifest(comm: Comm, path: Path) -> JobVerdict | None:
    """Gather every rank's manifest digest; None when all hold the same manifest."""
    try:
        answer = {**base(comm.job), "manifest_digest": load_manifest(path).digest(), "error": None}
    except Exception as exc:  # answer anyway, so the others do not wait
        answer = of_error(comm.job, exc)
    return judge_manifests(sane(comm.all_gather_json(answer, "the manifests' digests")))


def verify_job(
    comm: Comm,
    manifest_path: Path,
    verify: Callable[[Any], VerifyReport],
    *,
    strategy: str,
    accept: Mapping[str, str] | None = None,
    use_cache: bool = True,
    allow_outside: bool = False,
) -> tuple[JobVerdict, VerifyReport | None]:
    """The whole job's verify: agree on the manifest, hash its files once over the
    job (``shard.plan_manifest``: each file read by one rank that sees it), run
    ``verify(hasher)`` here, gather and judge.  Returns the verdict and this
    rank's report (None when it could not verify)."""
    verdict = agree_on_manifest(comm, manifest_path)
    if verdict is not None:
        return verdict, None
    try:  # the same manifest everywhere: every rank passes the same options
        if load_manifest(manifest_path).manifest.security.rehash == "always":
            use_cache = False
    except FtManifestError:
        pass  # judged below, as this rank's error
    planned, failure = plan_manifest(
        comm, manifest_path, use_cache=use_cache, allow_outside=allow_outside
    )
    mine: list[VerifyReport] = []

    def build() -> tuple[dict[str, Any], Manifest | None]:
        if failure is not None:
            raise failure
        mine.append(verify(planned))
        loaded = mine[0].loaded
        return of_report(comm.job, mine[0], strategy), loaded.manifest if loaded else None

    verdict, _ = gather_verdict(comm, build, lambda exc: of_error(comm.job, exc, strategy), accept)
    return verdict, (mine[0] if mine else None)
