"""jsonschema, imported without the IRI grammar it would build at import.

Layer: pure core.  jsonschema registers a format checker for each optional package it
finds; with ``rfc3987-syntax`` installed (CycloneDX's ``json-validation`` extra brings
it), importing jsonschema builds that package's grammar: about 3 s of CPU in every
process that checks a results file.  ftmanifest's schemas are checked without formats,
so when jsonschema is not loaded yet it is imported with that one package hidden, and
the package is importable again afterwards; a process that loaded jsonschema first
keeps its own.
"""

from __future__ import annotations

import sys
from types import ModuleType

SLOW_FORMAT_PACKAGE = "rfc3987_syntax"


def jsonschema() -> ModuleType:
    """The ``jsonschema`` module, loaded without ``rfc3987_syntax``'s grammar."""
    loaded = sys.modules.get("jsonschema")
    if loaded is not None:
        return loaded
    hide = SLOW_FORMAT_PACKAGE not in sys.modules
    if hide:
        sys.modules[SLOW_FORMAT_PACKAGE] = None  # type: ignore[assignment]  # import raises ImportError
    try:
        import jsonschema as imported  # untyped: no stubs installed
    finally:
        if hide and sys.modules.get(SLOW_FORMAT_PACKAGE, 0) is None:
            del sys.modules[SLOW_FORMAT_PACKAGE]
    module: ModuleType = imported
    return module
