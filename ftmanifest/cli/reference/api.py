"""The public API page: every name ``ftmanifest.__all__`` exports, from its source.

Layer: commands - edge (reads the package's source; renders Markdown).

Read with ``ast``, never imported, so the page is generated without torch or
transformers (the training entry points import them when first used): a name
re-exported by a package ``__init__`` is followed to the module defining it.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
from pathlib import Path

from ftmanifest.cli.reference.markdown import GENERATED

INTRO = """\
# Python API

Everything here is importable from the package root (`from ftmanifest import
verify_manifest`) and listed in `ftmanifest.__all__`. `import ftmanifest` itself
is cheap: each name's module is imported when the name is first used, so the
training entry points import transformers (and torch) only then. Anything not
listed is internal and may move.
"""


def _source(module: str) -> tuple[Path, ast.Module]:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise LookupError(f"no source for {module}")
    path = Path(spec.origin)
    return path, ast.parse(path.read_text("utf-8"))


def definition(module: str, name: str) -> tuple[str, ast.FunctionDef | ast.ClassDef]:
    """The module that defines ``name`` (following re-exports) and its node."""
    _path, tree = _source(module)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return module, node
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if any((a.asname or a.name) == name for a in node.names):
                return definition(node.module, name)
    raise LookupError(f"{module} does not define {name}")


def _signature(node: ast.FunctionDef | ast.ClassDef) -> str:
    if isinstance(node, ast.ClassDef):
        bases = ", ".join(ast.unparse(b) for b in node.bases)
        return f"class {node.name}({bases})" if bases else f"class {node.name}"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return f"{node.name}({ast.unparse(node.args)}){returns}"


def api_page(public: dict[str, str]) -> str:
    lines = [GENERATED, "", INTRO]
    for name, module in public.items():
        where, node = definition(module if module != "ftmanifest" else "ftmanifest", name)
        doc = inspect.cleandoc(ast.get_docstring(node, clean=False) or "")
        lines += [f"## `{name}`", "", f"Defined in `{where}`.", "", "```python",
                  _signature(node), "```", "", doc, ""]  # fmt: skip
    return "\n".join(lines)
