"""age in a child process, between two pipes.

Layer: edge (a subprocess).  pyrage 1.4 holds the GIL for the whole of an
encryption or decryption, so a tar stream produced (or parsed) by threads of
the same process would wait for it; in a child process age runs on its own
core while this process reads files, hashes and writes.  The child runs
pyrage's ``encrypt_file``/``decrypt_file`` from its stdin to its stdout, two
pipes (no Python per chunk); the parent hashes and writes the output.
Recipients are public and go on its command line; identities are secret and
go through a pipe, never the command line or the environment.  The child's
last stderr line is JSON: ``{"result": ...}``, or ``{"error": ClassName,
"message": text}`` with exit status 1.

    python -I -m ftmanifest.backup.agechild encrypt RECIPIENT...
    python -I -m ftmanifest.backup.agechild decrypt FD    (identities as JSON on FD)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import IO, Any

STDERR_MAX = 64 * 1024


class AgeChildError(Exception):
    """What the child reported: pyrage's error class name and message."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class AgeChild:
    """One running child; ``stdout`` is the output pipe to read."""

    def __init__(
        self,
        mode: str,
        args: Sequence[str],
        stdin: int,
        secret: bytes | None = None,
        stdout: int | None = None,
    ):
        read_fd = write_fd = -1
        pass_fds: tuple[int, ...] = ()
        if secret is not None:
            read_fd, write_fd = os.pipe()
            pass_fds = (read_fd,)
            args = [str(read_fd)]
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-m", "ftmanifest.backup.agechild", mode, *args],
            stdin=stdin,
            stdout=subprocess.PIPE if stdout is None else stdout,
            stderr=subprocess.PIPE,
            pass_fds=pass_fds,
            bufsize=1 << 16,
        )
        if secret is not None:
            os.close(read_fd)
            with os.fdopen(write_fd, "wb") as fh:  # the child reads it first; a few KiB
                fh.write(secret)
        self.stdout: IO[bytes] | None = self.proc.stdout

    def wait(self) -> dict[str, Any]:
        """Wait for the child; its result, or ``AgeChildError`` if it failed."""
        self.close_output()
        assert self.proc.stderr is not None
        err = self.proc.stderr.read(STDERR_MAX)
        code = self.proc.wait()
        self.proc.stderr.close()
        if code == 0:
            lines = err.decode("utf-8", "replace").strip().splitlines()
            result = json.loads(lines[-1]).get("result", {}) if lines else {}
            return result if isinstance(result, dict) else {}
        try:
            doc = json.loads(err.decode("utf-8", "replace").strip().splitlines()[-1])
            raise AgeChildError(str(doc["error"]), str(doc["message"]))
        except (ValueError, KeyError, IndexError, TypeError):
            raise AgeChildError("exit", f"age child exited with status {code}") from None

    def close_output(self) -> None:
        try:
            if self.stdout is not None:
                self.stdout.close()
        except OSError:
            pass

    def stop(self) -> None:
        """End the child after a failure on our side."""
        self.close_output()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def identities_secret(identities: Sequence[Any]) -> bytes:
    return json.dumps([{"kind": i.kind, "secret": i.secret} for i in identities]).encode()


def _identities(fd: int) -> list[Any]:
    import pyrage

    with os.fdopen(fd, "rb") as fh:
        items = json.loads(fh.read())
    out: list[Any] = []
    for item in items:
        if item["kind"] == "x25519":
            out.append(pyrage.x25519.Identity.from_str(item["secret"]))
        else:
            out.append(pyrage.ssh.Identity.from_buffer(item["secret"].encode("ascii")))
    return out


def _recipients(texts: Sequence[str]) -> list[Any]:
    import pyrage

    return [
        pyrage.x25519.Recipient.from_str(t) if t.startswith("age1")
        else pyrage.ssh.Recipient.from_str(t)
        for t in texts
    ]  # fmt: skip


def main(argv: Sequence[str]) -> int:
    import pyrage

    try:
        if argv[0] == "encrypt":
            pyrage.encrypt_file("/dev/stdin", "/dev/stdout", _recipients(argv[1:]))
        elif argv[0] == "decrypt":
            pyrage.decrypt_file("/dev/stdin", "/dev/stdout", _identities(int(argv[1])))
        else:
            raise ValueError(f"unknown mode {argv[0]!r}")
    except Exception as exc:  # reported to the parent, which words the refusal
        sys.stderr.write(json.dumps({"error": type(exc).__name__, "message": str(exc)}) + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
