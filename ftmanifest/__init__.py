"""ftmanifest: signed, declarative manifests for fine-tuning experiments.

The package is layered (see DESIGN.md): hashing -> manifest -> signing ->
drift/verify -> cli.  Importing the package itself is cheap: torch,
transformers and peft are only imported inside the modules that need them.
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
