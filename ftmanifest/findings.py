"""The one record shape for everything a check reports.

Layer: pure core.  Lint problems, drift rows, scan hits and audit results are
all ``Finding`` records, so one output module can render any of them as a
table, JSON or SARIF.
"""

from __future__ import annotations

from collections import namedtuple
from types import MappingProxyType

from ftmanifest.location import format_loc

# No runtime `typing` on the lint path: the pre-commit hook has 100 ms in all
# and `typing` alone costs ~5 ms.  Type checkers see the NamedTuple below.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any, Literal, NamedTuple

    from ftmanifest.location import Loc

    Severity = Literal["error", "warning", "info"]

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}

_NO_EXTRA: Mapping[str, Any] = MappingProxyType({})

_FIELDS = ("kind", "rule", "message", "path", "line", "column", "field", "expected",
           "observed", "severity", "hint", "fingerprint", "excerpt", "extra", "loc")  # fmt: skip
_DEFAULTS = (None, None, None, None, None, None, "error", None, None, None, _NO_EXTRA, None)

if TYPE_CHECKING:

    class _FindingBase(NamedTuple):
        kind: str
        rule: str
        message: str
        path: str | None = None
        line: int | None = None
        column: int | None = None
        field: str | None = None
        expected: str | None = None
        observed: str | None = None
        severity: Severity = "error"
        hint: str | None = None
        fingerprint: str | None = None
        excerpt: str | None = None
        extra: Mapping[str, Any] = _NO_EXTRA
        loc: Loc | None = None
else:
    _FindingBase = namedtuple("Finding", _FIELDS, defaults=_DEFAULTS)


class Finding(_FindingBase):
    """One thing a check found (immutable; ``f._replace(...)`` makes a changed copy).

    A named tuple rather than a dataclass: ``dataclasses`` imports ``inspect``,
    which alone costs ~20 ms of the pre-commit hook's 100 ms budget.

    ``kind`` says which family of check produced it (``lint``, ``drift``,
    ``secret``, ``pii``, ``unsafe-pickle``, ``malformed``, ``not-scanned``...);
    ``rule`` is a stable identifier within that family (``FTM001``).

    ``loc`` is the manifest location the finding is about, as a tuple
    (``("data", 0, "digest")``); ``field`` is its text (``data[0].digest``).
    Build both at once with ``Finding.at(loc, ...)``; code that matches or
    edits a location uses ``loc``, never the text.
    """

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as plain values: ``extra`` is often a read-only mapping proxy, which
        pickle refuses, and findings cross process boundaries (scan's workers)."""
        extra = self.extra
        proxied = isinstance(extra, MappingProxyType)
        return (_unpickle, (tuple(self[:13]), dict(extra) if proxied else extra, proxied, self.loc))

    @classmethod
    def at(cls, loc: Loc, **fields: Any) -> Finding:
        """A finding about manifest location ``loc`` (``field`` is its text)."""
        return cls(field=format_loc(loc), loc=loc, **fields)

    def location(self) -> str:
        parts: list[str] = [self.path or "-"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "field": self.field,
            "expected": self.expected,
            "observed": self.observed,
            "hint": self.hint,
        }
        if self.fingerprint is not None:
            out["fingerprint"] = self.fingerprint
        if self.excerpt is not None:
            out["excerpt"] = self.excerpt
        if self.extra:
            out["extra"] = dict(self.extra)
        return out


def _unpickle(head: tuple[Any, ...], extra: Any, proxied: bool, loc: Any) -> Finding:
    if proxied:
        extra = MappingProxyType(extra) if extra else _NO_EXTRA
    return Finding(*head, extra, loc)  # type: ignore[call-arg]


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Stable order: by file, then position, then rule."""
    return sorted(
        findings,
        key=lambda f: (
            f.path or "",
            f.line if f.line is not None else 0,
            f.column if f.column is not None else 0,
            f.rule,
        ),
    )
