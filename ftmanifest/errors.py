"""One error root for the whole tool, with an exit code per kind.

Layer: shared by every layer.  The library raises these; only the CLI turns
them into text and exit codes (see ``ftmanifest.cli``).  Every error carries
structured fields so a refusal can name the file, the field, what was
expected, what was observed and how to fix it.

Exit codes (documented in the README):
  0 ok, 1 a check refused, 2 unusable input or usage, 3 internal error,
  130 interrupted; ``ftmanifest run`` also, as a shell does, 126 the command
  cannot be executed, 127 it was not found.
"""

from __future__ import annotations

from ftmanifest.safe_text import escape

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ftmanifest.findings import Finding

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_INPUT = 2
EXIT_BUG = 3
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127
EXIT_INTERRUPTED = 130


class FtManifestError(Exception):
    """Root of every error ftmanifest raises on purpose."""

    exit_code = EXIT_BUG

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        column: int | None = None,
        field: str | None = None,
        expected: str | None = None,
        observed: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line
        self.column = column
        self.field = field
        self.expected = expected
        self.observed = observed
        self.hint = hint

    def location(self) -> str:
        """``file:line:col`` as far as it is known, or an empty string."""
        parts = [p for p in (self.path,) if p]
        if self.path and self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def render(self) -> str:
        """Human text: location, message, field, expected/observed and fix; every
        field escaped (``safe_text``), so only the newlines put here break lines."""
        head = escape(self.location())
        text = f"{head}: {escape(self.message)}" if head else escape(self.message)
        details = []
        if self.field:
            details.append(f"field: {escape(self.field)}")
        if self.expected is not None:
            details.append(f"expected: {escape(self.expected)}")
        if self.observed is not None:
            details.append(f"observed: {escape(self.observed)}")
        if self.hint:
            details.append(f"fix: {escape(self.hint)}")
        if details:
            text += "\n  " + "\n  ".join(details)
        return text

    def to_dict(self) -> dict[str, object]:
        return {
            "error": type(self).__name__,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "field": self.field,
            "expected": self.expected,
            "observed": self.observed,
            "hint": self.hint,
            "exit_code": self.exit_code,
        }


class UsageError(FtManifestError, ValueError):
    """The command line itself is wrong."""

    exit_code = EXIT_INPUT


class InputError(FtManifestError, ValueError):
    """An input file is unusable: unreadable, malformed or invalid."""

    exit_code = EXIT_INPUT


class InputNotFoundError(InputError, FileNotFoundError):
    """An input file does not exist."""


class ManifestError(InputError):
    """A manifest cannot be parsed or does not match the schema."""


class UnsupportedVersionError(ManifestError):
    """The manifest declares a format version newer than this tool knows."""


class RefusedError(FtManifestError):
    """A check ran and refused (drift, lint problems, findings)."""

    exit_code = EXIT_REFUSED


class CommandNotRunnableError(FtManifestError, OSError):
    """The command given to ``ftmanifest run`` exists but cannot be executed
    (no permission, a directory, a bad ``#!`` line): 126, as a shell."""

    exit_code = EXIT_CANNOT_EXECUTE

    def __init__(self, command: str, reason: str, *, errno: int | None = None) -> None:
        super().__init__(f"cannot run {command!r}: {reason}")
        self.command = command
        self.reason = reason
        self.errno = errno


class CommandNotFoundError(CommandNotRunnableError, FileNotFoundError):
    """The command given to ``ftmanifest run`` does not exist: 127, as a shell."""

    exit_code = EXIT_NOT_FOUND


class ManifestInvalidError(ManifestError):
    """A manifest parsed but does not match the schema; carries every problem.

    ``problems`` is a list of ``ftmanifest.findings.Finding`` records, one per
    place, so the CLI can print all of them at once.
    """

    def __init__(self, message: str, *, problems: list[Finding], path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.problems = problems

    def render(self) -> str:
        from ftmanifest.output import line_text

        return "\n".join(line_text(p) for p in self.problems) or super().render()

    def to_dict(self) -> dict[str, object]:
        out = super().to_dict()
        out["problems"] = [p.to_dict() for p in self.problems]
        return out
