"""What ``init --from`` gathered: derived values with their source, FILLs, data, notes.

Layer: edges - authoring (pure: no I/O).  Every source reader writes into one
``Draft``: a value at a manifest location with the file and key it came from
(``put``), a decision left to a person (``fill``), a data file and its role
(``add_data``), or a note (a key the reader does not know, one it knows but
the manifest has no field for, two sources that disagree).  The first source
to state a value keeps it; a later one that disagrees is a note, never a
silent overwrite.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ftmanifest.location import Loc, format_loc


@dataclass(frozen=True)
class Derived:
    """A manifest value and where it came from: ``source`` (a file or ``repo@rev``)
    and ``key`` (the key in it, or what was read, e.g. ``content``).  A default
    names the tool as ``source`` and its file and key as ``key``."""

    loc: Loc
    value: Any
    source: str
    key: str
    default: bool = False

    @property
    def comment(self) -> str:
        if self.default:
            return f"default of {self.source} {self.key}"
        return f"from {self.source}: {self.key}"


@dataclass(frozen=True)
class DataFile:
    """A data file or folder named by a source, with its role and format when known;
    ``path`` is None for a hub dataset (``hub``) that has no local copy yet."""

    path: Path | None
    role: str | None
    role_from: str | None  # "file name" or "<source>: <key>"
    source: str
    key: str
    hub: str | None = None


@dataclass
class Draft:
    """Everything the sources said, in the order they said it."""

    values: dict[Loc, Derived] = field(default_factory=dict)
    fills: dict[Loc, str] = field(default_factory=dict)
    data: list[DataFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def put(self, loc: Loc, value: Any, source: str, key: str) -> None:
        """Record ``value`` for ``loc`` (None is no statement); it replaces a default."""
        if value is None:
            return
        old = self.values.get(loc)
        if old is None or (old.default and old.value != value):
            self.values[loc] = Derived(loc, value, source, key)
            self.fills.pop(loc, None)
        elif old.value != value:
            self.notes.append(
                f"{source}: {key} = {value!r} disagrees with {old.source}: {old.key} = "
                f"{old.value!r}; {format_loc(loc)} keeps {old.value!r} (the first source named)"
            )

    def put_default(self, loc: Loc, value: Any, tool: str, where: str) -> None:
        """Record the tool's documented default for ``loc`` where nothing is stated."""
        if value is not None and loc not in self.values:
            self.values[loc] = Derived(loc, value, tool, where, default=True)
            self.fills.pop(loc, None)

    def get(self, loc: Loc) -> Any:
        found = self.values.get(loc)
        return None if found is None else found.value

    def fill(self, loc: Loc, decide: str) -> None:
        """Leave ``loc`` to a person, with one line saying what to decide."""
        if loc not in self.values:
            self.fills.setdefault(loc, decide)

    def add_data(
        self, path: Path, role: str | None, role_from: str | None, source: str, key: str
    ) -> None:
        resolved = path.resolve()
        for i, known in enumerate(self.data):
            if known.path is not None and known.path.resolve() == resolved:
                if known.role is None and role is not None:
                    self.data[i] = DataFile(known.path, role, role_from, known.source, known.key)
                return
        self.data.append(DataFile(path, role, role_from, source, key))

    def add_hub_data(self, name: str, role: str | None, source: str, key: str) -> None:
        """A hub dataset a config names: an entry whose local copy is left to FILL."""
        if not any(known.hub == name and known.role == role for known in self.data):
            self.data.append(
                DataFile(None, role, f"{source}: {key.split('[')[0]}", source, key, hub=name)
            )

    def unknown_keys(self, source: str, kind: str, keys: list[str]) -> None:
        """A note per key the reader does not know: never dropped silently."""
        for key in keys:
            self.notes.append(
                f"{source}: unknown {kind} key {key!r}: not carried into the manifest "
                f"(a typo, or a newer {kind} option: put its effect in the manifest by hand)"
            )

    def not_carried(self, source: str, keys: list[str]) -> None:
        """One note for documented keys that change the run but have no manifest field."""
        if keys:
            self.notes.append(
                f"{source}: documented keys with no manifest field, not carried: "
                f"{', '.join(keys)} (record what they change in the hypothesis or the "
                "training script, which environment.code pins)"
            )


def is_set(value: Any) -> bool:
    """A value a config states rather than leaves empty."""
    return value is not None and value is not False and value not in ("", [], {})
