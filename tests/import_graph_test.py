"""The package's import graph has no cycle: layers point one way (STYLE.md, habit 1).

Imports under ``if TYPE_CHECKING:`` do not count (they never run); imports inside
functions do, since they run too.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ftmanifest"


def _graph() -> dict[str, set[str]]:
    root = PACKAGE.parent
    mods = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for p in PACKAGE.rglob("*.py")
    }
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        tree = ast.parse(path.read_text("utf-8"))
        typing_only = {
            id(sub)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for sub in ast.walk(node)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            graph[name] |= {
                t for t in targets if t in mods and t != name and not name.startswith(t + ".")
            }
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_import_graph_has_no_cycle() -> None:
    graph = _graph()
    assert len(graph) > 50
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


# --- rooms: the package level -------------------------------------------
#
# A room is a sub-package or a top-level module (``ftmanifest.ledger``,
# ``ftmanifest.lint``).  Rooms are totally ordered, low to high, in layers; a room
# imports only rooms before it (top-level and function-level imports both count),
# so no cycle can hide in a function body.  The package root is the public facade
# and may import anything lazily.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pure core", ("location", "errors", "extras", "findings", "safe_text", "output", "checks",
                   "manifest", "lint", "lint_report", "jsonschema_lib")),
    ("file access", ("fsutil", "counts", "sqlite_store", "statcache", "foldercache",
                     "held", "progress", "hashing", "treelist", "untrusted", "hfcache",
                     "snapshot", "recordio", "wire")),
    ("probes and runtime", ("probe", "seeding", "supervise", "collector")),
    ("signing", ("signing",)),
    ("judging rooms", ("scan", "ledger", "adapter", "verify", "preflight", "data", "results",
                       "backup")),
    ("edges", ("distributed", "integrations", "authoring")),
    ("commands", ("examples", "cli", "__main__")),
)  # fmt: skip
# Edges allowed to point up while they are moved down (none left): the test
# fails when one is fixed and left here, as when a new one appears.
NOT_YET: set[tuple[str, str]] = set()


def _room(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def _room_edges() -> dict[tuple[str, str], list[str]]:
    edges: dict[tuple[str, str], list[str]] = {}
    for source, targets in _graph().items():
        for target in targets:
            a, b = _room(source), _room(target)
            if "." in source and "." in target and a != b:
                edges.setdefault((a, b), []).append(f"{source} -> {target}")
    return edges


def test_rooms_import_one_way() -> None:
    rank = {room: n for n, room in enumerate(r for _, rooms in LAYERS for r in rooms)}
    edges = _room_edges()
    rooms = {r for edge in edges for r in edge}
    assert rooms <= set(rank), f"rooms without a layer: {sorted(rooms - set(rank))}"
    up = {edge for edge in edges if rank[edge[1]] > rank[edge[0]]}
    new = sorted(up - NOT_YET)
    assert not new, "imports that point up a layer:\n" + "\n".join(
        line for edge in new for line in edges[edge]
    )
    assert not NOT_YET - up, f"fixed, remove from NOT_YET: {sorted(NOT_YET - up)}"


def test_every_room_has_a_layer() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    present = modules | packages
    present.discard("templates")  # package data (the init template), no code
    named = {r for _, rooms in LAYERS for r in rooms}
    assert present == named, (sorted(present - named), sorted(named - present))


def test_the_package_docstring_lists_the_layers_in_order() -> None:
    doc = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text("utf-8"))) or ""
    at = [doc.find(f"{n}. {layer} - ") for n, (layer, _rooms) in enumerate(LAYERS, start=1)]
    assert -1 not in at and at == sorted(at), at


def _layer_problem(doc: str, layer: str) -> str | None:
    """Why a module docstring's ``Layer:`` line does not name ``layer`` first, or None."""
    line = next((ln for ln in doc.splitlines() if ln.startswith("Layer:")), "")
    if not line:
        return "(no Layer: line)"
    return None if line.startswith(f"Layer: {layer}") else line


def test_every_module_states_its_rooms_layer() -> None:
    layer_of = {room: layer for layer, rooms in LAYERS for room in rooms}
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        room = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        if room in ("__init__", "templates"):  # the facade; package data
            continue
        doc = ast.get_docstring(ast.parse(path.read_text("utf-8"))) or ""
        if problem := _layer_problem(doc, layer_of[room]):
            wrong.append(f"{path.relative_to(PACKAGE.parent)} ({layer_of[room]}): {problem}")
    assert not wrong, "each Layer: line starts with its room's layer:\n" + "\n".join(wrong)


def test_the_layer_check_refuses_another_layer_or_none() -> None:
    assert _layer_problem("X.\n\nLayer: judging rooms - edge (reads).", "judging rooms") is None
    assert _layer_problem("X.\n\nLayer: edge (reads).", "judging rooms") == "Layer: edge (reads)."
    assert _layer_problem("X.\n\nLayer: pure core.", "judging rooms") == "Layer: pure core."
    assert _layer_problem("X, with no layer.", "judging rooms") == "(no Layer: line)"


def _listed_rooms(doc: str) -> dict[str, set[str]]:
    """The rooms each numbered ``N. layer - room, room: why`` item of ``doc`` names."""
    listed: dict[str, set[str]] = {}
    for n, (layer, _rooms) in enumerate(LAYERS, start=1):
        at = doc.find(f"{n}. {layer} - ")
        if at != -1:
            names = doc[at + len(f"{n}. {layer} - ") :].split(":", 1)[0]
            listed[layer] = {name.strip() for name in names.split(",")}
    return listed


def test_the_package_docstring_lists_every_room_in_its_layer() -> None:
    doc = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text("utf-8"))) or ""
    assert _listed_rooms(doc) == {layer: set(rooms) for layer, rooms in LAYERS}


def test_the_room_listing_check_sees_a_missing_room() -> None:
    doc = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text("utf-8"))) or ""
    dropped = doc.replace("foldercache, ", "")
    assert dropped != doc
    assert _listed_rooms(dropped)["file access"] == set(LAYERS[1][1]) - {"foldercache"}
