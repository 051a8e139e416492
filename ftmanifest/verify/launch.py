"""Which Python interpreter a command will run, with which options and target.

Layer: judging rooms - verify (edge: looks up PATH and reads a ``#!`` line).  ``run``
judges the interpreter the training command will really use, not its own: the command's
first word is found on the *command's* ``PATH``; a Python interpreter is taken with the
options before its target (``-I``, ``-E``, ``-S``, ``-X ...`` change what starts up);
any other program is attributed through its ``#!`` line when that names a Python
interpreter (a console script such as ``torchrun`` or ``accelerate``), and ``env
NAME=VALUE... CMD`` through the command it starts.  Anything else (a shell string, a
shell script, a binary, ``env -i``) cannot be attributed: what it will start is decided
only when it runs, so only the guard inside that process can judge it.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ftmanifest.errors import RefusedError

_PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)?)?$")
# CPython options that take a value (the next word, or the rest of the same word)
_WITH_VALUE = frozenset("WX")
_SHEBANG_MAX = 512


class UnattributedCommandError(RefusedError):
    """``run`` cannot tell which Python interpreter the command trains with, and
    was not told that the guard inside it will report (``--guarded``)."""

    reason = "command-not-attributed"


@dataclass(frozen=True)
class Launch:
    """What a command starts: a Python interpreter and its target, or why not known."""

    interpreter: Path | None  # as the command names it (a venv's bin/python is a link)
    options: tuple[str, ...] = ()  # interpreter options before the target
    script: Path | None = None  # ``python train.py``; the console script for ``torchrun``
    module: str | None = None  # ``python -m train``
    code: bool = False  # ``python -c CODE``
    env: dict[str, str] = field(default_factory=dict)  # the ``env NAME=VALUE`` assignments
    why: str | None = None  # when ``interpreter`` is None: why it cannot be attributed
    missing: bool = False  # the program is not there at all (``run`` reports 127 as a shell)

    @property
    def attributed(self) -> bool:
        return self.interpreter is not None


def attribute(command: Sequence[str], environ: Mapping[str, str], cwd: Path) -> Launch:
    """The Python interpreter ``command`` runs with ``environ`` in ``cwd``."""
    words = list(command)
    assigned: dict[str, str] = {}
    if words and os.path.basename(words[0]) == "env":
        words = words[1:]
        while words and "=" in words[0] and not words[0].startswith("-"):
            name, _, value = words.pop(0).partition("=")
            assigned[name] = value
        if not words or words[0].startswith("-"):
            return Launch(None, why="`env` with options starts a command with another environment")
    if not words:
        return Launch(None, why="no command")
    path = _which(words[0], {**environ, **assigned}, cwd)
    if path is None:
        return Launch(None, why=f"{words[0]!r} is not found on the command's PATH", missing=True)
    if is_python(path):
        return _python(path, words[1:], cwd, assigned)
    shebang = _shebang(path)
    if shebang is None:
        return Launch(None, why=f"{path} is not a Python interpreter and has no #! line")
    interpreter, *opts = shebang
    if os.path.basename(interpreter) == "env" and opts and not opts[0].startswith("-"):
        interpreter, opts = opts[0], opts[1:]
        found = _which(interpreter, {**environ, **assigned}, cwd)
        if found is None:
            return Launch(None, why=f"{path}'s #! line names {interpreter!r}, not on PATH")
        interpreter = str(found)
    if not is_python(Path(interpreter)):
        return Launch(None, why=f"{path} runs under {interpreter}, not a Python interpreter")
    launch = _python(Path(interpreter), [*opts, str(path), *words[1:]], cwd, assigned)
    return launch


def is_python(path: Path) -> bool:
    """A CPython-style interpreter by its name (``python``, ``python3``, ``python3.11``)."""
    return bool(_PYTHON_NAME.match(path.name))


def _python(interpreter: Path, args: list[str], cwd: Path, env: dict[str, str]) -> Launch:
    options: list[str] = []
    while args:
        word = args.pop(0)
        if word == "--":
            break
        if word.startswith("--"):
            options.append(word)
            if word == "--check-hash-based-pycs" and args:
                options.append(args.pop(0))
            continue
        if word.startswith("-") and word != "-":
            letters = word[1:]
            for i, letter in enumerate(letters):
                if letter in "cm":  # the target, after the options of the same word
                    if i:
                        options.append("-" + letters[:i])
                    if letter == "c":
                        return Launch(interpreter, tuple(options), code=True, env=env)
                    module = letters[i + 1 :] or (args.pop(0) if args else None)
                    return Launch(interpreter, tuple(options), module=module, env=env)
                if letter in _WITH_VALUE:
                    options.append(word)
                    if i == len(letters) - 1 and args:
                        options.append(args.pop(0))
                    break
            else:
                options.append(word)
            continue
        args.insert(0, word)
        break
    if not args or args[0] == "-":
        return Launch(interpreter, tuple(options), code=True, env=env)  # stdin: no file
    return Launch(interpreter, tuple(options), script=Path(os.path.abspath(cwd / args[0])), env=env)


def _which(word: str, environ: Mapping[str, str], cwd: Path) -> Path | None:
    """``word`` as an exec of the command would find it: a path when it has a slash,
    else the first executable on the command's PATH."""
    if "/" in word:
        candidate = cwd / word
        return Path(os.path.abspath(candidate)) if os.access(candidate, os.X_OK) else None
    found = shutil.which(word, path=environ.get("PATH", os.defpath))
    return Path(os.path.abspath(cwd / found)) if found else None


def _shebang(path: Path) -> list[str] | None:
    """The words of ``path``'s ``#!`` line, or None (no line, unreadable, a binary)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_SHEBANG_MAX)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0]
    try:
        words = line.decode("utf-8").split()
    except UnicodeDecodeError:
        return None
    return words or None
