"""One ``allowed_signers`` line, tokenised exactly as OpenSSH does.

Layer: signing (pure).  Mirrors OpenSSH 9.x: ``strdelimw`` for the
principals, ``sshkey_read`` / ``sshkey_advance_past_options`` to tell options
from the key, ``sshsigopt_parse`` for the options (``opt_flag``,
``opt_match``, ``opt_dequote``), ``match_pattern_list`` for patterns.  Every
defect is a ``ValueError`` whose message names it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ftmanifest.signing._sshtime import parse_ssh_time
from ftmanifest.signing._strict import b64decode_strict

_WS = " \t"
_VALUED = ("namespaces", "valid-after", "valid-before")
# Key type names OpenSSH's sshkey_read knows (sshkey.c keyimpls).
KEY_TYPES = frozenset(
    {
        "ssh-ed25519",
        "ssh-ed25519-cert-v01@openssh.com",
        "sk-ssh-ed25519@openssh.com",
        "sk-ssh-ed25519-cert-v01@openssh.com",
        "ssh-rsa",
        "rsa-sha2-256",
        "rsa-sha2-512",
        "ssh-rsa-cert-v01@openssh.com",
        "ssh-dss",
        "ssh-dss-cert-v01@openssh.com",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "ecdsa-sha2-nistp256-cert-v01@openssh.com",
        "ecdsa-sha2-nistp384-cert-v01@openssh.com",
        "ecdsa-sha2-nistp521-cert-v01@openssh.com",
        "sk-ecdsa-sha2-nistp256@openssh.com",
        "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com",
        "ssh-xmss@openssh.com",
    }
)


@dataclass(frozen=True)
class AllowedLine:
    principals: tuple[str, ...]
    cert_authority: bool
    namespaces: tuple[str, ...] | None
    valid_after: int | None
    valid_before: int | None
    keytype: str
    blob: bytes


@lru_cache(maxsize=256)
def _pattern(pattern: str) -> re.Pattern[str]:
    # OpenSSH match_pattern: only '*' and '?' are special ('[' is literal).
    return re.compile(
        "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.S
    )


def match_list(value: str, patterns: tuple[str, ...]) -> bool:
    """OpenSSH pattern-list semantics: any negated match wins, else any match."""
    hit = False
    for pattern in patterns:
        if pattern.startswith("!"):
            if _pattern(pattern[1:]).fullmatch(value):
                return False
        elif _pattern(pattern).fullmatch(value):
            hit = True
    return hit


def _word(text: str) -> tuple[str, str]:
    """First whitespace-delimited word and the rest, leading whitespace dropped."""
    end = next((i for i, c in enumerate(text) if c in _WS), len(text))
    return text[:end], text[end:].lstrip(_WS)


def _principals(line: str) -> tuple[str, str]:
    """``strdelimw``: a quoted or bare first token; something must follow."""
    if line.startswith('"'):
        close = line.find('"', 1)
        if close < 0:
            raise ValueError("unterminated quote in the principals")
        token, rest = line[1:close], line[close + 1 :]
        if rest and rest[0] not in _WS:
            raise ValueError("text right after the principals' closing quote")
        rest = rest.lstrip(_WS)
    else:
        token, rest = _word(line)
        if '"' in token:
            raise ValueError("a quote inside the principals (quote the whole list)")
    if not rest:
        raise ValueError("expected `principals [options] keytype base64-key [comment]`")
    return token, rest


def _past_options(text: str) -> tuple[str, str]:
    """``sshkey_advance_past_options``: options end at unquoted whitespace."""
    quoted = False
    i = 0
    while i < len(text) and (quoted or text[i] not in _WS):
        if text[i] == "\\" and text[i + 1 : i + 2] == '"':
            i += 1
        elif text[i] == '"':
            quoted = not quoted
        i += 1
    if quoted:
        raise ValueError("unterminated quote in the options")
    return text[:i], text[i:].lstrip(_WS)


def _dequote(opts: str, pos: int) -> tuple[str, int]:
    """``opt_dequote``: a value must be double-quoted; ``\\"`` is a quote."""
    if opts[pos : pos + 1] != '"':
        raise ValueError("option value is not quoted (missing start quote)")
    pos += 1
    out: list[str] = []
    while pos < len(opts) and opts[pos] != '"':
        if opts[pos] == "\\" and opts[pos + 1 : pos + 2] == '"':
            pos += 1
        out.append(opts[pos])
        pos += 1
    if pos >= len(opts):
        raise ValueError("option value is missing its end quote")
    return "".join(out), pos + 1


def parse_options(opts: str) -> tuple[bool, str | None, int | None, int | None]:
    """``sshsigopt_parse``: (cert_authority, namespaces, valid_after, valid_before)."""
    ca = False
    values: dict[str, str] = {}
    pos = 0
    while pos < len(opts):
        low = opts[pos:].lower()
        name = next((n for n in _VALUED if low.startswith(n + "=")), None)
        if low.startswith("cert-authority"):
            ca, pos = True, pos + len("cert-authority")
        elif name is not None:
            if name in values:
                raise ValueError(f'multiple "{name}" clauses')
            values[name], pos = _dequote(opts, pos + len(name) + 1)
        # else nothing is consumed: ssh then accepts only a comma here (so an
        # empty option, as in ",namespaces=...", is allowed; "bogus=1" is not).
        if pos >= len(opts):
            break
        if opts[pos] != ",":
            raise ValueError(f"unknown key option at {opts[pos : pos + 30]!r}")
        pos += 1
        if pos >= len(opts):
            raise ValueError("unexpected end of options")
    times: dict[str, int] = {}
    for name in ("valid-after", "valid-before"):
        if name in values:
            times[name] = parse_ssh_time(values[name])
            if times[name] == 0:
                raise ValueError(f'invalid "{name}" time')
    after, before = times.get("valid-after"), times.get("valid-before")
    if after is not None and before is not None and before <= after:
        raise ValueError('"valid-before" time is before "valid-after"')
    return ca, values.get("namespaces"), after, before


def parse_allowed_line(line: str) -> AllowedLine:
    """Parse one non-blank, non-comment line (leading whitespace stripped)."""
    principals_text, rest = _principals(line)
    opts = ""
    if _word(rest)[0] not in KEY_TYPES:
        opts, rest = _past_options(rest)
        if not rest:
            raise ValueError("missing key")
    keytype, rest = _word(rest)
    if keytype not in KEY_TYPES:
        raise ValueError(f"unknown key type {keytype[:40]!r}")
    key_b64, _comment = _word(rest)
    if not key_b64:
        raise ValueError("missing key")
    blob = b64decode_strict(key_b64)
    ca, namespaces, after, before = parse_options(opts)
    principals = tuple(p for p in principals_text.split(",") if p)
    if not principals:
        raise ValueError("no principals")
    return AllowedLine(
        principals=principals,
        cert_authority=ca,
        namespaces=None if namespaces is None else tuple(namespaces.split(",")),
        valid_after=after,
        valid_before=before,
        keytype=keytype,
        blob=blob,
    )
