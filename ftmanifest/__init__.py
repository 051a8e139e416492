"""ftmanifest: signed, declarative manifests for fine-tuning experiments.

The package is layered (see DESIGN.md): hashing -> manifest -> signing ->
drift/verify -> cli.  Importing the package itself is cheap: torch,
transformers and peft are only imported inside the modules that need them.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "seed_everything"]


def __getattr__(name: str) -> object:
    # Lazy: ``import ftmanifest`` stays free of torch and numpy.
    if name == "seed_everything":
        from ftmanifest.seeding import seed_everything

        return seed_everything
    raise AttributeError(f"module 'ftmanifest' has no attribute {name!r}")
