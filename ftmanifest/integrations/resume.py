"""A resume continues this manifest's own guarded run: checkpoints bound at save.

Layer: edges - edge (integrations).  The Trainer guard calls ``bind_checkpoint``
from ``on_save`` (the Trainer has written the folder: weights, optimizer,
scheduler, RNG state, ``trainer_state.json``) and ``judge_resume`` at
``on_train_begin``.

``train(resume_from_checkpoint=DIR)`` loads DIR's weights, optimizer state and
step before any callback runs, and the warm-start and weight checks then stand
aside (the weights are the checkpoint's, on purpose).  So a resume is accepted
only from a checkpoint this manifest's guarded run wrote: its binding
(``ftmanifest-checkpoint.json`` in the folder) names the manifest digest and
the sha256 of every file of the folder as saved.  A folder without a binding, a
binding of another manifest, or a file changed, added or removed since is
refused (``drift.resume-foreign``) before the next step.

The Trainer does not hand its callbacks the folder: it is read from the
``resume_from_checkpoint`` argument of the ``Trainer._inner_training_loop``
frame that calls ``on_train_begin`` (transformers 5).  A resumed step with no
such frame is refused too (fail closed).  The binding is not signed: it stops a
checkpoint of another run or one edited by mistake, not someone who rewrites
the binding by hand.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from ftmanifest.adapter.binding import ENVELOPE_NAME
from ftmanifest.errors import FtManifestError
from ftmanifest.findings import Finding
from ftmanifest.fsutil import atomic_write_text
from ftmanifest.hashing.tree import hash_tree
from ftmanifest.signing.model_sig import SIGNATURE_NAME

RULE = "drift.resume-foreign"
BINDING = "ftmanifest-checkpoint.json"
FORMAT = "ftmanifest-checkpoint/1"
SHOWN = 3
NOT_FOUND = object()  # no Trainer frame on the stack
# Written after the binding: ours, and the adapter binding's signatures over the folder
# (``ftmanifest.adapter.bind``, which check-adapter verifies), not what a resume reads.
SIGNATURES = frozenset({BINDING, ENVELOPE_NAME, SIGNATURE_NAME})


def _files(folder: Path) -> dict[str, str]:
    """``relpath -> sha256:…`` of every file of ``folder`` but the signatures (no stat
    cache: an edit that keeps the mtime is still seen)."""
    tree = hash_tree(folder, use_cache=False)
    return {rel: fd.digest for rel, fd in tree.files.items() if rel not in SIGNATURES}


def bind_checkpoint(folder: Path, manifest_digest: str, step: int) -> dict[str, Any]:
    """Write ``folder``'s binding to the manifest; what the run record keeps of it."""
    began = time.perf_counter()
    files = _files(folder)
    body = {"format": FORMAT, "manifest_digest": manifest_digest, "global_step": step,
            "files": files}  # fmt: skip
    atomic_write_text(folder / BINDING, json.dumps(body, indent=2, sort_keys=True) + "\n")
    return {"path": str(folder), "global_step": step, "files": len(files),
            "seconds": round(time.perf_counter() - began, 3)}  # fmt: skip


def resume_folder() -> Any:
    """The checkpoint the running ``Trainer.train`` resumes from: a path, None (a fresh
    start), or ``NOT_FOUND`` when no Trainer loop is on the stack."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_inner_training_loop" and "self" in frame.f_locals:
            value = frame.f_locals.get("resume_from_checkpoint")
            return None if value is None else str(value)
        frame = frame.f_back  # type: ignore[assignment]
    return NOT_FOUND


def judge_resume(
    folder: Any, step: int, manifest_digest: str, path: str
) -> tuple[list[Finding], dict[str, Any]]:
    """Rows refusing a resume from ``folder`` (``resume_folder()``'s answer) that this
    manifest's guarded run did not write; the run record's part."""
    if folder is None and step == 0:
        return [], {"resumed": False}
    record: dict[str, Any] = {"resumed": True, "checkpoint": None, "bound": False}
    if folder is None or folder is NOT_FOUND:
        why = f"a run resumed at step {step} from a checkpoint the guard cannot name (no "
        return [_row(path, manifest_digest, why + "Trainer._inner_training_loop on the stack)",
                     "the run's own folder is not known")], record  # fmt: skip
    record["checkpoint"] = str(folder)
    observed, message = _compare(Path(folder), manifest_digest)
    if observed is None:
        record["bound"] = True
        return [], record
    return [_row(path, manifest_digest, f"{folder}: {observed}", message)], record


def _compare(folder: Path, digest: str) -> tuple[str | None, str]:
    """What differs between ``folder`` and its binding to ``digest`` (None: nothing)."""
    try:
        body = json.loads((folder / BINDING).read_text("utf-8"))
    except FileNotFoundError:
        return "no binding (" + BINDING + ": no guarded run saved it)", "was not saved by a guard"
    except (OSError, ValueError) as exc:
        return f"{BINDING} unreadable ({exc})", "has a binding that cannot be read"
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        return f"{BINDING} is not a {FORMAT} binding", "has a binding that cannot be read"
    if body.get("manifest_digest") != digest:
        bound = body.get("manifest_digest")
        return f"bound to manifest {bound}", "was saved by a run of another manifest"
    try:
        now = _files(folder)
    except FtManifestError as exc:
        return f"cannot be read ({exc.message})", "cannot be read"
    files = body.get("files")
    then: dict[str, Any] = files if isinstance(files, dict) else {}
    diffs = [f"{rel} changed" for rel in sorted(now) if rel in then and then[rel] != now[rel]]
    diffs += [f"{rel} added" for rel in sorted(set(now) - set(then))]
    diffs += [f"{rel} removed" for rel in sorted(set(then) - set(now))]
    if not diffs:
        return None, ""
    more = f" (and {len(diffs) - SHOWN} more)" if len(diffs) > SHOWN else ""
    return "; ".join(diffs[:SHOWN]) + more, "was changed since the guard saved it"


def _row(path: str, digest: str, observed: str, message: str) -> Finding:
    return Finding.at(
        ("training",),
        kind="drift",
        rule=RULE,
        message=f"the checkpoint training resumes from {message}: its weights, optimizer "
        "and step are not this manifest's run's",
        path=path,
        expected=f"a checkpoint this manifest's guarded run saved (bound to manifest {digest}, "
        "every file as saved)",
        observed=observed,
        hint="resume only a checkpoint of this run (trainer.train(resume_from_checkpoint=True) "
        "in its output_dir), or start fresh; to start from another run's adapter, pin it as "
        "method.init_adapter and re-sign",
    )
