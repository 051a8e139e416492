"""A labelled corpus of provider tokens in their documented formats, in the places
they leak (an env file, YAML, JSON, a curl command, Python code), and of the
look-alikes that are not secrets (digests, UUIDs as run or dataset ids, git SHAs).

Every token is drawn from its provider's documented shape with a fixed seed;
nothing is copied from another tool's tests.  ``tokens(family, n)`` and
``ordinary_lines()`` are what the recall and precision tests scan.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid
from collections.abc import Callable

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
UPPER_DIGITS = string.ascii_uppercase + string.digits
SEED = 48


def _s(r: random.Random, n: int, alpha: str = ALNUM) -> str:
    return "".join(r.choice(alpha) for _ in range(n))


def _uuid(r: random.Random) -> str:
    return str(uuid.UUID(int=r.getrandbits(128), version=4))


def _sentry_org(r: random.Random) -> str:
    claims = {"iat": r.randint(1_700_000_000, 1_800_000_000), "url": "https://sentry.io",
              "region_url": "https://us.sentry.io", "org": _s(r, 8).lower()}  # fmt: skip
    body = base64.b64encode(json.dumps(claims).encode()).decode()
    return f"sntrys_{body}_{_s(r, 43, ALNUM + '+/')}"


def _sentry(r: random.Random) -> tuple[str, str]:
    host = f"o{r.randint(10**5, 10**7)}.ingest.{r.choice(['us.', 'de.', ''])}sentry.io"
    return r.choice(
        [
            ("SENTRY_DSN", f"https://{_s(r, 32, HEX)}@{host}/{r.randint(10**5, 10**7)}"),
            ("SENTRY_AUTH_TOKEN", _sentry_org(r)),
            ("SENTRY_AUTH_TOKEN", "sntryu_" + _s(r, 64, HEX)),
            ("SENTRY_TOKEN", _s(r, 64, HEX)),
        ]
    )


def _teams(r: random.Random) -> str:
    tenant = r.choice(["contoso", "acme", "fabrikam", "labs-ml"])
    return (
        f"https://{tenant}.webhook.office.com/webhookb2/{_uuid(r)}@{_uuid(r)}"
        f"/IncomingWebhook/{_s(r, 32, HEX)}/{_uuid(r)}"
        + r.choice(["", f"/V2{_s(r, 43, ALNUM + '_-')}"])
    )


# family -> draws (env variable name, token)
Maker = Callable[[random.Random], tuple[str, str]]
FAMILIES: dict[str, Maker] = {
    "heroku": lambda r: r.choice(
        [("HEROKU_API_KEY", _uuid(r)), ("HEROKU_API_KEY", "HRKU-AA" + _s(r, 58, ALNUM + "_-"))]
    ),
    "hubspot": lambda r: r.choice(
        [
            ("HUBSPOT_API_KEY", _uuid(r)),
            ("HUBSPOT_ACCESS_TOKEN", f"pat-{r.choice(['na1', 'eu1', 'na2'])}-{_uuid(r)}"),
        ]
    ),
    "snyk": lambda r: ("SNYK_TOKEN", _uuid(r)),
    "sentry": _sentry,
    "linear": lambda r: r.choice(
        [
            ("LINEAR_API_KEY", "lin_api_" + _s(r, 40)),
            ("LINEAR_TOKEN", "lin_oauth_" + _s(r, 64, HEX)),
            ("LINEAR_CLIENT_SECRET", _s(r, 32, HEX)),
        ]
    ),
    "facebook": lambda r: r.choice(
        [
            ("FACEBOOK_ACCESS_TOKEN", "EAA" + r.choice("BGIJ") + _s(r, r.randint(120, 200))),
            ("FACEBOOK_APP_SECRET", _s(r, 32, HEX)),
        ]
    ),
    "digitalocean": lambda r: (
        "DIGITALOCEAN_TOKEN",
        r.choice(["dop_v1_", "doo_v1_", "dor_v1_"]) + _s(r, 64, HEX),
    ),
    "new-relic": lambda r: r.choice(
        [
            ("NEW_RELIC_API_KEY", "NRAK-" + _s(r, 27, UPPER_DIGITS)),
            ("NEW_RELIC_INSERT_KEY", "NRII-" + _s(r, 32, ALNUM + "_-")),
            ("NEW_RELIC_LICENSE_KEY", _s(r, 36, HEX) + "NRAL"),
        ]
    ),
    "flutterwave": lambda r: r.choice(
        [
            ("FLW_SECRET_KEY", f"FLWSECK{r.choice(['', '_TEST'])}-{_s(r, 32, HEX)}-X"),
            ("FLW_PUBLIC_KEY", f"FLWPUBK{r.choice(['', '_TEST'])}-{_s(r, 32, HEX)}-X"),
            ("FLW_ENCRYPTION_KEY", f"FLWSECK_TEST{_s(r, 12, HEX)}"),
        ]
    ),
    "teams-webhook": lambda r: ("TEAMS_WEBHOOK_URL", _teams(r)),
    "curl-bearer": lambda r: ("API_TOKEN", _s(r, r.randint(24, 64), ALNUM + "_-")),
}

CONTEXTS = (
    "{K}={t}\n",  # an env file
    "export {K}='{t}'\n",
    "{k}: {t}\n",  # YAML
    '  {k}: "{t}"\n',
    '{{"{k}": "{t}", "epochs": 3}}\n',  # JSON
    '{k} = "{t}"\n',  # Python
    "client = Client({k}='{t}')\n",
    'curl -s -H "Authorization: Bearer {t}" https://api.example.com/v2/me\n',  # curl
)
CURL_ONLY = ("curl-bearer",)
CURL_CONTEXTS = (
    'curl -s -H "Authorization: Bearer {t}" https://api.example.com/v2/me\n',
    "curl --header 'Authorization: token {t}' https://git.example.com/api/v1/user\n",
    'curl -X POST -H "Content-Type: application/json" -H "X-API-Key: {t}" -d @b.json '
    "https://api.example.com/items\n",
    "curl -fsSL -H 'Authorization: Bearer {t}' -o model.bin https://files.example.com/m\n",
)


def tokens(family: str, n: int, seed: int = SEED) -> list[tuple[str, str]]:
    """``n`` (line, token) samples of ``family``, each in one of its contexts."""
    r = random.Random(f"{seed}:{family}")
    out = []
    contexts = CURL_CONTEXTS if family in CURL_ONLY else CONTEXTS
    for i in range(n):
        env, tok = FAMILIES[family](r)
        line = contexts[i % len(contexts)].format(K=env, k=env.lower(), t=tok)
        out.append((line, tok))
    return out


def ordinary_lines(seed: int = SEED) -> list[str]:
    """Lines full of hex digests, UUIDs and SHAs that no rule may report."""
    r = random.Random(seed)
    lines = []
    for i in range(40):
        u, sha = _uuid(r), hashlib.sha1(str(i).encode()).hexdigest()
        md5 = hashlib.md5(str(i).encode()).hexdigest()  # noqa: S324 - a look-alike, not security
        sha256 = hashlib.sha256(str(i).encode()).hexdigest()
        lines += [
            f"run_id: {u}\n",
            f'{{"dataset_id": "{u}", "split": "train", "rows": {r.randint(10, 99999)}}}\n',
            f"2026-11-30 12:00:{i % 60:02d} INFO step={i * 50} loss=1.{i:03d} request_id={u}\n",
            f"commit {sha}\nAuthor: Ada <ada@example.com>\n",
            f'revision = "{sha}"\n',
            f"sha256: {sha256}\n",
            f"  md5: {md5}\n",
            f"wandb: Syncing run {u[:8]} (id {u})\n",
            f"HEROKU_APP_ID={u}\n",
            f"sentry_release: {sha}\n",
            f"SNYK_ORG_ID={u}\n",
            f"hubspot_portal_id: {r.randint(10**6, 10**8)}\n",
            f"linear_warmup_steps: {r.randint(10, 999)}  # nn.Linear checksum {md5}\n",
            f"facebook_app_id = {r.randint(10**14, 10**15)}\n",
            f'curl -s -H "Authorization: Bearer $HF_TOKEN" https://hf.co/api/whoami-v2 # {u}\n',
            f"session {u} trace {sha256[:32]} span {sha[:16]}\n",
        ]
    return lines
