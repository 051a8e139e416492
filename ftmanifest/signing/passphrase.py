"""Where key passphrases come from: an environment variable or a prompt.

Layer: signing (edge: reads the environment and the terminal).  Never from
the command line, where other users can read it in the process list.
"""

from __future__ import annotations

import getpass
import os
import re
import sys
from collections.abc import Callable

from ftmanifest.errors import UsageError

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CONVENTIONAL = re.compile(r"[A-Z_][A-Z0-9_]*")


def check_env_name(var: str) -> str:
    """``var`` if it can be an environment variable's name.  Otherwise refuse
    without echoing it: a user who typed the passphrase itself must not see it
    printed into a terminal log or CI output."""
    if not _ENV_NAME.fullmatch(var):
        raise UsageError(
            "--passphrase-env takes the NAME of an environment variable, not a passphrase",
            field="--passphrase-env",
            expected="a name like FTMANIFEST_PASSPHRASE ([A-Za-z_][A-Za-z0-9_]*)",
            observed="something else (not shown: it may be the passphrase itself)",
            hint="export FTMANIFEST_PASSPHRASE=... then pass --passphrase-env "
            "FTMANIFEST_PASSPHRASE; if you typed the passphrase, clear it from your shell history",
        )
    return var


def _shown(var: str) -> str:
    """How to name ``var`` in a message: a conventional CAPITALS name is shown;
    any other (``secret``) may be the passphrase typed by mistake, so is not."""
    if _CONVENTIONAL.fullmatch(var):
        return f"environment variable {var}"
    return (
        "the environment variable named by --passphrase-env "
        "(name not shown: it may be the passphrase itself)"
    )


def from_env(var: str) -> bytes:
    check_env_name(var)
    value = os.environ.get(var)
    if value is None:
        shown = var if _CONVENTIONAL.fullmatch(var) else "VAR"
        raise UsageError(
            f"{_shown(var)} is not set",
            field="--passphrase-env",
            hint=f"export {shown}=... first, or omit --passphrase-env to be asked",
        )
    return value.encode("utf-8")


def require_tty(what: str, option: str = "--passphrase-env") -> None:
    """Refuse to ask for ``what`` where there is no terminal, naming ``option``: the
    command's option that takes the passphrase from an environment variable."""
    if not sys.stdin.isatty():
        raise UsageError(
            f"{what}, but there is no terminal to ask on",
            field=option,
            hint=f"pass {option} VAR naming a variable that holds the passphrase",
        )


def for_unlock(env_var: str | None, path: str) -> Callable[[], bytes]:
    """A callable the key loader calls only if the key is encrypted."""
    if env_var:
        check_env_name(env_var)
        return lambda: from_env(env_var)

    def ask() -> bytes:
        require_tty(f"{path} is encrypted and needs a passphrase")
        return getpass.getpass(f"Passphrase for {path}: ").encode("utf-8")

    return ask


def for_new_key(env_var: str | None, no_passphrase: bool) -> bytes | None:
    """The passphrase for a new key (None: unencrypted)."""
    if no_passphrase:
        return None
    if env_var:
        value = from_env(env_var)
        if not value:
            raise UsageError(
                f"{_shown(env_var)} is empty",
                field="--passphrase-env",
                hint="set a passphrase, or pass --no-passphrase for an unencrypted key",
            )
        return value
    require_tty("a passphrase for the new key is needed")
    first = getpass.getpass("Passphrase for the new key (empty for none): ")
    if first != getpass.getpass("Same passphrase again: "):
        raise UsageError("the two passphrases differ", hint="run keygen again")
    return first.encode("utf-8") or None
