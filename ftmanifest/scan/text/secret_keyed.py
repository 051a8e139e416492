"""Secret rules for providers whose keys have no prefix: the provider's word, an
assignment, then a value of exactly the provider's documented length and alphabet.

Layer: judging rooms - pure core (scan rules).  A 32-character run of letters and
digits is no secret on its own; after ``ALGOLIA_API_KEY=`` or ``"jfrogToken":`` it
is.  So each rule asks for the provider's word in the key and the value's shape
(hex, a UUID, a base62 run of a given length) and not for a ``*_KEY`` suffix:

- a hex or UUID value counts beside the word unless the key names only an
  identifier or a digest (``KUCOIN_ACCOUNT_ID``, ``meraki_firmware_sha1``), and
  only in one case (mixed-case hex is made up);
- a base62 value counts only when the key also names a credential (key, token,
  secret, password...) and the value mixes letters and digits or both cases at
  random, because a run of letters after ``etsy_shop:`` is a name;
- the word must start a word of the key (``okta`` is not in ``rookTable``).

Values with a structure of their own whose prefix is too common to stand alone
(Twilio ``SK``, Okta ``00``, Vault ``s.``) come first.  Client ids made only of
digits (Asana, Discord) are identifiers, not secrets, and have no rule.  The
examples are drawn at import time from a fixed seed.
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


def _r(n: int, alpha: str = _AN) -> str:
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


_U = _uuid()
# Values with a structure of their own that still need the word (a common prefix
# such as ``SK``, ``00``, ``s.``, or none).
_STRUCTURED: tuple[Rule, ...] = (
    keyed(
        "secret.twilio-key",
        "Twilio API key (SK + 32 hex) or auth token after the word twilio",
        ("twilio",),
        r"SK[0-9a-fA-F]{32}|[0-9a-f]{32}",
        (f"TWILIO_API_KEY=SK{_r(32, _HX)}", f"twilio_auth_token: {_r(32, _HX)}"),
        (f"TWILIO_ACCOUNT_SID=AC{_r(32, _HX)}", f"twilio_request_sha: {_r(32, _HX)}"),
    ),
    keyed(
        "secret.mailgun-key",
        "Mailgun API, public or webhook signing key after the word mailgun",
        ("mailgun",),
        r"(?:pub)?key-[0-9a-f]{32}|[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}",
        (f"MAILGUN_API_KEY=key-{_r(32, _HX)}",),
        ("MAILGUN_API_KEY=key-<your-key>",),
    ),
    keyed(
        "secret.okta-token",
        "Okta API token (00 + 40) after the word okta",
        ("okta",),
        r"00[A-Za-z0-9_\-]{40}",
        (f"OKTA_API_TOKEN=00{_r(40)}",),
        ("okta_org_url: 00-ops",),
    ),
    keyed(
        "secret.lob-key",
        "Lob API key (live_, test_) after the word lob",
        ("lob",),
        r"(?:live|test)_(?:pub_[0-9a-f]{31}|[0-9a-f]{35})",
        (f"LOB_API_KEY=live_{_r(35, _HX)}",),
        ("blob_name = live_model_v2",),
    ),
    keyed(
        "secret.gocardless-token",
        "GoCardless access token after the word gocardless",
        ("gocardless",),
        r"(?:live|sandbox)_[A-Za-z0-9_\-=]{40}",
        (f"GOCARDLESS_TOKEN=live_{_r(40)}",),
        ("gocardless_env: live_mode",),
    ),
    keyed(
        "secret.vault-legacy-token",
        "HashiCorp Vault legacy token (s.) after the word vault",
        ("vault",),
        r"s\.[A-Za-z0-9]{24}",
        (f"VAULT_TOKEN=s.{_r(24)}",),
        ("vault_path: s.secret/data",),
    ),
    keyed(
        "secret.yandex-static-key",
        "Yandex Cloud static access key (YC) after the word yandex",
        ("yandex",),
        r"YC[A-Za-z0-9_\-]{38}",
        (f"YANDEX_SECRET_KEY=YC{_r(38)}",),
        ("yandex_region: YC-central",),
    ),
    keyed(
        "secret.launchdarkly-key",
        "LaunchDarkly API or SDK key after the word launchdarkly",
        ("launchdarkly", "launch_darkly"),
        r"(?:api|sdk|mob)-" + UUID,
        (f"LAUNCHDARKLY_SDK_KEY=sdk-{_U}",),
        (f"launchdarkly_project: proj-{_U}",),
    ),
    keyed(
        "secret.beamer-token",
        "Beamer API key (b_) after the word beamer",
        ("beamer",),
        r"b_[A-Za-z0-9=_\-]{44}",
        (f"BEAMER_API_KEY=b_{_r(44)}",),
        ("beamer_theme: b_dark",),
    ),
    keyed(
        "secret.asana-token",
        "Asana personal access token (1/…:hex, 2/…/…:hex)",
        ("asana",),
        r"[12]/[0-9]{10,20}(?:/[0-9]{10,20})?:[0-9a-f]{32}",
        (f"ASANA_PAT=2/{_r(16, string.digits)}/{_r(16, string.digits)}:{_r(32, _HX)}",),
        ("asana_workspace: 1/2",),
    ),
    keyed(
        "secret.discord-bot-token",
        "Discord bot token (id.time.hmac) after the word discord",
        ("discord",),
        r"[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}",
        (f"DISCORD_BOT_TOKEN=M{_r(25)}.{_r(6)}.{_r(38)}",),
        ("discord_invite: Mabc.def.ghi",),
    ),
    keyed(
        "secret.cloudflare-key",
        "Cloudflare global API key (37 hex) or API token after cloudflare",
        ("cloudflare",),
        r"[0-9a-f]{37}|[A-Za-z0-9_\-]{40}",
        (f"CLOUDFLARE_API_KEY={_r(37, _HX)}", f"CLOUDFLARE_API_TOKEN={_r(40)}"),
        (f"cloudflare_zone_id: {_r(32, _HX)}", f"cloudflare_commit_sha = {_r(40, _HX)}"),
    ),
)

KEYED_RULES: tuple[Rule, ...] = _STRUCTURED + tuple(_rule(*row) for row in _TABLE)
