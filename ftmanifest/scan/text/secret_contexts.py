"""Secret rules that read a credential from the file that holds it, not from its shape.

Layer: judging rooms - pure core (scan rules).  Some credentials have no shape of
their own and are known by where they sit:

- a **Kubernetes Secret** manifest (``kind: Secret``): each value under ``data:`` is
  a secret written in base64, which hides nothing; under ``stringData:`` the values
  are the secrets in plain text.  A ConfigMap, an ``ExternalSecret`` or a
  ``SopsSecret`` holds none, and an empty, templated (``{{ .Values.x }}``) or
  placeholder value stays quiet;
- a **NuGet.config** ``<packageSourceCredentials>`` entry ``ClearTextPassword``
  (the ``Password`` entry is encrypted for one machine's user and is left alone);
  ``%VAR%`` is an environment reference;
- a **curl** ``-u user:password`` (``CURL_USER_PASSWORD``, which keeps its place in
  ``secret_rules.SECRET_RULES``), and a ``-u KEY:`` whose user part is an API key and
  whose password is empty, the form Stripe, Mailgun and others document.

The YAML is not parsed: a value counts only where the document (between ``---``
lines) that holds it says ``kind: Secret``.  Each rule is run on its own made-up
examples by ``tests/scan/secret_formats_test.py``.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import re
import threading

from ftmanifest.scan.text import secrets as v
from ftmanifest.scan.text.rule import Rule

# A map's key at the start of its line or of a list item (``- data:``), the line's
# indentation captured (group 1; a list item's own keys then count as the map's), and the
# lines skipped before the entry a rule reports: a blank or comment line, or a line
# indented deeper than the map's key (an entry, or a ``|`` block's line).  Unbounded
# in count, so any number of templated entries before a value hide nothing; the map
# ends at a line indented no deeper than its key, so a nested map's match ends with
# it and the matches of a file's maps, together, read each line a bounded number of
# times.  The rule's window (``fwd``) bounds the whole.
_MAP = r"(?:(?<![^\n])|(?<=\xef\xbb\xbf))([ \t]{0,40})(?:-[ \t]{1,8})?"  # or after a BOM
_COMMENT = r"(?:#[^\n]{0,200})?"  # after the map's key, on its line
_SKIP = r"(?:[ \t]*(?:#[^\n]*)?\r?\n|\1[ \t]+[^\s#][^\n]*\n)*?"
_KEY = r"\1[ \t]+[\"']?[\w.\-]{1,253}[\"']?:[ \t]*"
_BLOCK = r"(?:[|>][-+]?[ \t]*\r?\n[ \t]+)?"  # a ``|`` or ``>`` block scalar
_KIND = re.compile(
    rb"^(?:\xef\xbb\xbf)?[ \t]*[\"']?kind[\"']?:[ \t]*[\"']?secret[\"']?[ \t]*(?:#[^\n]*)?\r?$",
    re.I | re.M,
)
_DOC = re.compile(rb"^---", re.M)
_CRED_KEY = r"(?:pass|pwd|token|secret|key|auth|cred|dsn|cert)"


class _Kinds(threading.local):
    """Where the last buffer asked about says ``kind: Secret`` and where its YAML
    documents start (``---`` lines): found in one pass, then each map asks by
    bisection, so a file of many maps costs one read, not one per map.  The buffer is
    held, so its identity cannot pass to another."""

    def __init__(self) -> None:
        self.buf: bytes | None = None
        self.kinds: list[int] = []
        self.docs: list[int] = []

    def of(self, buf: bytes) -> _Kinds:
        if self.buf is not buf or not isinstance(buf, bytes):  # a bytearray may change
            self.kinds = [k.start() for k in _KIND.finditer(buf)]
            self.docs = [d.start() for d in _DOC.finditer(buf)]
            self.buf = buf
        return self


_kinds = _Kinds()


def _in_secret(m: v.Match) -> bool:
    """The map's YAML document (between ``---`` lines, at most 64 KiB either side of
    the map) says ``kind: Secret``."""
    buf, at = m.string, m.start()
    memo = _kinds.of(buf)
    i = bisect.bisect_left(memo.docs, at)
    start = max(memo.docs[i - 1] if i else 0, at - 65536)
    end = min(memo.docs[i] if i < len(memo.docs) else len(buf), at + 65536)
    j = bisect.bisect_left(memo.kinds, start)
    return j < len(memo.kinds) and memo.kinds[j] < end


def k8s_data(m: v.Match, g: int) -> bool:
    """A ``data:`` value of a Secret: base64 of six bytes or more that is not a
    placeholder once decoded (``_secret_value``).  The rule's match is the map's first
    such value; when that one is a placeholder, the map's later entries are read too, so
    a ``changeme`` first hides nothing after it."""
    if _secret_value(m.group(g)):
        return _in_secret(m)
    buf, after = m.string, m.end(g)
    top = _map_end(len(m.group(1))).search(buf, after, after + 12000)
    end = top.start() if top else min(len(buf), after + 12000)
    later = any(_secret_value(e.group(1)) for e in _ENTRY.finditer(buf, after, end))
    return later and _in_secret(m)


# An entry of the map (``  key: base64``, or a ``|`` block of one line), and where a
# map whose key is indented ``n`` columns ends: a line indented no deeper that is
# neither blank nor a comment (the next key beside it, or a document marker).
_ENTRY = re.compile(
    rb"^[ \t]+[\"']?[\w.\-]{1,253}[\"']?:[ \t]*(?:[|>][-+]?[ \t]*\r?\n[ \t]+)?"
    rb"[\"']?([A-Za-z0-9+/]{8,8192}={0,2})[\"']?[ \t]*(?:#[^\n]*)?\r?$",
    re.M,
)


@functools.lru_cache(maxsize=64)
def _map_end(n: int) -> re.Pattern[bytes]:
    return re.compile(rb"^[ \t]{0,%d}[^\s#]" % n, re.M)


def _secret_value(value: bytes) -> bool:
    """Base64 of six bytes or more; a value of one short line is read as a password
    (not a placeholder), a longer one (a certificate, a docker config) counts whatever
    it says."""
    try:
        decoded = base64.b64decode(value + b"=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    if len(decoded) < 6:
        return False
    if len(decoded) <= 40 and decoded.isascii() and b"\n" not in decoded.strip():
        text = decoded.strip()
        return text.lower() not in v.WEAK_PASSWORDS and not v.is_placeholder(text)
    return True


def k8s_string_data(m: v.Match, g: int) -> bool:
    """A ``stringData:`` value of a Secret under a credential's key, in plain text."""
    value = m.group(g)
    if value.startswith((b"$", b"%", b"<", b"{", b"[")) or value.lower() in v.WEAK_PASSWORDS:
        return False
    return not v.is_placeholder(value) and _in_secret(m)


def nuget_password(m: v.Match, g: int) -> bool:
    """A clear-text NuGet password: not ``%VAR%``, a placeholder or the word itself."""
    value = m.group(g)
    if value.startswith((b"%", b"$", b"<", b"{")) or value.lower() in v.WEAK_PASSWORDS:
        return False
    return not v.is_placeholder(value)


def curl_user_key(m: v.Match, g: int) -> bool:
    """``curl -u KEY:``: an API key as the user name, an empty password."""
    return v.header_token(m, g)


_B64 = "WWpKc2RtUkhiR2hpYmxKc1kyMDFhR0pETVRCaU1sWjFXVmhrY0dJeU9YbGFWelE5"
_PW = "T2xkHq4vRzN8wPa3"
_UK = "k7Vq2NwXe9PmR4tY6sLc"

# A curl command up to an option: its line and the lines that continue it (``\``
# at a line's end, a ``#`` on the next when the command is commented out).
CURL_CMD = r"curl\s(?:[^\n\\]|\\[^\n]|\\\r?\n){0,400}?"

# -u/--user user:password: found in SECRET_RULES' order, before the provider formats
CURL_USER_PASSWORD = Rule(
    "secret.curl-user-password",
    "secret",
    "a password on a curl command line (-u/--user user:password)",
    CURL_CMD + r"(?:-u|--user)[\s=]{1,3}[\"']?\{?[^\s:\"'{}]{0,64}\}?[\"']?:[\"']?\{?"
    r"([^\s\"'{}]{4,128})",
    ("curl",),
    validator=v.curl_password,
    gate=r"(?:-u|--user)[\s=]{1,3}[\"']?\{?[^\s:\"'{}]{0,64}\}?[\"']?:[\"']?\{?[^\s\"'{}]{4}",
    gate_len=500,
    group=1,
    fwd=620,
    true_positives=(
        "curl -s -u deploy:Tr0ub4dor3x https://ci.example.com/api",
        "curl -X POST https://ci.example.com/api \\\n  -u deploy:Tr0ub4dor3x",
        'curl -u ":Tr0ub4dor3x" https://ci.example.com/api',
        "curl --user deploy:'Tr0ub4dor3x' https://ci.example.com/api",
        'curl --user "{deploy}":"{Tr0ub4dor3x}" https://ci.example.com/api',
    ),
    false_positives=(
        "curl -u $USER:$PASSWORD https://api.example.com",
        "curl --user admin https://api.example.com",
        "curl -u user:password https://api.example.com",
        'curl -u "${username}":"${password}" https://api.example.com',
        "curl https://api.example.com\n-u deploy:Tr0ub4dor3x",
        "curl -u <user:password> https://api.example.com",
    ),
)


CONTEXT_RULES: tuple[Rule, ...] = (
    Rule(
        "secret.kubernetes-secret",
        "secret",
        "a value under data: in a Kubernetes Secret manifest (base64 hides nothing)",
        _MAP
        + r"data:[ \t]{0,20}"
        + _COMMENT
        + r"\r?\n"
        + _SKIP
        + _KEY
        + _BLOCK
        + r"[\"']?([A-Za-z0-9+/]{8,8192}={0,2})[\"']?[ \t]*(?:#[^\n]*)?(?:\r?\n|$)",
        ("data:",),
        validator=k8s_data,
        gate=r"data:[ \t]{0,20}" + _COMMENT + r"\r?\n[ \t]",
        gate_len=240,
        group=2,
        back=50,
        back_chars=r" \t\-",
        fwd=12000,
        true_positives=(
            f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\n"
            f"data:\n  password: {base64.b64encode(_PW.encode()).decode()}\n",
            f"apiVersion: v1\ndata:\n  user: YWRtaW4=\n  token: {_B64}\nkind: Secret\n",
            f"kind: 'Secret'\ndata:\n  # the key\n  tls.key: |\n    {_B64}\n",
        ),
        false_positives=(
            "apiVersion: v1\nkind: ConfigMap\ndata:\n  path: c2VjcmV0L2FwcC9rZXk=\n",
            f"kind: Secret\nmetadata:\n  name: a\n---\nkind: ConfigMap\ndata:\n  blob: {_B64}\n",
            'kind: Secret\ndata:\n  password: ""\n  token: {{ .Values.token | b64enc }}\n',
            "kind: Secret\ndata:\n  password: Y2hhbmdlbWU=\n",  # changeme
            f"kind: SopsSecret\nspec:\n  data:\n    token: {_B64}\n",
            f"metadata:\n  annotations:\n    a: b\nmetadata:\n  x: {_B64}\nkind: Secret\n",
        ),
    ),
    Rule(
        "secret.kubernetes-secret-stringdata",
        "secret",
        "a plain-text value under stringData: in a Kubernetes Secret manifest",
        _MAP
        + r"stringData:[ \t]{0,20}"
        + _COMMENT
        + r"\r?\n"
        + _SKIP
        + r"\1[ \t]+[\"']?[\w.\-]{0,120}"
        + _CRED_KEY
        + r"[\w.\-]{0,120}[\"']?:[ \t]*[\"']?([^\s\"'#][^\n\"']{4,254}[^\s\"'])[\"']?[ \t]*"
        r"(?:\r?\n|$)",
        ("stringdata:",),
        validator=k8s_string_data,
        group=2,
        back=50,
        back_chars=r" \t\-",
        fwd=12000,
        ignore_case=True,
        true_positives=(
            f"apiVersion: v1\nkind: Secret\nstringData:\n  host: db\n  DB_PASSWORD: {_PW}\n",
        ),
        false_positives=(
            f"kind: ConfigMap\nstringData:\n  api_token: {_PW}\n",
            'kind: Secret\nstringData:\n  password: "${DB_PASSWORD}"\n',
            "kind: Secret\nstringData:\n  password: <your-password>\n",
        ),
    ),
    Rule(
        "secret.nuget-cleartext-password",
        "secret",
        "a NuGet.config package source password in clear text (ClearTextPassword)",
        r"ClearTextPassword[\"'][ \t\r\n]{1,20}value=[\"']([^\"'\n]{6,256})[\"']",
        ("cleartextpassword",),
        validator=nuget_password,
        group=1,
        fwd=300,
        ignore_case=True,
        true_positives=(f'<add key="ClearTextPassword" value="{_PW}" />',),
        false_positives=(
            '<add key="ClearTextPassword" value="%NUGET_FEED_PASSWORD%" />',
            '<add key="ClearTextPassword" value="xxxxxxxxxx" />',
            '<add key="ClearTextPassword" value="abc" />',
        ),
    ),
    Rule(
        "secret.curl-user-key",
        "secret",
        "an API key as the user of a curl command, with an empty password (-u KEY:)",
        CURL_CMD + r"(?:-u|--user)[\s=]{1,3}[\"']?"
        r"([^\s:\"'$<{\[]{8,128}):(?:[\"']|\s|$)",
        ("curl",),
        validator=curl_user_key,
        gate=r"(?:-u|--user)[\s=]{1,3}[\"']?[^\s:\"'$<{\[]{8,128}:",
        gate_len=560,
        group=1,
        fwd=600,
        true_positives=(
            f"curl https://api.example.com/v1/charges -u {_UK}:",
            f'curl -X POST --user "{_UK}:" https://api.example.com',
        ),
        false_positives=(
            "curl -u $STRIPE_KEY: https://api.example.com",
            "curl -u username: https://api.example.com",
            f"curl -u deploy:{_PW} https://api.example.com",
        ),
    ),
)
