"""No room reaches into another room's private names (STYLE.md: a leading underscore
is a promise to the module's own room, and a reader changing it checks only there).

A private name is one with a single leading underscore: ``from ftmanifest.data.text
import _x``, or any name from a private module (``ftmanifest.recordio._lines``).
Rooms are the ones the layering test names (``import_graph_test._room``).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ftmanifest"


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def crossings(source: str, module: str) -> list[str]:
    """``module``'s imports (its source ``source``) of another room's private names."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        if not node.module.startswith("ftmanifest.") or _room(node.module) == _room(module):
            continue
        private_module = any(_private(p) for p in node.module.split("."))
        for alias in node.names:
            if private_module or _private(alias.name):
                found.append(f"{module}:{node.lineno}: {node.module}.{alias.name}")
    return found


def _modules() -> dict[str, Path]:
    root = PACKAGE.parent
    return {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for p in PACKAGE.rglob("*.py")
    }


def test_no_room_imports_another_rooms_private_names() -> None:
    found = [
        line
        for module, path in sorted(_modules().items())
        for line in crossings(path.read_text("utf-8"), module)
    ]
    assert not found, "private names used across rooms:\n" + "\n".join(found)


def test_the_check_sees_a_private_name_and_a_private_module() -> None:
    source = (
        "from ftmanifest.data.text import _leaves, normalise\n"
        "from ftmanifest.recordio._lines import physical_lines\n"
        "from ftmanifest.integrations.options import _same\n"  # own room: allowed
        "from ftmanifest.data.text import __all__\n"  # a dunder is not private
    )
    assert crossings(source, "ftmanifest.integrations.batch_rows") == [
        "ftmanifest.integrations.batch_rows:1: ftmanifest.data.text._leaves",
        "ftmanifest.integrations.batch_rows:2: ftmanifest.recordio._lines.physical_lines",
    ]
