"""age in a child process, between two pipes.

Layer: judging rooms - edge (a subprocess).  The cipher runs in its own process so this
one can read files, hash and write on the other core meanwhile.  When the reference
``age`` command is installed (``shutil.which("age")``; Debian's ``age`` package) it is
that child: its Go ChaCha20-Poly1305 is, on the machine measured, 2.6x pyrage's for
encryption and about 2x for decryption.  Otherwise the child is this module run by the
same Python: pyrage's ``encrypt_file``/``decrypt_file`` from its stdin to its stdout
(pyrage 1.4 holds the GIL for the whole call, so it cannot share this process).  Both
write and read the same age v1 format; the tests decrypt each one's output with the
other.

Recipients are public and go on the command line, and only ``age1...``
X25519 and ``ssh-`` keys are ever passed (an ``age1`` plugin recipient would
make the binary run a plugin found on PATH).  Identities are secret: each
goes through its own pipe (the binary reads ``-i /dev/fd/N``), never the
command line or the environment.  The binary reports an error as
``age: error: TEXT`` on stderr with exit status 1; this module's own child
as a last stderr line of JSON, ``{"error": ClassName, "message": text}``.

    age -e -r RECIPIENT...                 age -d -i /dev/fd/N...
    python -I -m ftmanifest.backup.agechild encrypt RECIPIENT...
    python -I -m ftmanifest.backup.agechild decrypt FD    (identities as JSON on FD)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import IO, Any

from ftmanifest.backup.pipe import widen

STDERR_MAX = 64 * 1024
AGE_MAGIC = b"age-encryption.org/v1\n"
HEADER_MAX = 1 << 16  # the longest age header bound into a backup's metadata
# The header ends with its MAC line; no other header line starts with "---"
# (stanza lines start with "-> ", bodies are unpadded base64).
_MAC_LINE = re.compile(rb"\n--- [A-Za-z0-9+/]{43}\n")
_X25519 = re.compile(r"age1[02-9ac-hj-np-z]{58}")
_NO_MATCH = ("No matching keys", "no identity matched any of the recipients")


def age_binary() -> str | None:
    """The reference ``age`` command when it is installed, else None (pyrage)."""
    return shutil.which("age")


def header_size(prefix: bytes) -> int | None:
    """The length of the age v1 header that ``prefix`` starts with, through its
    MAC line; None when ``prefix`` holds no whole header within ``HEADER_MAX``.

    The header holds each recipient's stanza (the file key wrapped to it) and a
    MAC of the header under that file key, so whoever decrypts an archive whose
    header is byte for byte the one a backup signed reads a payload sealed with
    that backup's file key: someone who knows only a recipient, or can write the
    backups folder, cannot seal another one (``unpack.read_archive``)."""
    if not prefix.startswith(AGE_MAGIC):
        return None
    found = _MAC_LINE.search(prefix, len(AGE_MAGIC) - 1, HEADER_MAX)
    return found.end() if found else None


class AgeChildError(Exception):
    """What the child reported: pyrage's error class name (``age`` for the
    binary) and message."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message

    @property
    def wrong_key(self) -> bool:
        """None of the identities is one of the archive's recipients."""
        return any(text in self.message for text in _NO_MATCH)


class AgeChild:
    """One running child; ``stdout`` is the output pipe to read.

    ``mode`` "encrypt" takes ``recipients`` (``age1...`` or ``ssh-...`` text),
    "decrypt" takes ``identities`` (``keys.Identity``: ``kind``, ``secret``).
    """

    def __init__(
        self,
        mode: str,
        stdin: int,
        *,
        recipients: Sequence[str] = (),
        identities: Sequence[Any] = (),
        stdout: int | None = None,
    ):
        binary = age_binary()
        secrets: list[bytes] = []
        if mode == "encrypt":
            for text in recipients:
                if not (_X25519.fullmatch(text) or text.startswith("ssh-")):
                    raise AgeChildError("RecipientError", f"not an X25519 or ssh recipient: {text}")
        elif mode == "decrypt":
            secrets = [i.secret.encode("ascii") + b"\n" for i in identities]
            if not binary:
                secrets = [identities_secret(identities)]
        else:
            raise ValueError(f"unknown mode {mode!r}")
        pipes = [os.pipe() for _ in secrets]
        if binary:
            flag = "-r" if mode == "encrypt" else "-i"
            words = recipients if mode == "encrypt" else [f"/dev/fd/{r}" for r, _ in pipes]
            argv = [binary, "-e" if mode == "encrypt" else "-d"]
            argv += [w for word in words for w in (flag, word)]
        else:
            argv = [sys.executable, "-I", "-m", "ftmanifest.backup.agechild", mode]
            argv += recipients if mode == "encrypt" else [str(pipes[0][0])]
        self.binary = binary
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=stdin,
                stdout=subprocess.PIPE if stdout is None else stdout,
                stderr=subprocess.PIPE,
                pass_fds=tuple(r for r, _ in pipes),
                bufsize=1 << 16,
            )
        except BaseException:
            for _, w in pipes:
                os.close(w)
            raise
        finally:
            for r, _ in pipes:
                os.close(r)
        # The child reads each pipe to its end, in order, before any input; a few KiB each.
        for (_, w), secret in zip(pipes, secrets, strict=True):
            try:
                view = memoryview(secret)
                while view:
                    view = view[os.write(w, view) :]
            except BrokenPipeError:  # it exited early; wait() says why
                pass
            finally:
                os.close(w)
        self.stdout: IO[bytes] | None = self.proc.stdout
        if self.stdout is not None:
            widen(self.stdout.fileno())  # fewer wake-ups: the reader takes 1 MiB at a time

    def wait(self) -> dict[str, Any]:
        """Wait for the child; its result, or ``AgeChildError`` if it failed."""
        self.close_output()
        assert self.proc.stderr is not None
        err = self.proc.stderr.read(STDERR_MAX)
        code = self.proc.wait()
        self.proc.stderr.close()
        lines = err.decode("utf-8", "replace").strip().splitlines()
        if self.binary:
            if code == 0:
                return {}
            said = [line[12:] for line in lines if line.startswith("age: error: ")]
            raise AgeChildError("age", said[0] if said else f"age exited with status {code}")
        if code == 0:
            result = json.loads(lines[-1]).get("result", {}) if lines else {}
            return result if isinstance(result, dict) else {}
        try:
            doc = json.loads(lines[-1])
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
