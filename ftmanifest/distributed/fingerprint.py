"""One rank's fingerprint: what it observed, what it read, what its verify found.

Layer: edges - distributed (pure over ``verify``'s report; no torch).  Every rank of a
torchrun job builds one (``of_report``, or ``of_error`` when its verify could
not run) and sends it to the others as plain JSON-able data, so a rank running
another ftmanifest version can still be read and named.  ``flatten`` turns the
observed environment into ``environment.packages.torch``-style fields, the
same names drift rows use, so ranks are compared field by field.  ``sane``
checks what arrived: each answer takes the rank of its place in the gather,
and one that is not a fingerprint becomes an error naming that rank.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ftmanifest import __version__
from ftmanifest.errors import EXIT_BUG, EXIT_REFUSED, FtManifestError
from ftmanifest.location import format_loc
from ftmanifest.manifest.environment import fingerprint
from ftmanifest.probe.packages import forced_versions

if TYPE_CHECKING:
    from ftmanifest.distributed.comm import Job
    from ftmanifest.errors import FtManifestError
    from ftmanifest.verify import VerifyReport

UNREADABLE = "unreadable: "


def host_name() -> str:
    return socket.gethostname() or "?"


def base(job: Job, strategy: str = "unknown") -> dict[str, Any]:
    """Who sent a fingerprint: rank, host, node, ftmanifest version, strategy."""
    return {
        "rank": job.rank,
        "host": host_name(),
        "node_rank": job.node_rank,
        "local_rank": job.local_rank,
        "world_size": job.world_size,
        "ftmanifest": __version__,
        "strategy": strategy,
        "test_override": sorted(forced_versions()),
    }


def of_report(job: Job, report: VerifyReport, strategy: str) -> dict[str, Any]:
    """This rank's fingerprint from its verify ``report`` (which must carry ``observed``)."""
    env = report.environment
    return {
        **base(job, strategy),
        "manifest_digest": report.manifest_digest,
        "environment": env.model_dump(mode="json", exclude_none=True) if env else None,
        "environment_digest": fingerprint(env) if env is not None else None,
        "files": files_read(report.observed, report.loaded.manifest if report.loaded else None),
        "findings": [f.to_dict() for f in report.findings if f.severity == "error"],
        "warnings": list(report.warnings),
        "ok": report.ok,
        "error": None,
    }


def of_error(job: Job, exc: BaseException, strategy: str = "unknown") -> dict[str, Any]:
    """The fingerprint of a rank whose verify raised: it still answers every gather."""
    if isinstance(exc, FtManifestError):
        error = error_dict(exc)
    else:
        error = {
            "message": f"internal error: {type(exc).__name__}: {exc}",
            "exit_code": EXIT_BUG,
            "field": None,
            "hint": None,
        }
    return {
        **base(job, strategy),
        "manifest_digest": None,
        "environment": None,
        "environment_digest": None,
        "files": {},
        "findings": [],
        "warnings": [],
        "ok": False,
        "error": error,
    }


def error_dict(exc: FtManifestError) -> dict[str, Any]:
    return {
        "message": exc.message,
        "exit_code": exc.exit_code,
        "field": getattr(exc, "field", None),
        "hint": exc.hint,
    }


def files_read(seen: Any, manifest: Any = None) -> dict[str, str]:
    """{field: digest} of every file verify read (model files, data, pinned files);
    a file it could not read maps to ``unreadable: why`` (a value, so it differs).

    Each field is the one verify's drift row names and ``--accept`` takes: a
    model file the manifest lists is ``model.files[i]`` (its place in the list);
    one it does not list, ``model.files["name"]`` (no ``--accept`` covers it)."""
    if seen is None:
        return {}
    out: dict[str, str] = {}
    model = seen.model
    listed = {f.path: i for i, f in enumerate(manifest.model.files)} if manifest else {}
    if model.error is not None:
        out["model"] = UNREADABLE + str(getattr(model.error, "message", model.error))
    for rel, state in sorted(model.files.items()):
        name = f"model.files[{listed[rel]}]" if rel in listed else f"model.files[{json.dumps(rel)}]"
        out[name] = _state(state)
    for i, state in enumerate(seen.data):
        out[f"data[{i}].digest"] = _state(state)
    for loc, state in seen.pinned.items():
        out[format_loc(loc)] = _state(state)
    return out


def _state(state: Any) -> str:
    if state.error:
        return UNREADABLE + str(state.error)
    return str(state.digest) if state.digest else UNREADABLE + "no digest"


def flatten(fp: Mapping[str, Any]) -> dict[str, str]:
    """The fields ranks must agree on: the environment, the files read, the ftmanifest
    version; each a display string (lists and maps as compact JSON)."""
    out = {"ftmanifest": str(fp.get("ftmanifest"))}
    env = fp.get("environment")
    if isinstance(env, Mapping):
        out.update(_leaves("environment", env))
    out.update({k: str(v) for k, v in (fp.get("files") or {}).items()})
    return out


def _leaves(prefix: str, value: Any) -> Iterator[tuple[str, str]]:
    if isinstance(value, Mapping):  # an empty one has no leaves: {} is "no variables"
        for key, inner in value.items():
            yield from _leaves(f"{prefix}.{key}", inner)
    elif isinstance(value, str):
        yield prefix, value
    else:
        yield prefix, json.dumps(value, sort_keys=True, separators=(",", ":"))


def strategy_from_env(world_size: int, environ: Mapping[str, str] | None = None) -> str:
    """What the launcher configured, from the variables accelerate leaves
    (``ACCELERATE_USE_FSDP``, ``ACCELERATE_USE_DEEPSPEED`` with
    ``ACCELERATE_DEEPSPEED_ZERO_STAGE``; accelerate/utils/launch.py); without
    them torchrun alone runs data parallel: ``ddp`` for more than one process."""
    env = os.environ if environ is None else environ
    if env.get("ACCELERATE_USE_FSDP", "").lower() == "true":
        return "fsdp"
    if env.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        return _zero(env.get("ACCELERATE_DEEPSPEED_ZERO_STAGE"))
    return "ddp" if world_size > 1 else "none"


def strategy_from_args(args: Any, world_size: int) -> str:
    """What a ``TrainingArguments`` configures: ``fsdp``, DeepSpeed's ZeRO stage, else DDP."""
    if getattr(args, "fsdp", None) not in (None, False, "", []):
        return "fsdp"
    if getattr(args, "deepspeed", None):
        config = getattr(getattr(args, "hf_deepspeed_config", None), "config", None)
        if config is None:
            config = _deepspeed_config(args.deepspeed)
        stage = (config or {}).get("zero_optimization", {}).get("stage")
        return _zero(None if stage is None else str(stage))
    return "ddp" if world_size > 1 else "none"


def _deepspeed_config(value: Any) -> dict[str, Any] | None:
    if isinstance(value, dict):
        return value
    try:
        with open(value, encoding="utf-8") as f:
            loaded = json.load(f)
    except (OSError, ValueError, TypeError):
        return None
    return loaded if isinstance(loaded, dict) else None


def _zero(stage: str | None) -> str:
    """``zero1``..``zero3``; stage 0 is plain data parallel; anything else is named as
    seen, so it matches no manifest value (fail closed)."""
    if stage in ("1", "2", "3"):
        return f"zero{stage}"
    if stage == "0":
        return "ddp"
    return f"deepspeed (ZeRO stage {stage or 'unknown'})"


_TYPES: dict[str, tuple[type, ...]] = {
    "rank": (int,),
    "host": (str,),
    "node_rank": (int,),
    "strategy": (str, type(None)),
    "manifest_digest": (str, type(None)),
    "environment": (dict, type(None)),
    "files": (dict,),
    "findings": (list,),
    "warnings": (list,),
    "test_override": (list,),
    "error": (dict, type(None)),
}
_DEFAULTS: dict[str, Any] = {"files": {}, "findings": [], "warnings": [], "test_override": []}


def _readable(answer: Any) -> bool:
    if not isinstance(answer, dict):
        return False
    answer = {**_DEFAULTS, **answer}
    if not all(isinstance(answer.get(k), t) for k, t in _TYPES.items()):
        return False
    err = answer["error"]
    if err is not None and not (
        isinstance(err.get("message"), str) and err.get("exit_code") in (1, 2, 3)
    ):
        return False
    return all(isinstance(f, dict) for f in answer["findings"]) and all(
        isinstance(v, str) for v in answer["files"].values()
    )


def sane(answers: Sequence[Any]) -> list[dict[str, Any]]:
    """The gathered answers, each claiming the rank it came from (its place in the
    gather, whatever it says); one that is not a fingerprint is an error row."""
    out = []
    for rank, answer in enumerate(answers):
        if _readable(answer):
            out.append({**_DEFAULTS, **answer, "rank": rank})
            continue
        out.append(
            {
                **_DEFAULTS,
                "rank": rank,
                "host": "?",
                "node_rank": -1 - rank,
                "strategy": None,
                "manifest_digest": None,
                "environment": None,
                "error": {
                    "message": f"rank {rank} sent an answer that is not a fingerprint",
                    "exit_code": EXIT_REFUSED,
                    "field": "ranks",
                    "hint": "run the same ftmanifest version on every rank",
                },
            }
        )
    return out
