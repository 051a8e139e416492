"""One error root for the whole tool, with an exit code per kind.

Layer: pure core (shared by every layer).  The library raises these; only the edge turns
them into text (``ftmanifest.output.error_text``) and exit codes
(``ftmanifest.cli``).  Every error carries structured fields so a refusal can
name the file, the field, what was expected, what was observed and how to fix
it; an error about many rows (an invalid manifest, drift) carries them as
``findings``.

Exit codes (documented in the README):
  0 ok, 1 a check refused, 2 unusable input or usage, 3 internal error (a
  bug: nothing raises the root class itself), 4 the machine could not finish
  (a worker killed, out of memory), 130 interrupted; ``ftmanifest run`` also,
  as a shell does, 126 the command cannot be executed, 127 it was not found.
"""

from __future__ import annotations

from ftmanifest.location import format_loc

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import ClassVar

    from ftmanifest.findings import Finding
    from ftmanifest.location import Loc

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_INPUT = 2
EXIT_BUG = 3
EXIT_RESOURCE = 4
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127
EXIT_INTERRUPTED = 130


class FtManifestError(Exception):
    """Root of every error ftmanifest raises on purpose."""

    exit_code = EXIT_BUG
    reason: ClassVar[str] = "internal-error"  # a stable code scripts can match (``unknown-key``)

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
        findings: Sequence[Finding] = (),
        loc: Loc | None = None,
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
        self.findings: tuple[Finding, ...] = tuple(findings)
        # ``loc``: the manifest location as a tuple; ``field`` is its text
        self.loc = loc
        if loc is not None and field is None:
            self.field = format_loc(loc)

    def location(self) -> str:
        """``file:line:col`` as far as it is known, or an empty string."""
        parts = [p for p in (self.path,) if p]
        if self.path and self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
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
        out["reason"] = self.reason
        if self.findings:  # the rows a refusal carries, as a report's findings
            out["findings"] = [f.to_dict() for f in self.findings]
        return out


class UsageError(FtManifestError, ValueError):
    """The command line itself is wrong."""

    exit_code = EXIT_INPUT
    reason = "usage"


class InputError(FtManifestError, ValueError):
    """An input file is unusable: unreadable, malformed or invalid."""

    exit_code = EXIT_INPUT
    reason = "unusable-input"


class InputNotFoundError(InputError, FileNotFoundError):
    """An input file does not exist."""

    reason = "input-not-found"


class ManifestError(InputError):
    """A manifest cannot be parsed or does not match the schema."""

    reason = "manifest-unusable"


class UnsupportedVersionError(ManifestError):
    """The manifest declares a format version newer than this tool knows."""

    reason = "manifest-format-too-new"


class RefusedError(FtManifestError):
    """A check ran and refused (drift, lint problems, findings)."""

    exit_code = EXIT_REFUSED
    reason = "refused"


class ResourceError(FtManifestError):
    """The machine could not finish the work (a worker killed, memory exhausted):
    neither a finding nor a bug; the hint says how to ask for less."""

    exit_code = EXIT_RESOURCE
    reason = "resource-exhausted"


class WorkerDiedError(ResourceError):
    """A worker process or a rank ended abruptly (killed, often by the kernel's
    out-of-memory killer) before finishing its share of the work."""

    reason = "worker-died"


class CommandNotRunnableError(FtManifestError, OSError):
    """The command given to ``ftmanifest run`` exists but cannot be executed
    (no permission, a directory, a bad ``#!`` line): 126, as a shell."""

    exit_code = EXIT_CANNOT_EXECUTE
    reason = "command-not-executable"

    def __init__(self, command: str, why: str, *, errno: int | None = None) -> None:
        super().__init__(f"cannot run {command!r}: {why}")
        self.command = command
        self.why = why
        self.errno = errno


class CommandNotFoundError(CommandNotRunnableError, FileNotFoundError):
    """The command given to ``ftmanifest run`` does not exist: 127, as a shell."""

    exit_code = EXIT_NOT_FOUND
    reason = "command-not-found"


class ManifestInvalidError(ManifestError):
    """A manifest parsed but does not match the schema; carries every problem.

    ``problems`` (also ``findings``) are ``ftmanifest.findings.Finding``
    records, one per place, so the CLI can print all of them at once.
    """

    reason = "manifest-invalid"

    def __init__(
        self, message: str, *, problems: Sequence[Finding], path: str | None = None
    ) -> None:
        super().__init__(message, path=path, findings=problems)

    @property
    def problems(self) -> list[Finding]:
        return list(self.findings)

    def to_dict(self) -> dict[str, object]:
        out = super().to_dict()
        out["problems"] = [p.to_dict() for p in self.problems]
        return out


class NotRegularFileError(InputError):
    """A file read as untrusted input (an envelope, a trust or key file, a
    binding, a backup's metadata) that is a FIFO, a device or a folder."""

    reason = "not-regular-file"


class FileTooLargeError(InputError):
    """A file read as untrusted input that is over its cap (an envelope or trust
    file over 1 MiB, a key file over 64 KiB)."""

    reason = "file-too-large"


class UnsupportedDependencyError(FtManifestError):
    """An installed package is of a version whose data layout or behaviour
    ftmanifest does not know: the user's to fix by installing the pinned version."""

    exit_code = EXIT_INPUT
    reason = "unsupported-dependency"


class MissingExtraError(FtManifestError, ImportError):
    """A feature needs an optional package that is not installed: the user's to
    install (exit 2), never a bug.  ``install`` is the exact command to run."""

    exit_code = EXIT_INPUT
    reason = "missing-extra"

    def __init__(self, module: str, install: str, *, feature: str | None = None) -> None:
        needs = f"{feature} needs" if feature else "this needs"
        super().__init__(
            f"{needs} the optional package {module!r}, which is not installed",
            field="import",
            expected=f"{module} importable",
            observed=f"no module named {module!r}",
            hint=install,
        )
        self.module = module
        self.install = install
