"""Attempts of one manifest that did not start alike: not the same run.

Layer: judging rooms (ledger; pure: attempts in, notes out).  The Trainer
guard records, for each attempt that starts at step 0, a digest of the
trainable parameters before the first step (``initial_trainable_digest``)
and one of the first micro-batch the model was fed (``first_batch_digest``;
``integrations.batches``).  Two attempts of the same manifest (same digest)
whose digests differ did not start from the same weights or data: another
LoRA initialisation, another data order, a script that changed between
them.  ``ledger list`` says so beside each of them.  A resumed attempt
starts from its checkpoint and is not compared.
"""

from __future__ import annotations

from collections.abc import Sequence

from ftmanifest.ledger.attempts import Attempt

DIGESTS = (
    ("initial_trainable_digest", "initial trainable weights"),
    ("first_batch_digest", "first batch"),
)


def start_of(attempt: Attempt) -> dict[str, str]:
    """The start digests the attempt's latest fresh-start record gives (none: not recorded)."""
    out: dict[str, str] = {}
    for e in attempt.entries:
        if e.record.get("start_global_step") not in (0, None):
            continue  # resumed from a checkpoint: another start by design
        for key, _what in DIGESTS:
            value = e.record.get(key)
            if isinstance(value, str) and value.startswith("sha256:"):
                out[key] = value
    return out


def different_starts(items: Sequence[Attempt]) -> dict[str, list[str]]:
    """attempt id -> notes, for attempts whose manifest another attempt shares
    with another start digest."""
    groups: dict[str, list[Attempt]] = {}
    for a in items:
        if a.manifest_digest is not None:
            groups.setdefault(a.manifest_digest, []).append(a)
    notes: dict[str, list[str]] = {}
    for group in groups.values():
        starts = {a.id: start_of(a) for a in group}
        for key, what in DIGESTS:
            values = {aid: s[key] for aid, s in starts.items() if key in s}
            if len(set(values.values())) < 2:
                continue
            for aid, value in values.items():
                others = [b for b, v in values.items() if v != value]
                notes.setdefault(aid, []).append(
                    f"same manifest, different start: its {what} ({key} "
                    f"{value.removeprefix('sha256:')[:12]}) differ from attempt(s) "
                    f"{', '.join(others)}: not the same run"
                )
    return notes
