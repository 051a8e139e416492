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
import json
from pathlib import Path

from ftmanifest.cli.reference.markdown import GENERATED
from ftmanifest.manifest.renamed import REMOVED_IN

INTRO = f"""\
# Python API

Everything here is importable from the package root (`from ftmanifest import
verify_manifest`) and listed in `ftmanifest.__all__`. `import ftmanifest` itself
is cheap: each name's module is imported when the name is first used, so the
training entry points import transformers (and torch) only then. Anything not
listed is internal and may move.

Every function's result type and every error it raises is listed here too.
Errors form one hierarchy under `FtManifestError`: catch a base class
(`InputError`, `RefusedError`...) and match its `reason`, a stable code
([reason codes](reasons.md), [exit codes](exit-codes.md)).

One concept has one keyword everywhere: `manifest` (the manifest file),
`trust_path` (the trust file), `key_path` (a key file), `base_dir` (a base
model's folder), `model_class`. The keywords they replaced (`manifest_path`,
`path`, `model_cls`, `load_bound`'s `base`) still work until {REMOVED_IN}, with a
`DeprecationWarning` that names the new one.
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


def _signature(node: ast.FunctionDef | ast.ClassDef, source: list[str]) -> str:
    if isinstance(node, ast.FunctionDef):
        returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
        return f"{node.name}({ast.unparse(node.args)}){returns}"
    bases = ", ".join(ast.unparse(b) for b in node.bases)
    head = f"class {node.name}({bases})" if bases else f"class {node.name}"
    body = [f"    {line}" for line in _members(node, source)]
    return "\n".join([head + (":" if body else ""), *body])


def _members(node: ast.ClassDef, source: list[str]) -> list[str]:
    """A class's fields (``name: type  # what``), its reason code and its properties."""
    out = []
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            name, kind = item.target.id, ast.unparse(item.annotation)
            if name.startswith("_") or (name != "reason" and kind.startswith("ClassVar")):
                continue
            if name == "reason" and item.value is not None:
                out.append(f"reason = {_literal(item.value)}")
                continue
            out.append(f"{name}: {kind}" + _about(item, source))
        elif isinstance(item, ast.Assign) and [ast.unparse(t) for t in item.targets] == ["reason"]:
            out.append(f"reason = {_literal(item.value)}")
        elif isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
            if any(ast.unparse(d) == "property" for d in item.decorator_list):
                kind = ast.unparse(item.returns) if item.returns is not None else "object"
                out.append(f"{item.name}: {kind}  # property")
    return out


def _literal(value: ast.expr) -> str:
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return json.dumps(value.value)
    return ast.unparse(value)


def _about(item: ast.AnnAssign, source: list[str]) -> str:
    """The field's description: pydantic's ``Field(description=...)``, else its line's comment."""
    value = item.value
    if isinstance(value, ast.Call) and ast.unparse(value.func) == "Field":
        for kw in value.keywords:
            text = kw.value.value if isinstance(kw.value, ast.Constant) else None
            if kw.arg == "description" and isinstance(text, str):
                return f"  # {text}"
        return ""
    rest = source[(item.end_lineno or item.lineno) - 1][item.end_col_offset or 0 :].strip()
    return f"  {rest}" if rest.startswith("#") else ""


def _fielded(module: str, node: ast.ClassDef) -> ast.ClassDef:
    """``node``, or the class it only renames (``Finding``'s typed ``_FindingBase``)."""
    if any(isinstance(i, ast.AnnAssign) for i in node.body):
        return node
    _path, tree = _source(module)
    names = {ast.unparse(b) for b in node.bases}
    for other in ast.walk(tree):
        if isinstance(other, ast.ClassDef) and other.name in names and other.name.startswith("_"):
            if any(isinstance(i, ast.AnnAssign) for i in other.body):
                merged = ast.ClassDef(node.name, node.bases, node.keywords, other.body, [])
                return merged
    return node


def api_page(public: dict[str, str]) -> str:
    lines = [GENERATED, "", INTRO]
    for name, module in public.items():
        where, node = definition(module, name)
        source = _source(where)[0].read_text("utf-8").splitlines()
        shown = _fielded(where, node) if isinstance(node, ast.ClassDef) else node
        doc = inspect.cleandoc(ast.get_docstring(node, clean=False) or "")
        lines += [f"## `{name}`", "", f"Defined in `{where}`.", "", "```python",
                  _signature(shown, source), "```", "", doc, ""]  # fmt: skip
    return "\n".join(lines)
