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

LOWER_DIGITS = string.ascii_lowercase + string.digits
DIGITS = string.digits
URLSAFE = ALNUM + "_-"


def _k(env: str, make: Callable[[random.Random], str]) -> Maker:
    return lambda r: (env, make(r))


# Families whose tokens carry a shape of their own, one maker per documented format.
FAMILIES.update(
    {
        "github": _k(
            "GITHUB_TOKEN",
            lambda r: (
                r.choice(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]) + _s(r, 36)
                if r.random() < 0.7
                else f"github_pat_{_s(r, 22)}_{_s(r, 59)}"
            ),
        ),
        "gitlab": _k(
            "GITLAB_TOKEN",
            lambda r: (
                r.choice(["glpat-", "gldt-", "glrt-", "glsoat-", "glft-", "glffct-"])
                + _s(r, 20, URLSAFE)
            ),
        ),
        "slack": _k(
            "SLACK_BOT_TOKEN",
            lambda r: f"xox{r.choice('bp')}-{_s(r, 12, DIGITS)}-{_s(r, 12, DIGITS)}-{_s(r, 24)}",
        ),
        "stripe": _k(
            "STRIPE_SECRET_KEY",
            lambda r: r.choice(["sk_live_", "rk_live_", "sk_test_"]) + _s(r, r.choice([24, 99])),
        ),
        "twilio": lambda r: r.choice(
            [("TWILIO_API_KEY", "SK" + _s(r, 32, HEX)), ("TWILIO_AUTH_TOKEN", _s(r, 32, HEX))]
        ),
        "sendgrid": _k(
            "SENDGRID_API_KEY", lambda r: f"SG.{_s(r, 22, URLSAFE)}.{_s(r, 43, URLSAFE)}"
        ),
        "mailgun": _k("MAILGUN_API_KEY", lambda r: "key-" + _s(r, 32, HEX)),
        "mailchimp": _k("MAILCHIMP_KEY", lambda r: f"{_s(r, 32, HEX)}-us{r.randint(1, 21)}"),
        "npm": _k("NPM_TOKEN", lambda r: "npm_" + _s(r, 36)),
        "pypi": _k(
            "PYPI_TOKEN", lambda r: "pypi-AgEIcHlwaS5vcmc" + _s(r, r.randint(60, 180), URLSAFE)
        ),
        "docker": _k("DOCKER_TOKEN", lambda r: "dckr_pat_" + _s(r, 27, URLSAFE)),
        "vault": _k(
            "VAULT_TOKEN",
            lambda r: (
                "hvs." + _s(r, r.randint(90, 120), URLSAFE)
                if r.random() < 0.7
                else "s." + _s(r, 24)
            ),
        ),
        "terraform": _k("TFE_TOKEN", lambda r: f"{_s(r, 14)}.atlasv1.{_s(r, 67, URLSAFE)}"),
        "grafana": _k(
            "GRAFANA_TOKEN",
            lambda r: r.choice(
                [f"glsa_{_s(r, 32)}_{_s(r, 8, HEX)}", "glc_" + _s(r, 120, ALNUM + "+/") + "=="]
            ),
        ),
        "databricks": _k("DATABRICKS_TOKEN", lambda r: "dapi" + _s(r, 32, HEX)),
        "doppler": _k("DOPPLER_TOKEN", lambda r: f"dp.{r.choice(['pt', 'st', 'ct'])}.{_s(r, 43)}"),
        "dynatrace": _k(
            "DT_API_TOKEN", lambda r: f"dt0c01.{_s(r, 24, UPPER_DIGITS)}.{_s(r, 64, UPPER_DIGITS)}"
        ),
        "shopify": _k(
            "SHOPIFY_TOKEN",
            lambda r: r.choice(["shpat_", "shpca_", "shppa_", "shpss_"]) + _s(r, 32, HEX),
        ),
        "atlassian": _k("JIRA_API_TOKEN", lambda r: "ATATT3" + _s(r, 186, URLSAFE)),
        "postman": _k("POSTMAN_API_KEY", lambda r: f"PMAK-{_s(r, 24, HEX)}-{_s(r, 34, HEX)}"),
        "pulumi": _k("PULUMI_ACCESS_TOKEN", lambda r: "pul-" + _s(r, 40, HEX)),
        "planetscale": _k(
            "PLANETSCALE_TOKEN",
            lambda r: r.choice(["pscale_tkn_", "pscale_pw_"]) + _s(r, 43, URLSAFE),
        ),
        "prefect": _k("PREFECT_API_KEY", lambda r: "pnu_" + _s(r, 36)),
        "readme": _k("README_API_KEY", lambda r: "rdme_" + _s(r, 70, LOWER_DIGITS)),
        "rubygems": _k("GEM_HOST_API_KEY", lambda r: "rubygems_" + _s(r, 48, HEX)),
        "scalingo": _k("SCALINGO_API_TOKEN", lambda r: "tk-us-" + _s(r, 48, URLSAFE)),
        "sourcegraph": _k("SRC_ACCESS_TOKEN", lambda r: f"sgp_{_s(r, 16, HEX)}_{_s(r, 40, HEX)}"),
        "flyio": _k(
            "FLY_API_TOKEN",
            lambda r: r.choice(
                ["fo1_" + _s(r, 43, URLSAFE), "fm2_" + _s(r, 300, ALNUM + "+/") + "="]
            ),
        ),
        "frameio": _k("FRAMEIO_TOKEN", lambda r: "fio-u-" + _s(r, 64)),
        "age": _k(
            "AGE_IDENTITY",
            lambda r: "AGE-SECRET-KEY-1" + _s(r, 58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"),
        ),
        "openai": _k(
            "OPENAI_API_KEY",
            lambda r: (
                "sk-proj-" + _s(r, 74, URLSAFE) + "T3BlbkFJ" + _s(r, 74, URLSAFE)
                if r.random() < 0.5
                else f"sk-{_s(r, 20)}T3BlbkFJ{_s(r, 20)}"
            ),
        ),
        "anthropic": _k("ANTHROPIC_API_KEY", lambda r: "sk-ant-api03-" + _s(r, 93, URLSAFE) + "AA"),
        "huggingface": _k(
            "HF_TOKEN", lambda r: r.choice(["hf_", "api_org_"]) + _s(r, 34, string.ascii_letters)
        ),
        "google": _k(
            "GOOGLE_API_KEY",
            lambda r: (
                "AIza" + _s(r, 35, URLSAFE) if r.random() < 0.7 else "GOCSPX-" + _s(r, 28, URLSAFE)
            ),
        ),
        "gcp-service-account": _k(
            "GOOGLE_CREDENTIALS",
            lambda r: (
                "-----BEGIN PRIVATE KEY-----\\n"
                + _s(r, 64, ALNUM + "+/")
                + "\\n"
                + _s(r, 64, ALNUM + "+/")
            ),
        ),
        "aws": _k(
            "AWS_ACCESS_KEY_ID",
            lambda r: r.choice(["AKIA", "ASIA"]) + _s(r, 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
        ),
        "azure-ad": _k(
            "AZURE_CLIENT_SECRET",
            lambda r: f"{_s(r, 3)}{r.randint(0, 9)}Q~{_s(r, 34, ALNUM + '_~.-')}",
        ),
        "alibaba": _k("ALIBABA_CLOUD_ACCESS_KEY_ID", lambda r: "LTAI" + _s(r, 20)),
        "cloudflare": lambda r: r.choice(
            [
                ("CLOUDFLARE_API_KEY", _s(r, 37, HEX)),
                ("CLOUDFLARE_ORIGIN_CA_KEY", f"v1.0-{_s(r, 24, HEX)}-{_s(r, 146, HEX)}"),
            ]
        ),
        "discord": lambda r: r.choice(
            [
                (
                    "DISCORD_BOT_TOKEN",
                    f"{r.choice('MN')}{_s(r, 25, URLSAFE)}."
                    f"{_s(r, 6, URLSAFE)}.{_s(r, 38, URLSAFE)}",
                ),
                (
                    "DISCORD_WEBHOOK",
                    f"https://discord.com/api/webhooks/{_s(r, 18, DIGITS)}/{_s(r, 68, URLSAFE)}",
                ),
            ]
        ),
        "telegram": _k(
            "TELEGRAM_BOT_TOKEN",
            lambda r: f"{_s(r, r.randint(8, 10), DIGITS)}:AA{_s(r, 33, URLSAFE)}",
        ),
        "notion": _k(
            "NOTION_TOKEN",
            lambda r: (
                f"ntn_{_s(r, 11, DIGITS)}{_s(r, 35)}" if r.random() < 0.7 else "secret_" + _s(r, 43)
            ),
        ),
        "airtable": _k("AIRTABLE_TOKEN", lambda r: f"pat{_s(r, 14)}.{_s(r, 64, HEX)}"),
        "asana": _k(
            "ASANA_PAT", lambda r: f"2/{_s(r, 16, DIGITS)}/{_s(r, 16, DIGITS)}:{_s(r, 32, HEX)}"
        ),
        "beamer": _k("BEAMER_API_KEY", lambda r: "b_" + _s(r, 44, URLSAFE)),
        "clojars": _k("CLOJARS_TOKEN", lambda r: "CLOJARS_" + _s(r, 60, LOWER_DIGITS)),
        "duffel": _k(
            "DUFFEL_TOKEN", lambda r: f"duffel_{r.choice(['test', 'live'])}_{_s(r, 43, URLSAFE)}"
        ),
        "easypost": _k("EASYPOST_API_KEY", lambda r: r.choice(["EZAK", "EZTK"]) + _s(r, 54)),
        "gocardless": _k("GOCARDLESS_ACCESS_TOKEN", lambda r: "live_" + _s(r, 40, URLSAFE)),
        "intra42": _k(
            "INTRA_CLIENT_SECRET", lambda r: f"s-s4t2{r.choice(['ud', 'af'])}-{_s(r, 64, HEX)}"
        ),
        "artifactory": _k("ARTIFACTORY_API_KEY", lambda r: "AKCp" + _s(r, 69)),
        "launchdarkly": _k("LAUNCHDARKLY_SDK_KEY", lambda r: r.choice(["sdk-", "api-"]) + _uuid(r)),
        "lob": _k("LOB_API_KEY", lambda r: r.choice(["live_", "test_"]) + _s(r, 35, HEX)),
        "okta": _k("OKTA_API_TOKEN", lambda r: "00" + _s(r, 40, URLSAFE)),
        "plaid": _k(
            "PLAID_ACCESS_TOKEN",
            lambda r: f"access-{r.choice(['sandbox', 'production'])}-{_uuid(r)}",
        ),
        "typeform": _k("TYPEFORM_TOKEN", lambda r: "tfp_" + _s(r, 59, URLSAFE)),
        "yandex": _k(
            "YANDEX_API_KEY",
            lambda r: (
                "AQVN" + _s(r, 36, URLSAFE) if r.random() < 0.6 else "y0_" + _s(r, 55, URLSAFE)
            ),
        ),
        "square": _k(
            "SQUARE_ACCESS_TOKEN",
            lambda r: (
                "EAAA" + _s(r, 60, URLSAFE) if r.random() < 0.7 else "sq0csp-" + _s(r, 43, URLSAFE)
            ),
        ),
        "twitter": _k("TWITTER_BEARER_TOKEN", lambda r: "A" * 22 + _s(r, 90)),
        "perplexity": _k("PPLX_API_KEY", lambda r: "pplx-" + _s(r, 48)),
        "openshift": _k("OPENSHIFT_TOKEN", lambda r: "sha256~" + _s(r, 43, URLSAFE)),
        "sonarqube": _k(
            "SONAR_TOKEN", lambda r: r.choice(["squ_", "sqp_", "sqa_"]) + _s(r, 40, HEX)
        ),
        "brevo": _k("BREVO_API_KEY", lambda r: f"xkeysib-{_s(r, 64, HEX)}-{_s(r, 16)}"),
        "shippo": _k(
            "SHIPPO_TOKEN", lambda r: f"shippo_{r.choice(['live', 'test'])}_{_s(r, 40, HEX)}"
        ),
        "mapbox": _k(
            "MAPBOX_SECRET_TOKEN", lambda r: f"sk.eyJ1Ijoi{_s(r, 60, URLSAFE)}.{_s(r, 22, URLSAFE)}"
        ),
        "maxmind": _k("MAXMIND_LICENSE_KEY", lambda r: f"{_s(r, 6)}_{_s(r, 29)}_mmk"),
        "adafruit": _k("ADAFRUIT_IO_KEY", lambda r: "aio_" + _s(r, 28)),
        "infracost": _k("INFRACOST_API_KEY", lambda r: "ico-" + _s(r, 32)),
        "clickhouse": _k("CLICKHOUSE_SECRET", lambda r: "4b1d" + _s(r, 38)),
        "settlemint": _k(
            "SETTLEMINT_TOKEN", lambda r: f"sm_{r.choice(['aat', 'pat', 'sat'])}_{_s(r, 16)}"
        ),
        "harness": _k(
            "HARNESS_API_KEY", lambda r: f"pat.{_s(r, 22, URLSAFE)}.{_s(r, 24)}.{_s(r, 20)}"
        ),
        "octopus": _k("OCTOPUS_API_KEY", lambda r: "API-" + _s(r, 26, UPPER_DIGITS)),
        "defined-networking": _k("DNKEY", lambda r: f"dnkey-{_s(r, 26)}-{_s(r, 52)}"),
        "dropbox": _k("DROPBOX_TOKEN", lambda r: "sl." + _s(r, 135, URLSAFE)),
        "netlify": _k("NETLIFY_AUTH_TOKEN", lambda r: "nfp_" + _s(r, 36)),
        "adobe": _k("ADOBE_CLIENT_SECRET", lambda r: "p8e-" + _s(r, 32)),
        "onepassword": _k(
            "OP_SERVICE_ACCOUNT_TOKEN", lambda r: "ops_eyJ" + _s(r, 300, ALNUM + "+/")
        ),
        "sidekiq": _k("BUNDLE_GEMS__CONTRIBSYS__COM", lambda r: f"{_s(r, 8, HEX)}:{_s(r, 8, HEX)}"),
        "private-key": _k(
            "SSH_KEY",
            lambda r: (
                f"-----BEGIN {r.choice(['RSA', 'OPENSSH', 'EC'])} PRIVATE KEY"
                f"-----\\n{_s(r, 64, ALNUM + '+/')}"
            ),
        ),
        "jwt": _k("SESSION_JWT", lambda r: _jwt(r)),
    }
)


def _jwt(r: random.Random) -> str:
    def part(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    head = part({"alg": r.choice(["HS256", "RS256"]), "typ": "JWT"})
    body = part({"sub": _s(r, 10), "iat": r.randint(10**9, 2 * 10**9)})
    return f"{head}.{body}.{_s(r, 43, URLSAFE)}"


# The eight places a token leaks in: an env file, YAML, JSON, Python code, a shell line
# with curl, TOML/INI, a log line, a JSONL chat record.
CONTEXTS = (
    "{K}={t}\n",
    '  {k}: "{t}"\n',
    '{{"{k}": "{t}", "epochs": 3}}\n',
    "client = Client({k}='{t}')\n",
    "{K}='{t}' curl -sS -H \"Authorization: Bearer ${K}\" https://api.example.com/v1/me\n",
    '[{fam}]\n{k} = "{t}"\n',
    "2026-12-01 10:00:00 INFO loaded {k}={t} from .env\n",
    '{{"messages": [{{"role": "user", "content": "my .env has {K}={t}, why does it fail?"}}]}}\n',
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
        line = contexts[i % len(contexts)].format(K=env, k=env.lower(), t=tok, fam=family)
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


def lookalike_lines(seed: int = SEED) -> list[str]:
    """The false positives a secret scanner meets, written in each family's shape:
    placeholders (``xxxx``, ``<your-token>``, ``YOUR_KEY_HERE``, ``...``), environment
    references, tokens cut short in prose, and the usual digests, UUIDs, base64 images
    and ``sk-...`` mentioned in documentation."""
    r = random.Random(f"{seed}:lookalikes")
    lines = []
    for fam in FAMILIES:
        env, tok = FAMILIES[fam](r)
        head = tok[:8]
        lines += [
            f"{env}={head}{'x' * max(8, len(tok) - 8)}\n",
            f"{env}=<your-{fam}-token>\n",
            f'{env.lower()}: "${{{env}}}"\n',
            f"{env}={head}YOUR_TOKEN_HERE\n",
            f"Set {env} to a token like `{head}...` from the {fam} dashboard.\n",
            f"{env} = os.environ['{env}']\n",
            f"{env}={head}{tok[8 : 8 + max(2, (len(tok) - 8) // 3)]}\n",  # cut short
        ]
    for i in range(30):
        u = _uuid(r)
        lines += [
            f"request {u} took {r.randint(3, 900)} ms\n",
            f"sha256 {hashlib.sha256(str(i).encode()).hexdigest()}  model.safetensors\n",
            f'"image": "data:image/png;base64,{base64.b64encode(r.randbytes(120)).decode()}"\n',
            f"Keys start with sk- and look like sk-...{_s(r, 4)}; never paste them here.\n",
            f"md5={hashlib.md5(str(i).encode()).hexdigest()}  # noqa: S324\n",  # noqa: S324
        ]
    return lines
