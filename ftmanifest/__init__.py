"""ftmanifest: signed, declarative manifests for fine-tuning experiments.

The package is built in layers, low to high; a room (a sub-package or a
top-level module) imports only rooms below it, or before it in its layer
(``tests/import_graph_test.py`` holds the order and checks every import,
function-level ones too):

1. pure core - location, errors, extras, findings, safe_text, output, checks,
   manifest, lint, lint_report, jsonschema_lib: plain data in, findings out, no I/O beyond
   reading a file;
2. file access - fsutil, counts, sqlite_store, statcache, foldercache, held,
   progress, hashing, treelist, untrusted, hfcache, snapshot, recordio, wire:
   reading, hashing, atomic writes, caches;
3. probes and runtime - probe, seeding, supervise, collector: what this machine is
   and how the tool's own processes run;
4. signing - signing: keys, trust, envelopes;
5. judging rooms - scan, ledger, adapter, verify, preflight, data, results,
   backup: each decides one kind of question;
6. edges - distributed, integrations, authoring: other processes, other
   frameworks and other tools' configs;
7. commands - examples, cli, __main__: parse, call one function, render.

This module is the public facade and may import any room, lazily: importing
the package itself is cheap (torch, transformers and peft are only imported
inside the modules that need them).
"""

from __future__ import annotations

__version__ = "0.1.0"

# The public API: each name, and the module that defines it (imported on first use,
# so `import ftmanifest` stays cheap).  docs/reference/api.md is generated from it.
PUBLIC: dict[str, str] = {
    # manifests
    "load_manifest": "ftmanifest.manifest",
    "LoadedManifest": "ftmanifest.manifest",
    "Manifest": "ftmanifest.manifest.model",
    "lint_paths": "ftmanifest",
    # judging
    "verify_manifest": "ftmanifest.verify",
    "VerifyReport": "ftmanifest.verify",
    "DriftError": "ftmanifest.verify",
    "guard": "ftmanifest.verify.guard",
    "GuardRefusedError": "ftmanifest.verify.guard",
    "scan_paths": "ftmanifest.scan",
    "ScanOptions": "ftmanifest.scan",
    "ScanResult": "ftmanifest.scan",
    "check_adapter": "ftmanifest.adapter.check",
    "AdapterReport": "ftmanifest.adapter.check",
    "AdapterRefusedError": "ftmanifest.adapter.check",
    "bind_adapter": "ftmanifest.adapter.bind",
    "BindResult": "ftmanifest.adapter.bind",
    "BindRefusedError": "ftmanifest.adapter.bind",
    "load_bound": "ftmanifest.adapter.load",
    # results of every check
    "Finding": "ftmanifest.findings",
    # training code
    "seed_everything": "ftmanifest.seeding",
    "FtManifestCallback": "ftmanifest.integrations.transformers",
    "DriftRefusedError": "ftmanifest.integrations.transformers",
    "RanksRefusedError": "ftmanifest.integrations.transformers",
    "StepRefusedError": "ftmanifest.integrations.transformers",
    "EvalRefusedError": "ftmanifest.integrations.transformers",
    "load_pinned": "ftmanifest.integrations.pinned",
    "SnapshotNotFoundError": "ftmanifest.hfcache",
    "load_pinned_dataset": "ftmanifest.integrations.datasets",
    "DataDigestError": "ftmanifest.integrations.datasets",
    "training_arguments": "ftmanifest.integrations.builders",
    "sft_config": "ftmanifest.integrations.builders",
    "dpo_config": "ftmanifest.integrations.builders",
    "lora_config": "ftmanifest.integrations.builders",
    # the error hierarchy: catch a base, match ``.reason`` (docs/reference/codes.md)
    "FtManifestError": "ftmanifest.errors",
    "UsageError": "ftmanifest.errors",
    "InputError": "ftmanifest.errors",
    "InputNotFoundError": "ftmanifest.errors",
    "NotRegularFileError": "ftmanifest.errors",
    "FileTooLargeError": "ftmanifest.errors",
    "ManifestError": "ftmanifest.errors",
    "ManifestInvalidError": "ftmanifest.errors",
    "UnsupportedVersionError": "ftmanifest.errors",
    "RefusedError": "ftmanifest.errors",
    "ResourceError": "ftmanifest.errors",
    "WorkerDiedError": "ftmanifest.errors",
    "UnsupportedDependencyError": "ftmanifest.errors",
    "MissingExtraError": "ftmanifest.errors",
    "CommandNotRunnableError": "ftmanifest.errors",
    "CommandNotFoundError": "ftmanifest.errors",
}

__all__ = ["__version__", *PUBLIC]

TYPE_CHECKING = False  # no runtime typing: `import ftmanifest` stays cheap
if TYPE_CHECKING:
    from ftmanifest.adapter.bind import BindRefusedError as BindRefusedError
    from ftmanifest.adapter.bind import BindResult as BindResult
    from ftmanifest.adapter.bind import bind_adapter as bind_adapter
    from ftmanifest.adapter.check import AdapterRefusedError as AdapterRefusedError
    from ftmanifest.adapter.check import AdapterReport as AdapterReport
    from ftmanifest.adapter.check import check_adapter as check_adapter
    from ftmanifest.adapter.load import load_bound as load_bound
    from ftmanifest.errors import CommandNotFoundError as CommandNotFoundError
    from ftmanifest.errors import CommandNotRunnableError as CommandNotRunnableError
    from ftmanifest.errors import FileTooLargeError as FileTooLargeError
    from ftmanifest.errors import FtManifestError as FtManifestError
    from ftmanifest.errors import InputError as InputError
    from ftmanifest.errors import InputNotFoundError as InputNotFoundError
    from ftmanifest.errors import ManifestError as ManifestError
    from ftmanifest.errors import ManifestInvalidError as ManifestInvalidError
    from ftmanifest.errors import MissingExtraError as MissingExtraError
    from ftmanifest.errors import NotRegularFileError as NotRegularFileError
    from ftmanifest.errors import RefusedError as RefusedError
    from ftmanifest.errors import ResourceError as ResourceError
    from ftmanifest.errors import UnsupportedDependencyError as UnsupportedDependencyError
    from ftmanifest.errors import UnsupportedVersionError as UnsupportedVersionError
    from ftmanifest.errors import UsageError as UsageError
    from ftmanifest.errors import WorkerDiedError as WorkerDiedError
    from ftmanifest.findings import Finding as Finding
    from ftmanifest.hfcache import SnapshotNotFoundError as SnapshotNotFoundError
    from ftmanifest.integrations.builders import dpo_config as dpo_config
    from ftmanifest.integrations.builders import lora_config as lora_config
    from ftmanifest.integrations.builders import sft_config as sft_config
    from ftmanifest.integrations.builders import training_arguments as training_arguments
    from ftmanifest.integrations.datasets import DataDigestError as DataDigestError
    from ftmanifest.integrations.datasets import load_pinned_dataset as load_pinned_dataset
    from ftmanifest.integrations.pinned import load_pinned as load_pinned
    from ftmanifest.integrations.transformers import DriftRefusedError as DriftRefusedError
    from ftmanifest.integrations.transformers import EvalRefusedError as EvalRefusedError
    from ftmanifest.integrations.transformers import FtManifestCallback as FtManifestCallback
    from ftmanifest.integrations.transformers import RanksRefusedError as RanksRefusedError
    from ftmanifest.integrations.transformers import StepRefusedError as StepRefusedError
    from ftmanifest.manifest import LoadedManifest as LoadedManifest
    from ftmanifest.manifest import load_manifest as load_manifest
    from ftmanifest.manifest.load import Document
    from ftmanifest.manifest.model import Manifest as Manifest
    from ftmanifest.scan import ScanOptions as ScanOptions
    from ftmanifest.scan import ScanResult as ScanResult
    from ftmanifest.scan import scan_paths as scan_paths
    from ftmanifest.seeding import seed_everything as seed_everything
    from ftmanifest.verify import DriftError as DriftError
    from ftmanifest.verify import VerifyReport as VerifyReport
    from ftmanifest.verify import verify_manifest as verify_manifest
    from ftmanifest.verify.guard import GuardRefusedError as GuardRefusedError
    from ftmanifest.verify.guard import guard as guard


def lint_paths(paths: list[str]) -> tuple[list[Finding], int]:
    """Lint manifest files: every rule, and a variant's fairness against its parent
    (found beside it or in the ledger); returns (findings, unusable files)."""
    from ftmanifest.lint import lint_paths as run_rules

    return run_rules(paths, checks=(_variant_lint,))


def _variant_lint(doc: Document) -> list[Finding]:
    from ftmanifest.lint import is_variant

    if not is_variant(doc):  # the ledger stays unimported for a manifest without a parent
        return []
    from ftmanifest.ledger.parents import variant_lint

    return variant_lint(doc)


def __getattr__(name: str) -> object:
    # Lazy: ``import ftmanifest`` stays free of torch and numpy; the training
    # entry points import transformers when first named.
    module = PUBLIC.get(name)
    if module is None or module == __name__:
        raise AttributeError(f"module 'ftmanifest' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
