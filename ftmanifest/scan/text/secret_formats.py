"""Secret rules by the providers' documented token formats, and by a provider's
word next to a value of its shape.

Layer: judging rooms - pure core (scan rules).  Two kinds of rule live here:

- **prefixed tokens** (``dop_v1_…``, ``NRAK-…``, ``FLWSECK-…``, ``HRKU-AA…``,
  ``lin_api_…``, ``sntrys_…``): the prefix is the keyword, the documented
  alphabet and length the regex;
- **keyed values**: providers whose keys carry no prefix (Heroku, HubSpot and
  Snyk keys are UUIDs, Sentry and Facebook secrets are hex).  A UUID or a hex
  string is a secret only after that provider's word and an assignment
  (``HEROKU_API_KEY=…``, ``"snykToken": "…"``); a key that names an identifier
  or a digest (``SNYK_ORG_ID``, ``sentry_project``) stays quiet.  The generic
  assignment rule leaves UUIDs and hex digests alone, so these rules are the
  only way such keys are found.

The rules are written from the providers' documentation of their formats; the
examples below are made up.  Each is run by ``tests/scan/secret_formats_test.py``.
"""

from __future__ import annotations

from ftmanifest.scan.text import secrets as v
from ftmanifest.scan.text.secret_compound import COMPOUND_RULES
from ftmanifest.scan.text.secret_contexts import CONTEXT_RULES, CURL_CMD
from ftmanifest.scan.text.secret_keyed import KEYED_RULES
from ftmanifest.scan.text.secret_providers import PROVIDER_RULES
from ftmanifest.scan.text.secret_providers_s_z import PROVIDER_RULES_S_Z
from ftmanifest.scan.text.secret_rules import Rule
from ftmanifest.scan.text.secret_shapes import UUID, keyed, prefixed

_U1, _U2 = "41ca7b1b-8f80-4b8a-972c-d4f693295fc1", "b6848487-3c60-4639-a312-1ca32d7f5e2a"
_H32, _H64 = (
    "43423ceaec99f640ed793615c3ac1b56",
    ("57458dcd0e913000ab2ee3e2f56267b1cd180acd27ea3126463478a64d122c08"),
)
_A = "JuiJTItY8GmTWBkj9Z3QgFPonWGJ2GjEnbeBeiFRk8idSJs7vSvg1prqPa74K5sO"
_A2 = "iwPBlmzY02YMrbxgsKsLFShXhojvEIQuYBhXaYxBA4uaZL6ROzEBMqjXxmDK7To1"
_UP = "88VWWNK56FOLT1EPQ417Q3FZHTRDYW0LRUL8YED8"

FORMAT_RULES: tuple[Rule, ...] = (
    (
        prefixed(
            "secret.heroku-api-key",
            "Heroku API key (HRKU-AA)",
            r"HRKU-AA[0-9A-Za-z_\-]{58}",
            ("hrku-aa",),
            ("HEROKU_API_KEY=HRKU-AA" + _A[:58],),
            ("HRKU-AA<your-key>", "HRKU-AA" + "x" * 58),
        ),
        keyed(
            "secret.heroku-uuid-key",
            "Heroku API key (a UUID) after the word heroku",
            ("heroku",),
            UUID,
            (f"HEROKU_API_KEY={_U1}", f'herokuKey := "{_U2}"', f"heroku_token: '{_U1}'"),
            (f"HEROKU_APP_ID={_U1}", f"run_id = {_U1}", "heroku_api_key = ${HEROKU_API_KEY}"),
        ),
        prefixed(
            "secret.hubspot-private-app-token",
            "HubSpot private app token (pat-na1-, pat-eu1-)",
            r"pat-(?:na|eu|ap)[0-9]-" + UUID,
            ("pat-na", "pat-eu", "pat-ap"),
            (f"HUBSPOT_TOKEN=pat-na1-{_U1}",),
            ("pat-na1-<token>", "pat-na1-00000000-0000-0000-0000-000000000000"),
        ),
        keyed(
            "secret.hubspot-api-key",
            "HubSpot API key (a UUID) after the word hubspot",
            ("hubspot",),
            UUID,
            (f'{{"hubspot_api_key": "{_U2}"}}', f"HUBSPOT_KEY={_U1}"),
            (f"hubspot_portal_id: {_U1}", "hubspot_key = os.environ['HUBSPOT_KEY']"),
        ),
        keyed(
            "secret.snyk-token",
            "Snyk API token (a UUID) after the word snyk",
            ("snyk",),
            UUID,
            (f"SNYK_TOKEN={_U1}", f"snyk_token: {_U2}"),
            (f"SNYK_ORG_ID={_U1}", f"snyk_org: {_U2}"),
        ),
        prefixed(
            "secret.sentry-org-token",
            "Sentry organisation auth token (sntrys_)",
            r"sntrys_eyJ[A-Za-z0-9+/]{30,400}={0,2}_[A-Za-z0-9+/]{43}",
            ("sntrys_",),
            (
                "SENTRY_AUTH_TOKEN=sntrys_eyJpYXQiOjE3MzAwMDAwMDAuMCwidXJsIjoiaHR0cHM6Ly9zZW50cnkuaW8i"
                "fQ==_" + _A[:43],
            ),
            ("sntrys_<token>", "sntrys_eyJ" + "x" * 40 + "_" + "x" * 43),
            fwd=500,
        ),
        prefixed(
            "secret.sentry-user-token",
            "Sentry user auth token (sntryu_)",
            r"sntryu_[0-9a-f]{64}",
            ("sntryu_",),
            ("SENTRY_AUTH_TOKEN=sntryu_" + _H64,),
            ("sntryu_" + "0" * 64, "sntryu_<token>"),
        ),
        Rule(
            "secret.sentry-dsn",
            "secret",
            "Sentry DSN (its key lets anyone send events; a secret key in it is an error)",
            r"([0-9a-f]{32})(:[0-9a-f]{32})?@[A-Za-z0-9.\-]{0,80}?sentry[A-Za-z0-9.\-]{0,80}"
            r"(?::[0-9]{1,5})?/[0-9]{1,12}",
            ("sentry",),
            validator=v.provider_token,
            back=160,
            back_chars=r"0-9a-zA-Z.:@\-",
            gate=r"[0-9a-f]{32}(?::[0-9a-f]{32})?@[A-Za-z0-9.\-]{0,80}sentry",
            gate_len=200,
            group=1,
            fwd=120,
            severity="warning",
            true_positives=(f"SENTRY_DSN=https://{_H32}@o4507.ingest.us.sentry.io/4507123",),
            false_positives=("https://public@sentry.example.com/1", "sentry_dsn: ${SENTRY_DSN}"),
        ),
        Rule(
            "secret.sentry-dsn-secret",
            "secret",
            "Sentry DSN with its secret key (key:secret@)",
            r"[0-9a-f]{32}:([0-9a-f]{32})@[A-Za-z0-9.\-]{0,80}?sentry[A-Za-z0-9.\-]{0,80}"
            r"(?::[0-9]{1,5})?/[0-9]{1,12}",
            ("sentry",),
            validator=v.provider_token,
            back=160,
            back_chars=r"0-9a-zA-Z.:@\-",
            gate=r"[0-9a-f]{32}:[0-9a-f]{32}@[A-Za-z0-9.\-]{0,80}sentry",
            gate_len=200,
            group=1,
            fwd=120,
            true_positives=(f"dsn = 'https://{_H32}:{_H64[:32]}@sentry.corp.net/12'",),
            false_positives=(f"https://{_H32}@o1.ingest.sentry.io/2",),
        ),
        keyed(
            "secret.sentry-token",
            "Sentry auth token (64 hex) after the word sentry",
            ("sentry",),
            "[0-9a-f]{64}",
            (f"SENTRY_AUTH_TOKEN={_H64}",),
            (f"sentry_release_sha: {_H64}", f"sentry_checksum = {_H64}"),
        ),
        prefixed(
            "secret.linear-api-key",
            "Linear API key (lin_api_) or OAuth token (lin_oauth_)",
            r"lin_(?:api_[A-Za-z0-9]{40}|oauth_[0-9a-f]{64})",
            ("lin_api_", "lin_oauth_"),
            ("LINEAR_API_KEY=lin_api_" + _A[:40], "lin_oauth_" + _H64),
            ("lin_api_<your key>", "lin_api_" + "x" * 40),
        ),
        keyed(
            "secret.linear-client-secret",
            "Linear OAuth client secret (32 hex) after the word linear and a credential word",
            ("linear",),
            "[0-9a-f]{32}",
            (f"LINEAR_CLIENT_SECRET={_H32}", f'linearSecret = "{_H32}"'),
            (f"linear_probe_md5 = {_H32}", f"linear: {_H32}", "nn.Linear(512, 512)"),
            credential_word=True,
        ),
        prefixed(
            "secret.facebook-access-token",
            "Facebook (Meta) access token (EAA…)",
            r"EAA[A-Za-z0-9]{90,400}",
            ("eaa",),
            ("FB_ACCESS_TOKEN=EAAG" + _A + _A2[:40],),
            ("EAAG" + "a" * 100, "iVBORw0KGgo+EAAG" + _A + _A2[:40] + "+/"),
            gate=r"EAA[A-Za-z0-9]{90}",
            gate_len=93,
            fwd=410,
            validator=v.unembedded_token,
        ),
        keyed(
            "secret.facebook-secret",
            "Facebook app secret (32 hex) or app token (id|secret) after the word facebook",
            ("facebook", "fb_app", "fb_secret", "fb_access", "fb_token"),
            r"[0-9a-f]{32}|[0-9]{15,16}(?:\||%7[Cc])[A-Za-z0-9_\-]{27,43}",
            (f"FACEBOOK_APP_SECRET={_H32}", f"fb_access_token = '4839201756391824|{_A[:27]}'"),
            (f"facebook_app_id = {_H32[:15]}", f"facebook_md5: {_H32}"),
        ),
        prefixed(
            "secret.digitalocean-token",
            "DigitalOcean personal, OAuth or refresh token (dop_v1_, doo_v1_, dor_v1_)",
            r"do[opr]_v1_[0-9a-f]{64}",
            ("dop_v1_", "doo_v1_", "dor_v1_"),
            ("DIGITALOCEAN_TOKEN=dop_v1_" + _H64, "doo_v1_" + _H64[::-1]),
            ("dop_v1_<token>", "dop_v1_" + "0" * 64),
        ),
        prefixed(
            "secret.new-relic-key",
            "New Relic user key (NRAK-), insert or query key (NRII-, NRIQ-), browser key (NRJS-)",
            r"NRAK-[A-Z0-9]{27}|NRI[IQ]-[A-Za-z0-9_\-]{32}|NRJS-[0-9a-f]{19}",
            ("nrak-", "nrii-", "nriq-", "nrjs-"),
            ("NEW_RELIC_API_KEY=NRAK-" + _UP[:27], "NRII-" + _A[:32], "NRJS-" + _H64[:19]),
            ("NRAK-XXXXXXXXXXXXXXXXXXXXXXXXXXX", "NRAK-short"),
        ),
        prefixed(
            "secret.new-relic-license-key",
            "New Relic ingest licence key (40 characters ending NRAL)",
            r"[0-9a-f]{36}NRAL",
            ("nral",),
            ("NEW_RELIC_LICENSE_KEY=" + _H64[:36] + "NRAL",),
            ("0" * 36 + "NRAL", "CENTRAL"),
            back=36,
            back_chars="0-9a-f",
        ),
        prefixed(
            "secret.flutterwave-secret-key",
            "Flutterwave secret key or encryption key (FLWSECK-, FLWSECK_TEST-)",
            r"FLWSECK(?:_TEST)?(?:-[0-9a-f]{32}-X|-?[0-9a-f]{12})",
            ("flwseck",),
            (
                "FLW_SECRET_KEY=FLWSECK_TEST-" + _H32 + "-X",
                "FLWSECK-" + _H32 + "-X",
                "FLW_ENCRYPTION_KEY=FLWSECK_TEST" + _H32[:12],
            ),  # fmt: skip
            ("FLWSECK_TEST-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-X", "FLWSECK-<key>"),
        ),
        Rule(
            "secret.flutterwave-public-key",
            "secret",
            "Flutterwave public key (FLWPUBK-): meant for clients, named so it is not mistaken",
            r"FLWPUBK(?:_TEST)?-[0-9a-f]{32}-X",
            ("flwpubk",),
            validator=v.provider_token,
            fwd=60,
            severity="warning",
            true_positives=("FLW_PUBLIC_KEY=FLWPUBK_TEST-" + _H32 + "-X",),
            false_positives=("FLWPUBK-<key>",),
        ),
        Rule(
            "secret.teams-webhook",
            "secret",
            "Microsoft Teams incoming webhook URL",
            r"https://[A-Za-z0-9\-]{1,63}\.webhook\.office\.com/webhookb2/"
            + UUID
            + "@"
            + UUID
            + r"/IncomingWebhook/[0-9a-fA-F]{32}/"
            + UUID
            + r"(?:/[A-Za-z0-9_\-]{20,80})?",
            ("webhook.office.com",),
            validator=v.provider_token,
            back=72,
            back_chars=r"A-Za-z0-9:/.\-",
            fwd=300,
            true_positives=(
                f"TEAMS_WEBHOOK=https://contoso.webhook.office.com/webhookb2/{_U1}@{_U2}"
                f"/IncomingWebhook/{_H32}/{_U2}",
            ),
            false_positives=("https://contoso.webhook.office.com/webhookb2/<id>",),
        ),
        Rule(
            "secret.curl-auth-header",
            "secret",
            "a token in a curl command's Authorization (Bearer, Basic, token) or API-key header",
            CURL_CMD + r"(?:-H|--header)[\s=]{1,3}[\"']?"
            r"(?:authorization:\s{0,3}(?:bearer|token|basic|api-token|apikey|api-key|digest)?"
            r"|(?![a-z\-]{0,12}[cx]srf)[a-z\-]{0,30}(?:api-?key|token):)\s{0,3}"
            r"([A-Za-z0-9_\-.~+/=:]{8,4000})",
            ("curl",),
            validator=v.header_token,
            gate=r"(?:-H|--header)[\s=]{1,3}[\"']?(?:authorization|[a-z\-]{0,30}(?:api-?key|token)):",
            gate_len=460,
            group=1,
            fwd=4500,
            ignore_case=True,
            true_positives=(
                f'curl -s -H "Authorization: Bearer {_A[:40]}" https://api.example.com/v1',
                f"curl --header 'X-API-Key: {_A2[:32]}' https://api.example.com",
                f'curl -X GET https://api.example.com/v1 \\\n  -H "Api-Token: {_A[:24]}"',
                f"# curl -X POST \\\n#   -H 'Authorization: Basic {_A2[:40]}='",
            ),
            false_positives=(
                'curl -H "Authorization: Bearer $TOKEN" https://api.example.com',
                'curl -H "Authorization: Bearer <token>" https://api.example.com',
                'curl -H "Content-Type: application/json" https://api.example.com',
                f'curl https://api.example.com\n-H "Authorization: Bearer {_A[:40]}"',
                f'curl -H "X-CSRF-Token: {_A[:40]}" https://api.example.com',
            ),
        ),
    )
    + PROVIDER_RULES
    + PROVIDER_RULES_S_Z
    + KEYED_RULES
    + COMPOUND_RULES
    + CONTEXT_RULES
)
