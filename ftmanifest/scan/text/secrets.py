"""Validators that turn a secret-shaped match into a finding or silence it.

Layer: judging rooms - pure core (scan rules).  Each function takes the matched value and the
buffer it came from and answers "is this a real secret?".  They encode the hard
negatives a secret scanner meets in ML data: placeholders, environment references, digests, UUIDs,
base64 image data and low-entropy strings stay quiet.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections import Counter
from typing import Any

Match = Any  # re.Match[bytes]; kept loose for Python 3.10 typing

_PLACEHOLDER_WORDS = (
    b"EXAMPLE",
    b"YOUR",
    b"XXXX",
    b"REDACTED",
    b"PLACEHOLDER",
    b"DUMMY",
    b"CHANGEME",
    b"CHANGE_ME",
    b"SAMPLE",
    b"INSERT",
    b"REPLACE",
    b"SECRET_HERE",
    b"TOKEN_HERE",
    b"KEY_HERE",
    b"TOKENHERE",
    b"STRINGHERE",
    b"KEYHERE",
)
_PLACEHOLDER = re.compile(b"|".join(map(re.escape, _PLACEHOLDER_WORDS)), re.IGNORECASE)
_ENV_REF = re.compile(
    rb"\$\{|\$\(|^\$[A-Za-z_]|%\(|\{\{|os\.environ|getenv|process\.env|ENV\[|<[^>]*>|\*\*\*\*",
    re.IGNORECASE,
)
_REPEAT = re.compile(rb"(.)\1{5}")
# Seven letters or digits in alphabet order (``abcdefg``, ``1234567``): typed by hand,
# one in about 10**11 of random 100-character tokens.
_RUNS = (b"abcdefghijklmnopqrstuvwxyz", b"0123456789")
_SEQUENCE = re.compile(
    b"|".join(re.escape(a[i : i + 7]) for a in _RUNS for i in range(len(a) - 6)), re.IGNORECASE
)
_HEX = re.compile(rb"[0-9a-fA-F]+")
_VERSIONED = re.compile(rb"[A-Za-z][-_]v?[0-9]{1,4}\.[0-9]{1,4}(?:\.[0-9]{1,4})?$")
_UUID = re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def entropy(value: bytes) -> float:
    """Shannon entropy in bits per byte."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def is_placeholder(value: bytes) -> bool:
    """``YOUR_API_KEY``, ``AKIA...EXAMPLE``, ``xxxxxx``, ``<token>``, ``${VAR}``,
    a Slack token with ids of four digits or fewer (``slack_ids_typed``)..."""
    if _PLACEHOLDER.search(value) or slack_ids_typed(value, digits=4):
        return True
    if _ENV_REF.search(value) or _REPEAT.search(value) or _SEQUENCE.search(value):
        return True
    if value.endswith(b".."):  # elided in documentation: ``ops_eyJzaWdu...``
        return True
    return len(value) >= 16 and entropy(value) < 3.0


def token_boundary(buf: bytes, start: int, end: int, chars: bytes = b"") -> bool:
    """True when the match is not part of a longer alphanumeric run."""
    allowed = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" + chars)
    before = buf[start - 1] if start > 0 else 32
    after = buf[end] if end < len(buf) else 32
    return before not in allowed and after not in allowed


def masked(value: bytes, after: bytes) -> bool:
    """``xoxp-572…-188-####``: the secret part replaced by a mask, so what shows is the
    prefix and numeric ids.  A mask after a whole token, or after letters of its secret
    part (``hf_…****``, ``xoxb-…-AbC…-####``), hides nothing: still a token."""
    if after[:4] not in (b"####", b"****") or not value.endswith((b"-", b"_")):
        return False
    shown = value.split(b"-", 1)[1] if b"-" in value else value.split(b"_", 1)[-1]
    return all(c in b"0123456789-_" for c in shown)


def provider_token(m: Match, g: int) -> bool:
    """A token with a provider prefix: bounded by non-token chars, not a placeholder,
    and not masked (``masked``)."""
    value, buf, start, end = m.group(g), m.string, m.start(g), m.end(g)
    if masked(value, buf[end : end + 4]):
        return False
    return token_boundary(buf, start, end, b"_-") and not is_placeholder(value)


WEAK_PASSWORDS = frozenset(
    b"password pass passwd secret changeme pwd token apikey api_key key".split()
)


def curl_password(m: Match, g: int) -> bool:
    """``curl -u user:pass``: a password, not a variable, a placeholder (``<user:pass>``,
    ``[PASSWORD]``), the word itself or the user name again (``test:test``)."""
    value, buf = m.group(g), m.string
    head = buf[m.start() : m.start(g)].rstrip(b"\"'{").rstrip(b":").rstrip(b"\"'}")
    user = re.split(rb"[\s\"'={]", head)[-1]
    if value.lower() in WEAK_PASSWORDS or value.startswith((b"$", b"%", b"<", b"{", b"[")):
        return False
    if value == user or user.startswith((b"<", b"[")) or value.endswith((b">", b"]")):
        return False
    return not is_placeholder(value)


_SLACK = re.compile(rb"xox[a-z]-((?:[0-9]+-)+)")


def slack_ids_typed(value: bytes, digits: int) -> bool:
    """A Slack token (``xoxb-``, ``xoxp-``, ...; the whole value) whose ids were typed by hand:
    a run of ``digits`` digits or fewer, other than a leading one-digit version
    (``xoxe-1-``, ``xoxa-2-``).  Slack's team, user and bot ids are long digit runs
    (``xoxb-980134110561-…``)."""
    m = _SLACK.match(value)
    if m is None:
        return False
    parts = m.group(1).split(b"-")[:-1]
    return any(len(p) <= digits and not (i == 0 and len(p) == 1) for i, p in enumerate(parts))


def slack_token(m: Match, g: int) -> bool:
    """A Slack token whose numeric ids are Slack's: a run of six digits or fewer is not
    one of them.  Only four digits or fewer (``xoxp-1234-…``) make it a placeholder
    for every rule: a legacy token's six-digit ids are still a random value after
    ``*_TOKEN=`` for the generic warning."""
    return not slack_ids_typed(m.group(g), digits=6) and provider_token(m, g)


def aws_key_id(m: Match, g: int) -> bool:
    value, buf, start, end = m.group(g), m.string, m.start(g), m.end(g)
    return token_boundary(buf, start, end) and not is_placeholder(value)


def high_entropy(m: Match, g: int) -> bool:
    """Assigned values: random-looking, not a digest, UUID or reference."""
    value = m.group(g)
    if is_placeholder(value) or _UUID.fullmatch(value):
        return False
    if _HEX.fullmatch(value) and len(value) in (32, 40, 56, 64, 96, 128):
        return False  # md5/sha1/sha2 digests and git SHAs
    if value.startswith((b"sha256-", b"sha384-", b"sha512-", b"sha256:", b"data:", b"http")):
        return False
    if _VERSIONED.search(value):  # a package and its version: ``jjwt-jackson-0.11.2``
        return False
    has_digit = any(48 <= c <= 57 for c in value)
    has_alpha = any(65 <= c <= 90 or 97 <= c <= 122 for c in value)
    threshold = 3.0 if len(value) < 20 else 3.5
    return has_digit and has_alpha and entropy(value) >= threshold


_TOKEN_KEY_EXCLUDE = re.compile(
    rb"token(?:izer|s\b|_ids?\b|_type|_count|_len|_length|_id_|s_)|max_?tokens|num_?tokens",
    re.IGNORECASE,
)


# The key's last word says the value is about a secret, not one (``SECRET_NAME``,
# ``secret_length``); these words say it is meant to be seen (``publicToken``, CSRF).
_ABOUT_WORDS = frozenset(b"name names length len size type count path file url".split())
_SEEN_WORDS = frozenset(b"public publishable csrf xsrf".split())


# A key naming where secrets are kept (``keyVaultToStoreSecrets``, ``secretStoreVault``:
# a place word, and the key ends on it or on "secrets") holds the name of that place:
# lower-case words and numbers joined by hyphens, as cloud resources are.  A key that
# ends on a credential (``vault_password``, ``VAULT_TOKEN``) holds the credential, and a
# passphrase of hyphenated words is one.
_STORE_WORDS = frozenset(b"vault vaults store stores keystore keyring manager bucket".split())
_PLACE_LAST = _STORE_WORDS | {b"secrets"}
_RESOURCE = re.compile(rb"[a-z][a-z0-9]*(?:-[a-z0-9]+){2,}")


def generic_assignment(m: Match, g: int) -> bool:
    """``password = "..."``: the key must not be a tokenizer/count field, the name or
    length of a secret, a token meant to be public, or a place secrets are kept that
    names a resource."""
    buf, start = m.string, m.start(g)
    if _TOKEN_KEY_EXCLUDE.search(buf, m.start(), start):
        return False
    words = [w.lower() for w in _WORD.findall(buf[m.start() : start])]
    if words and (words[-1] in _ABOUT_WORDS or _SEEN_WORDS.intersection(words)):
        return False
    place = words and words[-1] in _PLACE_LAST and _STORE_WORDS.intersection(words)
    if place and _RESOURCE.fullmatch(m.group(g)):
        return False
    return high_entropy(m, g)


def openai_key(m: Match, g: int) -> bool:
    value = m.group(g)
    if value.startswith(b"sk-ant-"):
        return False
    if not (any(c.isdigit() for c in value.decode()) and value.lower() != value):
        return False
    return provider_token(m, g) and entropy(value) >= 3.5


def jwt(m: Match, g: int) -> bool:
    """Three base64url parts whose header decodes to JSON with ``alg``."""
    value, buf, start, end = m.group(g), m.string, m.start(g), m.end(g)
    # Full stops that end a sentence (``… is eyJ….``, ``eyJ…...``) bound the token;
    # dots followed by more of the alphabet are a longer dotted run.
    stop = end
    while buf[stop : stop + 1] == b".":
        stop += 1
    if stop > end and not token_boundary(buf, stop, stop, b"_-"):
        stop = end
    if not token_boundary(buf, start, stop, b"_-."):
        return False
    head = value.split(b".", 1)[0]
    try:
        decoded = base64.urlsafe_b64decode(head + b"=" * (-len(head) % 4))
        obj = json.loads(decoded)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return False
    return isinstance(obj, dict) and "alg" in obj


_URL_PASS_QUIET = re.compile(
    rb"^(?:pass(?:word)?|pwd|secret|token|changeme|x+|\*+|\.+|test|example|none|null)$",
    re.IGNORECASE,
)


def url_password(m: Match, g: int) -> bool:
    """``scheme://user:pass@host`` with a real-looking password."""
    value, buf, end = m.group(g), m.string, m.end(g)
    if _URL_PASS_QUIET.match(value) or is_placeholder(value):
        return False
    host = buf[end + 1 : end + 64].split(b"/", 1)[0].lower()
    return not host.startswith((b"example.", b"host", b"localhost.example"))


def azure_sas(m: Match, g: int) -> bool:
    """``sig=`` counts only in a SAS URL (``sv=`` within the same URL)."""
    value, buf, start = m.group(g), m.string, m.start(g)
    return b"sv=" in buf[max(0, start - 400) : start] and not is_placeholder(value)


def private_key(m: Match, g: int) -> bool:
    buf, end = m.string, m.end(g)
    body = buf[end - 40 : end]
    return not is_placeholder(body)


_WORD = re.compile(rb"[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*(?![a-z])|[0-9]+")
# A key made of these words names an identifier or a digest, not a credential ...
_ID_WORDS = frozenset(
    b"id ids uuid guid name url uri host region version md5 sha sha1 sha256 hash digest "
    b"checksum etag run dataset project org organization team user app build commit job "
    b"release account tenant portal workspace env environment".split()
)
# ... unless it also names a credential.
_CREDENTIAL_WORDS = frozenset(
    b"key apikey token secret password pass passwd pwd auth credential credentials pat dsn "
    b"bearer".split()
)


def key_words(key: bytes) -> frozenset[bytes]:
    """``HEROKU_API_KEY``, ``herokuApiKey``, ``"heroku.api-key"`` -> {heroku, api, key}."""
    return frozenset(w.lower() for w in _WORD.findall(key))


def word_start(buf: bytes, i: int) -> bool:
    """A word of a key starts at ``i``: not inside another (``okta`` in ``rookTable``,
    ``meraki`` in ``CameraKit``), though a capital after a small letter starts one."""
    if i == 0 or not chr(buf[i - 1]).isalpha():
        return True
    return chr(buf[i - 1]).islower() and chr(buf[i]).isupper()


def keyed_value(m: Match, g: int) -> bool:
    """A provider's word before a value of its shape (a UUID, a hex string): the key
    must not name an identifier or a digest (``HEROKU_APP_ID``, ``sentry_project``)
    and the word must start a word of the key."""
    value, buf = m.group(g), m.string
    if not word_start(buf, m.start()):
        return False
    words = key_words(buf[m.start() : m.start(g)])
    if words & _ID_WORDS and not words & _CREDENTIAL_WORDS:
        return False
    return token_boundary(buf, m.start(g), m.end(g), b"_-") and not is_placeholder(value)


def keyed_credential(m: Match, g: int) -> bool:
    """``keyed_value`` for a provider whose name is an ordinary word (``linear``):
    the key must also name a credential."""
    words = key_words(m.string[m.start() : m.start(g)])
    return bool(words & _CREDENTIAL_WORDS) and keyed_value(m, g)


def header_token(m: Match, g: int) -> bool:
    """A token after an ``Authorization``-style header: not a variable or a placeholder,
    long and mixed enough to be a credential."""
    value = m.group(g)
    if value.startswith((b"$", b"%", b"<", b"{")) or is_placeholder(value):
        return False
    has_digit = any(48 <= c <= 57 for c in value)
    has_alpha = any(65 <= c <= 90 or 97 <= c <= 122 for c in value)
    return len(value) >= 12 and has_digit and has_alpha and entropy(value) >= 3.0


def unembedded_token(m: Match, g: int) -> bool:
    """A prefixed token that is not a slice of a longer base64 run (image data, keys):
    bounded by characters base64 does not use, and mixed case with digits."""
    value, buf, start, end = m.group(g), m.string, m.start(g), m.end(g)
    # base64 pads with "=" only at its end: a "=" before the token is an assignment
    if not token_boundary(buf, start, end, b"_-+/") or buf[end : end + 1] == b"=":
        return False
    lower = any(97 <= c <= 122 for c in value)
    upper = any(65 <= c <= 90 for c in value)
    digit = any(48 <= c <= 57 for c in value)
    return lower and upper and digit and not is_placeholder(value) and entropy(value) >= 4.0


def mixed_token(m: Match, g: int) -> bool:
    """A prefixed token over one case (``API-`` + upper case and digits): it must mix
    letters and digits, so a word in capitals is not a key."""
    value = m.group(g)
    has_digit = any(48 <= c <= 57 for c in value)
    has_alpha = any(65 <= c <= 90 or 97 <= c <= 122 for c in value)
    return has_digit and has_alpha and provider_token(m, g)


_RUN = re.compile(rb"([^A])\1{5}")


def padded_token(m: Match, g: int) -> bool:
    """A token that opens with a run of ``A`` (Twitter's app bearer token): the part
    after the run must be random, and the whole not a slice of a base64 blob."""
    value, buf = m.group(g), m.string
    if not token_boundary(buf, m.start(), m.end(g), b"_-+/%") or buf[m.end(g) :][:1] == b"=":
        return False
    rest = value.lstrip(b"A")
    if _RUN.search(rest) or _PLACEHOLDER.search(rest):
        return False
    lower = any(97 <= c <= 122 for c in rest)
    upper = any(65 <= c <= 90 for c in rest)
    digit = any(48 <= c <= 57 for c in rest)
    return lower and upper and digit and entropy(rest) >= 4.0
