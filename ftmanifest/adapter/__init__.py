"""Bind a PEFT adapter to its base model's exact weights; refuse it anywhere else.

Layer: judging rooms (after scan and the ledger, before verify, which asks it
for the LoRA-against-base check): an edge around a pure judging core.
``tensors`` digests safetensors weights without torch; peft's rule for which
modules an adapter wraps and with which rank is ``manifest.targets`` (one
resolver for lint, bind, check-adapter and the Trainer guard); ``headers``
reads a base's module tree from its headers; ``architecture`` judges LoRA
targets and tensor shapes on it; ``method`` compares a peft config with the
manifest's ``method``; ``base`` finds the base here; ``binding`` is the record
and its three written forms (safetensors metadata, ``adapter_config.json``, a
signed in-toto statement); ``bind`` binds; ``check`` judges an adapter against
a base and returns findings; ``load`` checks, then loads through peft (torch
imported there only, lazily).

    from ftmanifest.adapter import load_bound
    model = load_bound("out/adapter", manifest="exp.yaml")
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ftmanifest.adapter.check import AdapterRefusedError
    from ftmanifest.adapter.load import check_loaded_base, check_loaded_config, load_bound

__all__ = ["AdapterRefusedError", "check_loaded_base", "check_loaded_config", "load_bound"]


def __getattr__(name: str) -> object:
    # Lazy, so `check-adapter` (headers only) never loads more than it needs.
    if name in __all__:
        from ftmanifest.adapter import load

        return getattr(load, name)
    raise AttributeError(f"module 'ftmanifest.adapter' has no attribute {name!r}")
