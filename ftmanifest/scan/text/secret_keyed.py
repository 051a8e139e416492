"""Secret rules for providers whose keys have no prefix: the provider's word, an
assignment, then a value of exactly the provider's documented length and alphabet.

Layer: judging rooms - pure core (scan rules).  A 32-character run of letters and
digits is no secret on its own; after ``ALGOLIA_API_KEY=`` or ``"jfrogToken":`` it
is.  So each rule asks for the provider's word in the key and the value's shape
(hex, a UUID, a base62 run of a given length) and not for a ``*_KEY`` suffix:

- a hex or UUID value counts beside the word unless the key names only an
  identifier (``KUCOIN_ACCOUNT_ID``, ``meraki_serial``...);
- a base62 value counts only when the key also names a credential (key, token,
  secret, password...) and the value mixes letters and digits, because a run of
  letters after ``etsy_shop:`` is a name.

Client ids made only of digits (Asana, Discord) are identifiers, not secrets, and
have no rule.  The examples are drawn at import time from a fixed seed.
"""

from __future__ import annotations

import dataclasses
import random
import string

from ftmanifest.scan.text import secrets as v
from ftmanifest.scan.text.secret_rules import Rule
from ftmanifest.scan.text.secret_shapes import UUID, keyed

_AN = string.ascii_letters + string.digits
_LD = string.ascii_lowercase + string.digits
_HX = "0123456789abcdef"
_rng = random.Random("ftmanifest-secret-keyed")


def _r(n: int, alpha: str) -> str:
    return "".join(_rng.choice(alpha) for _ in range(n))


def _uuid() -> str:
    h = _r(32, _HX)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _hex(n: int) -> tuple[str, str]:
    return f"[0-9a-fA-F]{{{n}}}", _r(n, _HX)


def _b62(lo: int, hi: int = 0, extra: str = "") -> tuple[str, str]:
    cls = "A-Za-z0-9" + extra.replace("-", r"\-")
    span = f"{{{lo}}}" if not hi else f"{{{lo},{hi}}}"
    return f"[{cls}]{span}", _r(1, string.ascii_lowercase) + _r(lo - 2, _LD) + _r(1, "0123456789")


# (rule id, provider, words, (value regex, an example value), value is base62)
_Shape = tuple[str, str, tuple[str, ...], tuple[str, str], bool]
_TABLE: tuple[_Shape, ...] = (
    ("adobe-client-key", "Adobe client id or key (32 hex)", ("adobe",), _hex(32), False),
    ("algolia-key", "Algolia API key (32)", ("algolia",), _b62(32), True),
    ("asana-client-secret", "Asana client secret (32)", ("asana",), _b62(32), True),
    (
        "atlassian-legacy-token",
        "Atlassian API token (24)",
        ("atlassian", "confluence", "jira"),
        _b62(24),
        True,
    ),
    (
        "bitbucket-client-secret",
        "Bitbucket client id or secret (32, 64)",
        ("bitbucket",),
        (r"[A-Za-z0-9]{32}|[A-Za-z0-9=_\-]{64}", _b62(64)[1]),
        True,
    ),
    ("bittrex-key", "Bittrex access or secret key (32)", ("bittrex",), _b62(32), True),
    ("cisco-meraki-key", "Cisco Meraki API key (40 hex)", ("meraki",), _hex(40), False),
    ("codecov-token", "Codecov access token (32)", ("codecov",), _b62(32), True),
    ("coinbase-token", "Coinbase access token (64)", ("coinbase",), _b62(64, 0, "_-"), True),
    (
        "confluent-key",
        "Confluent access token (16) or secret (64)",
        ("confluent",),
        (r"[A-Za-z0-9]{16}|[A-Za-z0-9]{64}", _b62(64)[1]),
        True,
    ),
    (
        "contentful-token",
        "Contentful delivery token (43)",
        ("contentful",),
        _b62(43, 0, "=_-"),
        True,
    ),
    (
        "datadog-key",
        "Datadog API or application key (32, 40)",
        ("datadog",),
        (r"[A-Za-z0-9]{32}|[A-Za-z0-9]{40}", _b62(40)[1]),
        True,
    ),
    (
        "discord-key",
        "Discord API key (64 hex) or client secret (32)",
        ("discord",),
        (r"[0-9a-fA-F]{64}|[A-Za-z0-9=_\-]{32}", _hex(64)[1]),
        True,
    ),
    ("droneci-token", "Drone CI access token (32)", ("droneci", "drone_ci"), _b62(32), True),
    ("etsy-token", "Etsy access token (24)", ("etsy",), _b62(24), True),
    ("fastly-token", "Fastly API token (32)", ("fastly",), _b62(32, 0, "=_-"), True),
    (
        "finicity-token",
        "Finicity API token (32 hex) or client secret (20)",
        ("finicity",),
        (r"[0-9a-fA-F]{32}|[A-Za-z0-9]{20}", _hex(32)[1]),
        True,
    ),
    ("finnhub-token", "Finnhub access token (20)", ("finnhub",), _b62(20), True),
    ("flickr-token", "Flickr access token (32)", ("flickr",), _b62(32), True),
    ("freshbooks-token", "FreshBooks access token (64)", ("freshbooks",), _b62(64), True),
    ("gitter-token", "Gitter access token (40)", ("gitter",), _b62(40, 0, "_-"), True),
    ("intercom-key", "Intercom API key (60)", ("intercom",), _b62(60, 0, "=_-"), True),
    (
        "jfrog-token",
        "JFrog API key (73) or identity token (64)",
        ("jfrog", "artifactory", "bintray"),
        (r"[A-Za-z0-9]{64}|[A-Za-z0-9]{73}", _b62(64)[1]),
        True,
    ),
    ("kraken-token", "Kraken access token (80-90)", ("kraken",), _b62(80, 90, "=_+/-"), True),
    (
        "kucoin-key",
        "KuCoin access key (24 hex) or secret (a UUID)",
        ("kucoin",),
        ("[0-9a-fA-F]{24}|" + UUID, _uuid()),
        False,
    ),
    ("linkedin-secret", "LinkedIn client secret (16)", ("linkedin", "linked_in"), _b62(16), True),
    (
        "looker-secret",
        "Looker client id (20) or secret (24)",
        ("looker",),
        (r"[A-Za-z0-9]{20}|[A-Za-z0-9]{24}", _b62(24)[1]),
        True,
    ),
    ("mattermost-token", "Mattermost access token (26)", ("mattermost",), _b62(26), True),
    (
        "messagebird-key",
        "MessageBird API key (25) or client id (a UUID)",
        ("messagebird", "message_bird", "message-bird"),
        (r"[A-Za-z0-9]{25}|" + UUID, _b62(25)[1]),
        True,
    ),
    (
        "nytimes-key",
        "New York Times API key (32)",
        ("nytimes", "newyorktimes", "new_york_times"),
        _b62(32, 0, "=_-"),
        True,
    ),
    (
        "plaid-secret",
        "Plaid client id (24) or secret (30)",
        ("plaid",),
        (r"[A-Za-z0-9]{24}|[A-Za-z0-9]{30}", _b62(30)[1]),
        True,
    ),
    ("rapidapi-key", "RapidAPI key (50)", ("rapidapi",), _b62(50, 0, "_-"), True),
    (
        "sendbird-token",
        "Sendbird API token (40 hex) or app id (a UUID)",
        ("sendbird",),
        (r"[0-9a-fA-F]{40}|" + UUID, _hex(40)[1]),
        False,
    ),
    (
        "sonar-token",
        "SonarQube or SonarCloud token (squ_, sqp_, sqa_ or 40)",
        ("sonar",),
        (r"(?:squ_|sqp_|sqa_)?[A-Za-z0-9=_\-]{40}", "sqa_" + _b62(40)[1]),
        True,
    ),
    (
        "square-keyed-token",
        "Square access token (EAAA, sq0atp-) or OAuth secret",
        ("square",),
        (r"(?:EAAA|sq0atp-)[A-Za-z0-9_\-]{22,60}|sq0csp-[A-Za-z0-9_\-]{43}", "EAAA" + _b62(26)[1]),
        True,
    ),
    ("squarespace-key", "Squarespace API key (a UUID)", ("squarespace",), (UUID, _uuid()), False),
    (
        "sumologic-key",
        "Sumo Logic access id (su + 12) or key (64)",
        ("sumo",),
        (r"su[A-Za-z0-9]{12}|[A-Za-z0-9]{64}", _b62(64)[1]),
        True,
    ),
    (
        "telegram-keyed-token",
        "Telegram bot token (bot id, colon, A + 34)",
        ("telegram",),
        (r"[0-9]{5,16}:A[A-Za-z0-9_\-]{34}", f"{_r(9, string.digits)}:A{_b62(34)[1]}"),
        True,
    ),
    ("travisci-token", "Travis CI access token (22)", ("travis",), _b62(22), True),
    ("trello-token", "Trello API key (32)", ("trello",), _b62(32, 0, "_-"), True),
    ("twitch-token", "Twitch API token (30)", ("twitch",), _b62(30), True),
    (
        "twitter-key",
        "Twitter API key, secret or access token",
        ("twitter",),
        (
            r"[A-Za-z0-9]{25}|[A-Za-z0-9]{45}|[A-Za-z0-9]{50}|[0-9]{15,25}-[A-Za-z0-9]{20,40}",
            _b62(50)[1],
        ),
        True,
    ),
    ("zendesk-secret", "Zendesk secret key (40)", ("zendesk",), _b62(40), True),
)


def keyed_hex(m: v.Match, g: int) -> bool:
    """A hex or UUID value after a provider's word, in one case (mixed-case hex is
    a made-up string) and not beside an identifier's name."""
    value = m.group(g)
    return (value == value.lower() or value == value.upper()) and v.keyed_value(m, g)


def keyed_token(m: v.Match, g: int) -> bool:
    """A base62 value after a provider's word: the key names a credential and the
    value mixes letters and digits, or both cases at random (a name or a word has
    no digit and reads as words)."""
    value = m.group(g)
    digit = any(48 <= c <= 57 for c in value)
    upper = any(65 <= c <= 90 for c in value)
    lower = any(97 <= c <= 122 for c in value)
    mixed = (digit and (upper or lower)) or (upper and lower and v.entropy(value) >= 3.3)
    return mixed and v.keyed_credential(m, g)


def _rule(rid: str, what: str, words: tuple[str, ...], shape: tuple[str, str], b62: bool) -> Rule:
    regex, token = shape
    env = words[0].upper()
    tp = (f"{env}_API_KEY={token}", f'{{"{words[0]}Token": "{token}"}}')
    fp = (
        f"{env}_API_KEY=${{{env}_API_KEY}}",
        f"{env}_API_KEY={token[: len(token) * 2 // 3]}",
        f"camera{words[0]}_token: {token}",  # the word inside another
        f"{words[0]}_project_id: {token}" if b62 else f"{env}_ACCOUNT_ID={token}",
    )
    rule = keyed(f"secret.{rid}", what + f" after the word {words[0]}", words,
                 "(?:" + regex + ")", tp, fp)  # fmt: skip
    return dataclasses.replace(rule, validator=keyed_token if b62 else keyed_hex)


KEYED_RULES: tuple[Rule, ...] = tuple(_rule(*row) for row in _TABLE)
