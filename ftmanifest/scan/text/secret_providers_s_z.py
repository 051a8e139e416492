"""Secret rules for the providers whose tokens carry a shape of their own, S to Z.

Layer: judging rooms - pure core (scan rules).  The second half of
``secret_providers`` (split for size; the same builders and the same rules for
writing them: the provider's documented prefix, alphabet and length, a Hyperscan
gate where the prefix is short or common).  The examples are drawn at import time
from a fixed seed; nothing is copied.
"""

from __future__ import annotations

import random
import string

from ftmanifest.scan.text import secrets as v
from ftmanifest.scan.text.secret_providers import AN, HX, _gated, _p
from ftmanifest.scan.text.secret_rules import Rule

_rng = random.Random("ftmanifest-secret-providers-s-z")


def _r(n: int, alpha: str = AN) -> str:
    return "".join(_rng.choice(alpha) for _ in range(n))


PROVIDER_RULES_S_Z: tuple[Rule, ...] = (
    _p(
        "secret.sendgrid-key",
        "SendGrid API key (SG.22.43; 66 after SG. in any of its characters)",
        r"SG\.[A-Za-z0-9=_\-.]{66}",
        ("sg.",),
        f"SG.{_r(22)}.{_r(43)}",
        validator=v.mixed_token,
        **_gated(r"SG\.[A-Za-z0-9=_\-.]{66}", 70),
    ),
    _p(
        "secret.brevo-key",
        "Brevo (Sendinblue) API or SMTP key (xkeysib-, xsmtpsib-)",
        r"x(?:keysib|smtpsib)-[0-9a-f]{64}-[A-Za-z0-9]{16}",
        ("xkeysib-", "xsmtpsib-"),
        f"xkeysib-{_r(64, HX)}-{_r(16)}",
    ),
    _p(
        "secret.settlemint-token",
        "SettleMint access token (sm_aat_, sm_pat_, sm_sat_)",
        r"sm_(?:aat|pat|sat)_[A-Za-z0-9]{16}",
        ("sm_aat_", "sm_pat_", "sm_sat_"),
        "sm_pat_" + _r(16),
    ),
    _p(
        "secret.shippo-token",
        "Shippo API token (shippo_live_, shippo_test_)",
        r"shippo_(?:live|test)_[0-9a-fA-F]{40}",
        ("shippo_",),
        "shippo_live_" + _r(40, HX),
    ),
    _p(
        "secret.shopify-token",
        "Shopify access token or shared secret (shpat_, shpca_, ...)",
        r"shp(?:at|ca|pa|ss)_[0-9a-fA-F]{32}",
        ("shpat_", "shpca_", "shppa_", "shpss_"),
        "shpat_" + _r(32, HX),
    ),
    _p(
        "secret.sidekiq-credentials",
        "Sidekiq Enterprise gem credentials (contribsys)",
        r"contribsys__com[\"']?\s{0,3}[:=]\s{0,3}[\"']?([0-9a-f]{8}:[0-9a-f]{8})",
        ("contribsys__com",),
        f"BUNDLE_ENTERPRISE__CONTRIBSYS__COM={_r(8, HX)}:{_r(8, HX)}",
        back=0,
        group=1,
        ignore_case=True,
        lookalike="BUNDLE_GEMS__CONTRIBSYS__COM=",
    ),
    _p(
        "secret.sonarqube-token",
        "SonarQube token (squ_, sqp_, sqa_)",
        r"sq[uap]_[0-9a-f]{40}",
        ("squ_", "sqp_", "sqa_"),
        "squ_" + _r(40, HX),
    ),
    _p(
        "secret.sourcegraph-token",
        "Sourcegraph access token (sgp_)",
        r"sgp_(?:[0-9a-fA-F]{16}_|local_)?[0-9a-fA-F]{40}",
        ("sgp_",),
        f"sgp_{_r(16, HX)}_{_r(40, HX)}",
    ),
    _p(
        "secret.square-token",
        "Square access token or OAuth secret (EAAA, sq0atp-, sq0csp-)",
        r"EAAA[A-Za-z0-9_\-]{60}|sq0atp-[A-Za-z0-9_\-]{22}|sq0csp-[A-Za-z0-9_\-]{43}",
        ("eaaa", "sq0atp-", "sq0csp-"),
        "EAAA" + _r(60),
        validator=v.unembedded_token,
        **_gated(r"(?:EAAA[A-Za-z0-9_\-]{60}|sq0atp-|sq0csp-)", 66),
    ),
    Rule(
        "secret.stripe-test-key",
        "secret",
        "Stripe test or sandbox secret key (sk_test_, rk_test_): no money moves, still a key",
        r"(?:sk|rk)_(?:test|prod)_[0-9A-Za-z]{24,99}",
        ("sk_test_", "rk_test_", "sk_prod_"),
        validator=v.provider_token,
        fwd=110,
        severity="warning",
        true_positives=("STRIPE_KEY=sk_test_" + _r(24),),
        false_positives=("sk_test_xxxxxxxxxxxxxxxxxxxxxxxx", "sk_test_<your-key>"),
    ),
    _p(
        "secret.telegram-bot-token",
        "Telegram bot token (bot id, colon, AA…)",
        r"[0-9]{5,16}:AA[A-Za-z0-9_\-]{33}",
        (":aa",),
        f"{_r(10, string.digits)}:AA{_r(33, AN + '_-')}",
        back=16,
        back_chars="0-9",
        lookalike="123456:AA",
        gate=r"[0-9]{5}:AA[A-Za-z0-9_\-]{33}",
        gate_len=40,
    ),
    _p(
        "secret.twitter-bearer-token",
        "Twitter (X) app bearer token (22 A, then the token)",
        r"A{22}([A-Za-z0-9%]{80,120})",
        ("a" * 22,),
        "A" * 22 + _r(100),
        validator=v.padded_token,
        group=1,
        lookalike="A" * 22,
        **_gated(r"A{22}[A-Za-z0-9%]{80}", 110),
    ),
    _p(
        "secret.typeform-token",
        "Typeform personal token (tfp_)",
        r"tfp_[A-Za-z0-9_\-.=]{59}",
        ("tfp_",),
        "tfp_" + _r(59),
    ),
    _p(
        "secret.yandex-key",
        "Yandex Cloud API key (AQVN), IAM token (t1.), OAuth token (y0_)",
        r"AQVN[A-Za-z0-9_\-]{35,38}|t1\.[A-Za-z0-9_\-]{8,200}={0,2}\.[A-Za-z0-9_\-]{86}={0,2}"
        r"|y0_[A-Za-z0-9_\-]{55,60}",
        ("aqvn", "t1.", "y0_"),
        "AQVN" + _r(36),
        fwd=300,
        **_gated(r"(?:AQVN[A-Za-z0-9_\-]{35}|t1\.[A-Za-z0-9_\-]{8}|y0_[A-Za-z0-9_\-]{55})", 60),
    ),
    _p(
        "secret.adafruit-io-key",
        "Adafruit IO key (aio_)",
        r"aio_[A-Za-z0-9]{28}",
        ("aio_",),
        "aio_" + _r(28),
        **_gated(r"aio_[A-Za-z0-9]{28}", 32),
    ),
    Rule(
        "secret.discord-webhook",
        "secret",
        "Discord webhook URL",
        r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/"
        r"[A-Za-z0-9_\-]{60,70}",
        ("discord.com/api/webhooks/", "discordapp.com/api/webhooks/"),
        validator=v.provider_token,
        back=16,
        back_chars=r"a-z:/.",
        fwd=120,
        true_positives=(f"https://discord.com/api/webhooks/{_r(18, string.digits)}/{_r(68)}",),
        false_positives=("https://discord.com/api/webhooks/<id>/<token>",),
    ),
)
