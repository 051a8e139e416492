"""A labelled secret corpus built from the providers' documented token formats.

Each family draws random tokens in its provider's documented shape and plants
them in the places ML work leaks them (an env file, a JSON config, a YAML
file, a shell line, a notebook cell, a log line); each also has hard
negatives: placeholders, documentation examples, truncated tokens,
look-alike identifiers.  Nothing here is copied from another tool's tests.
``measure()`` scans every sample with ftmanifest's text scanner and returns
recall per family and how many negatives were flagged.
"""

from __future__ import annotations

import base64
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
UPPER32 = string.ascii_uppercase + "234567"
LOWER_HEX = "0123456789abcdef"
DIGITS = string.digits


def _s(r: random.Random, n: int, alpha: str = ALNUM) -> str:
    return "".join(r.choice(alpha) for _ in range(n))


@dataclass(frozen=True)
class Family:
    name: str
    make: Callable[[random.Random], str]  # one token in the documented format
    negatives: tuple[str, ...]  # must not be reported as a secret


def _bedrock(r: random.Random) -> str:
    if r.random() < 0.5:
        inner = f"BedrockAPIKey-{_s(r, 4).lower()}-at-{_s(r, 12, DIGITS)}:{_s(r, 40)}"
        return "ABSK" + base64.b64encode(inner.encode()).decode()
    url = f"bedrock.amazonaws.com/?Action=CallWithBearerToken&X-Amz-Credential={_s(r, 20)}"
    return "bedrock-api-key-" + base64.b64encode((url + _s(r, 120)).encode()).decode()


def _slack(r: random.Random) -> str:
    return r.choice(
        [
            f"xoxb-{_s(r, 12, DIGITS)}-{_s(r, 13, DIGITS)}-{_s(r, 24)}",
            f"xoxp-{_s(r, 12, DIGITS)}-{_s(r, 12, DIGITS)}-{_s(r, 24)}",
            f"xapp-1-A{_s(r, 10, UPPER32)}-{_s(r, 13, DIGITS)}-{_s(r, 64, LOWER_HEX)}",
            f"xoxe.xoxp-1-{_s(r, 60)}",
            f"xoxe-1-{_s(r, 60)}",
        ]
    )


def _webhook(r: random.Random) -> str:
    team, hook = f"T{_s(r, 10, UPPER32)}", f"{_s(r, 10, UPPER32)}"
    return r.choice(
        [
            f"https://hooks.slack.com/services/{team}/B{hook}/{_s(r, 24)}",
            f"https://hooks.slack.com/workflows/{team}/A{hook}/{_s(r, 18, DIGITS)}/{_s(r, 24)}",
            f"https://hooks.slack.com/triggers/{team}/{_s(r, 13, DIGITS)}/{_s(r, 32, LOWER_HEX)}",
        ]
    )


GITLAB = ("glpat-", "gldt-", "glrt-", "glptt-", "glft-", "gloas-", "glcbt-", "glsoat-", "glimt-")
FAMILIES: tuple[Family, ...] = (
    Family(
        "aws-key-id",
        lambda r: r.choice(["AKIA", "ASIA", "ABIA", "ACCA"]) + _s(r, 16, UPPER32),
        ("AKIAIOSFODNN7EXAMPLE", "AKIA_ROLE_NAME_FIELD", "ASIAXXXXXXXXXXXXXXXX"),
    ),
    Family("aws-bedrock", _bedrock, ("ABSKQmVkcm9ja0FQSUtleS", "bedrock-api-key-<your key>")),
    Family(
        "github",
        lambda r: r.choice(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]) + _s(r, 36),
        ("ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "ghp_short1234", "ghp_${GITHUB_TOKEN}"),
    ),
    Family(
        "gitlab",
        lambda r: r.choice(GITLAB) + _s(r, 20, ALNUM + "_-"),
        ("glpat-xxxxxxxxxxxxxxxxxxxx", "gldt-<deploy-token>", "glrt-", "glpat-12345"),
    ),
    Family(
        "huggingface",
        lambda r: r.choice(["hf_", "api_org_"]) + _s(r, 34, string.ascii_letters),
        ("hf_hub_download", "hf_" + "x" * 34, "api_org_name", "HF_TOKEN=${HF_TOKEN}"),
    ),
    Family("slack-token", _slack, ("xoxb-your-token-here", "xoxo-hugs-and-kisses", "xapp-1-X")),
    Family(
        "slack-webhook",
        _webhook,
        (
            "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
            "https://api.slack.com/messaging/webhooks",
        ),
    ),
    Family(
        "azure-ad",
        lambda r: _s(r, 3) + r.choice(DIGITS) + "Q~" + _s(r, 34, ALNUM + "_~.-"),
        ("abc8Q~short", "Zx48Q~" + "x" * 34, "SQ~L query"),
    ),
    Family(
        "curl-password",
        lambda r: f"curl -s -u {_s(r, 6).lower()}:{_s(r, 14)} https://ci.example.com/api",
        (
            "curl -u $USER:$PASSWORD https://api.example.com",
            "curl --user admin https://x.io",
            "curl -u user:password https://api.example.com",
        ),
    ),
    Family(
        "planetscale",
        lambda r: (
            r.choice(["pscale_tkn_", "pscale_pw_", "pscale_oauth_"]) + _s(r, 43, ALNUM + "_-")
        ),
        ("pscale_pw_<your-password-here-xxxxxxxxxxxxxxx>",),
    ),
)

CONTEXTS = (
    "{t}\n",
    "API_TOKEN={t}\n",
    '{{"token": "{t}", "step": 120}}\n',
    "  secret: {t}\n",
    "export TOKEN='{t}'\n",
    '    "source": ["client = Client(\\"{t}\\")"]\n',
    "2026-11-30 12:00:01 INFO connecting with {t} to the cluster\n",
)


def measure(
    samples: int = 42, seed: int = 11
) -> tuple[dict[str, tuple[int, int]], tuple[int, int]]:
    """(family -> (found, planted)), (negatives flagged, negatives) over the corpus."""
    from ftmanifest.scan.text.text import scan_text

    r = random.Random(seed)
    per: dict[str, tuple[int, int]] = {}
    for fam in FAMILIES:
        hit = 0
        for i in range(samples):
            text = CONTEXTS[i % len(CONTEXTS)].format(t=fam.make(r))
            found = scan_text(text, path="corpus", pii=False)
            hit += any(f.kind == "secret" and f.severity == "error" for f in found)
        per[fam.name] = (hit, samples)
    flagged = total = 0
    for fam in FAMILIES:
        for neg in fam.negatives:
            for context in CONTEXTS[:3]:
                total += 1
                found = scan_text(context.format(t=neg), path="corpus", pii=False)
                flagged += any(f.kind == "secret" and f.severity == "error" for f in found)
    return per, (flagged, total)
