"""ftmanifest: signed, declarative manifests for fine-tuning experiments.

The package is built in layers, low to high; a room (a sub-package or a
top-level module) imports only rooms below it, or before it in its layer
(``tests/import_graph_test.py`` holds the order and checks every import,
function-level ones too):

1. pure core - errors, location, findings, safe_text, output, checks, manifest,
   lint, lint_report: plain data in, findings out, no I/O beyond reading a file;
2. file access - fsutil, records, sqlite_store, statcache, progress, hashing,
   hfcache, snapshot, recordio, wire: reading, hashing, atomic writes, caches;
3. probes and runtime - probe, seeding, supervise: what this machine is;
4. signing - keys, trust, envelopes;
5. judging rooms - scan, ledger, adapter, verify, preflight, data, results,
   backup: each decides one kind of question;
6. edges - distributed, integrations: other processes and other frameworks;
7. commands - examples, cli: parse, call one function, render.

This module is the public facade and may import any room, lazily: importing
the package itself is cheap (torch, transformers and peft are only imported
inside the modules that need them).
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "lint_paths", "seed_everything"]


TYPE_CHECKING = False  # no runtime typing: `import ftmanifest` stays cheap
if TYPE_CHECKING:
    from ftmanifest.findings import Finding
    from ftmanifest.manifest.load import Document


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
    # Lazy: ``import ftmanifest`` stays free of torch and numpy.
    if name == "seed_everything":
        from ftmanifest.seeding import seed_everything

        return seed_everything
    raise AttributeError(f"module 'ftmanifest' has no attribute {name!r}")
