"""Secret rules for the providers whose tokens carry a shape of their own.

Layer: judging rooms - pure core (scan rules).  Each rule is written from the provider's
documentation of its token format (prefix, alphabet, length, separators); a
token with a literal prefix needs no variable name around it.  Where the prefix
is short or common (``SG.``, ``pat.``, ``EAAA``), a Hyperscan gate asks for the
rest of the shape and for a start that is not inside a longer base64 or hex run,
so ordinary text costs nothing.  Providers S to Z are in ``secret_providers_s_z``;
providers whose values are a bare run of letters, digits or hex are found only
through their word, in ``secret_formats`` and ``secret_keyed``.

The examples are drawn at import time from a fixed seed; nothing is copied.
"""

from __future__ import annotations

import random
import string
from typing import Any

from ftmanifest.scan.text import secrets as v
from ftmanifest.scan.text.secret_rules import Rule
from ftmanifest.scan.text.secret_shapes import LEFT, UUID, prefixed

AN = string.ascii_letters + string.digits
HX = "0123456789abcdef"
UP = string.ascii_uppercase + string.digits
_rng = random.Random("ftmanifest-secret-providers")


def _r(n: int, alpha: str = AN) -> str:
    return "".join(_rng.choice(alpha) for _ in range(n))


def _p(
    rid: str,
    description: str,
    regex: str,
    keywords: tuple[str, ...],
    token: str,
    *,
    lookalike: str = "",
    **kw: object,
) -> Rule:
    """A prefixed token: the example in an env file, its placeholder must stay quiet."""
    name = rid.split(".", 1)[1].upper().replace("-", "_")
    head = lookalike or token[: max(len(k) for k in keywords)]
    fp = (f"{name}={head}<your-token>", f"{name}={token[:-12]}{'x' * 12}")
    return prefixed(rid, description, regex, keywords, (f"{name}={token}",), fp, **kw)


def _gated(regex: str, n: int) -> dict[str, Any]:
    """A gate for a common prefix: the start of the shape after a token boundary."""
    return {"gate": LEFT + regex, "gate_len": n}


_U = "3f1c9a52-7d4e-4b8a-9c61-0e2f5a7b8c9d"

PROVIDER_RULES: tuple[Rule, ...] = (
    _p(
        "secret.onepassword-secret-key",
        "1Password account secret key (A3-)",
        r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})(?:-[A-Z0-9]{5}){3}",
        ("a3-",),
        f"A3-{_r(6, UP)}-{_r(11, UP)}-{_r(5, UP)}-{_r(5, UP)}-{_r(5, UP)}",
        **_gated(r"A3-[A-Z0-9]{6}-", 10),
    ),
    _p(
        "secret.onepassword-service-token",
        "1Password service account token (ops_eyJ)",
        r"ops_eyJ[A-Za-z0-9+/]{250,1200}={0,3}",
        ("ops_eyj",),
        "ops_eyJ" + _r(300),
        fwd=1220,
    ),
    _p(
        "secret.adobe-client-secret",
        "Adobe client secret (p8e-)",
        r"p8e-[A-Za-z0-9]{32}",
        ("p8e-",),
        "p8e-" + _r(32),
    ),
    _p(
        "secret.airtable-pat",
        "Airtable personal access token (pat….64 hex)",
        r"pat[A-Za-z0-9]{14}\.[0-9a-f]{64}",
        ("pat",),
        f"pat{_r(14)}.{_r(64, HX)}",
        **_gated(r"pat[A-Za-z0-9]{14}\.[0-9a-f]{8}", 30),
    ),
    _p(
        "secret.alibaba-access-key-id",
        "Alibaba Cloud AccessKey ID (LTAI)",
        r"LTAI[A-Za-z0-9]{20}",
        ("ltai",),
        "LTAI" + _r(20),
        **_gated(r"LTAI[A-Za-z0-9]{20}", 26),
    ),
    _p(
        "secret.artifactory-key",
        "JFrog Artifactory API key (AKCp) or reference token (cmVmd)",
        r"AKCp[A-Za-z0-9]{69}|cmVmd[A-Za-z0-9]{59}",
        ("akcp", "cmvmd"),
        "AKCp" + _r(69),
        validator=v.unembedded_token,
        **_gated(r"(?:AKCp|cmVmd)[A-Za-z0-9]{20}", 28),
    ),
    _p(
        "secret.atlassian-api-token",
        "Atlassian API token (ATATT3)",
        r"ATATT3[A-Za-z0-9_\-=]{180,200}",
        ("atatt3",),
        "ATATT3" + _r(186, AN + "_-"),
        fwd=220,
    ),
    _p(
        "secret.clickhouse-secret",
        "ClickHouse Cloud API secret key (4b1d)",
        r"4b1d[A-Za-z0-9]{38}",
        ("4b1d",),
        "4b1d" + _r(38),
        validator=v.unembedded_token,
        **_gated(r"4b1d[A-Za-z0-9]{38}", 44),
    ),
    _p(
        "secret.clojars-token",
        "Clojars deploy token (CLOJARS_)",
        r"CLOJARS_[A-Za-z0-9]{60}",
        ("clojars_",),
        "CLOJARS_" + _r(60, string.ascii_lowercase + string.digits),
    ),
    _p(
        "secret.cloudflare-origin-ca-key",
        "Cloudflare Origin CA key (v1.0-)",
        r"v1\.0-[0-9a-f]{24}-[0-9a-f]{146}",
        ("v1.0-",),
        f"v1.0-{_r(24, HX)}-{_r(146, HX)}",
        fwd=180,
    ),
    _p(
        "secret.databricks-token",
        "Databricks personal access token (dapi)",
        r"dapi[0-9a-f]{32}(?:-[0-9])?",
        ("dapi",),
        "dapi" + _r(32, HX),
        **_gated(r"dapi[0-9a-f]{32}", 38),
    ),
    _p(
        "secret.defined-networking-key",
        "Defined Networking API key (dnkey-)",
        r"dnkey-[A-Za-z0-9=_\-]{26}-[A-Za-z0-9=_\-]{52}",
        ("dnkey-",),
        f"dnkey-{_r(26)}-{_r(52)}",
    ),
    _p(
        "secret.docker-token",
        "Docker Hub personal or organisation access token (dckr_pat_)",
        r"dckr_(?:pat|oat)_[A-Za-z0-9_\-]{27,40}",
        ("dckr_pat_", "dckr_oat_"),
        "dckr_pat_" + _r(27, AN + "_-"),
    ),
    _p(
        "secret.doppler-token",
        "Doppler token (dp.pt., dp.st., dp.ct., dp.sa., dp.scim.)",
        r"dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,44}",
        ("dp.pt.", "dp.st.", "dp.ct.", "dp.sa.", "dp.scim.", "dp.audit."),
        "dp.pt." + _r(43),
    ),
    _p(
        "secret.dropbox-short-lived-token",
        "Dropbox short-lived access token (sl.)",
        r"sl\.(?:u\.)?[A-Za-z0-9_\-=]{130,1300}",
        ("sl.",),
        "sl." + _r(135, AN + "_-"),
        validator=v.unembedded_token,
        fwd=1310,
        **_gated(r"sl\.(?:u\.)?[A-Za-z0-9_\-=]{130}", 140),
    ),
    _p(
        "secret.duffel-token",
        "Duffel API token (duffel_test_, duffel_live_)",
        r"duffel_(?:test|live)_[A-Za-z0-9_\-=]{43}",
        ("duffel_",),
        "duffel_live_" + _r(43),
    ),
    _p(
        "secret.dynatrace-token",
        "Dynatrace API token (dt0c01.)",
        r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}",
        ("dt0c01.",),
        f"dt0c01.{_r(24, UP)}.{_r(64, UP)}",
    ),
    _p(
        "secret.easypost-key",
        "EasyPost production or test key (EZAK, EZTK)",
        r"EZ[AT]K[A-Za-z0-9]{54}",
        ("ezak", "eztk"),
        "EZAK" + _r(54),
        **_gated(r"EZ[AT]K[A-Za-z0-9]{54}", 58),
    ),
    _p(
        "secret.flyio-token",
        "Fly.io access or macaroon token (fo1_, fm1a_, fm2_)",
        r"fo1_[A-Za-z0-9_\-]{43}|fm1[ar]_[A-Za-z0-9+/]{100,2000}={0,3}"
        r"|fm2_[A-Za-z0-9+/]{100,2000}={0,3}",
        ("fo1_", "fm1a_", "fm1r_", "fm2_"),
        "fo1_" + _r(43, AN + "_-"),
        fwd=2010,
    ),
    _p(
        "secret.frameio-token",
        "Frame.io developer token (fio-u-)",
        r"fio-u-[A-Za-z0-9_\-=]{64}",
        ("fio-u-",),
        "fio-u-" + _r(64),
    ),
    _p(
        "secret.gitlab-session-cookie",
        "GitLab session cookie (_gitlab_session=)",
        r"_gitlab_session=([0-9a-z]{32})",
        ("_gitlab_session=",),
        "_gitlab_session=" + _r(32, HX),
        group=1,
        lookalike="_gitlab_session=",
    ),
    _p(
        "secret.google-oauth-client-secret",
        "Google OAuth client secret (GOCSPX-)",
        r"GOCSPX-[A-Za-z0-9_\-]{28}",
        ("gocspx-",),
        "GOCSPX-" + _r(28),
    ),
    _p(
        "secret.grafana-token",
        "Grafana API key (eyJrIjoi), Cloud token (glc_), service account token (glsa_)",
        r"eyJrIjoi[A-Za-z0-9]{70,400}={0,3}|glc_[A-Za-z0-9+/]{32,400}={0,3}"
        r"|glsa_[A-Za-z0-9]{32}_[0-9a-fA-F]{8}",
        ("eyjrijoi", "glc_", "glsa_"),
        f"glsa_{_r(32)}_{_r(8, HX)}",
        fwd=410,
    ),
    _p(
        "secret.harness-token",
        "Harness personal or service account token (pat., sat.)",
        r"(?:pat|sat)\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}",
        ("pat.", "sat."),
        f"pat.{_r(22)}.{_r(24)}.{_r(20)}",
        **_gated(r"[ps]at\.[A-Za-z0-9_\-]{22}\.", 30),
    ),
    _p(
        "secret.terraform-token",
        "Terraform Cloud / HCP token (….atlasv1.…)",
        r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-=]{60,70}",
        ("atlasv1",),
        f"{_r(14)}.atlasv1.{_r(67)}",
        back=15,
        back_chars="A-Za-z0-9.",
        lookalike="atlasv1.",
    ),
    _p(
        "secret.vault-token",
        "HashiCorp Vault service or batch token (hvs., hvb.)",
        r"hvs\.[A-Za-z0-9_\-]{90,120}|hvb\.[A-Za-z0-9_\-]{138,300}",
        ("hvs.", "hvb."),
        "hvs." + _r(95, AN + "_-"),
        fwd=310,
    ),
    _p(
        "secret.infracost-token",
        "Infracost API key (ico-)",
        r"ico-[A-Za-z0-9]{32}",
        ("ico-",),
        "ico-" + _r(32),
        validator=v.unembedded_token,
        **_gated(r"ico-[A-Za-z0-9]{32}", 36),
    ),
    _p(
        "secret.intra42-secret",
        "42 Intra client secret (s-s4t2ud-, s-s4t2af-)",
        r"s-s4t2(?:ud|af)-[0-9a-f]{64}",
        ("s-s4t2",),
        "s-s4t2ud-" + _r(64, HX),
    ),
    _p(
        "secret.mailchimp-key",
        "Mailchimp API key (32 hex, -us and a datacentre number)",
        r"[0-9a-f]{32}-us[0-9]{1,2}",
        ("-us",),
        f"{_r(32, HX)}-us{_rng.randint(1, 21)}",
        back=32,
        back_chars="0-9a-f",
        lookalike="-us",
        **_gated(r"[0-9a-f]{32}-us[0-9]", 8),
    ),
    _p(
        "secret.mapbox-secret-token",
        "Mapbox secret or temporary token (sk.eyJ1, tk.eyJ1)",
        r"[st]k\.eyJ1Ijoi[A-Za-z0-9_\-]{20,300}\.[A-Za-z0-9_\-]{20,30}",
        ("sk.eyj1ijoi", "tk.eyj1ijoi"),
        f"sk.eyJ1Ijoi{_r(60)}.{_r(22)}",
        fwd=340,
    ),
    Rule(
        "secret.mapbox-public-token",
        "secret",
        "Mapbox public token (pk.eyJ1): meant for browsers, named so it is not mistaken",
        r"pk\.eyJ1Ijoi[A-Za-z0-9_\-]{20,300}\.[A-Za-z0-9_\-]{20,30}",
        ("pk.eyj1ijoi",),
        validator=v.provider_token,
        fwd=340,
        severity="warning",
        true_positives=(f"MAPBOX_TOKEN=pk.eyJ1Ijoi{_r(60)}.{_r(22)}",),
        false_positives=("MAPBOX_TOKEN=pk.eyJ1Ijoi<your-token>",),
    ),
    _p(
        "secret.maxmind-license-key",
        "MaxMind licence key (…_mmk)",
        r"[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk",
        ("_mmk",),
        f"{_r(6)}_{_r(29)}_mmk",
        back=36,
        back_chars="A-Za-z0-9_",
        lookalike="_mmk",
        fwd=8,
    ),
    _p(
        "secret.netlify-token",
        "Netlify personal access token (nfp_)",
        r"nfp_[A-Za-z0-9]{36}",
        ("nfp_",),
        "nfp_" + _r(36),
    ),
    _p(
        "secret.notion-token",
        "Notion integration token (ntn_, legacy secret_)",
        r"ntn_[0-9]{11}[A-Za-z0-9]{35}|secret_[A-Za-z0-9]{43}",
        ("ntn_", "secret_"),
        f"ntn_{_r(11, string.digits)}{_r(35)}",
        **_gated(r"(?:ntn_[0-9]{11}|secret_)[A-Za-z0-9]{35}", 60),
    ),
    _p(
        "secret.octopus-deploy-key",
        "Octopus Deploy API key (API-)",
        r"API-[A-Z0-9]{26}",
        ("api-",),
        "API-" + _r(26, UP),
        validator=v.mixed_token,
        **_gated(r"API-[A-Z0-9]{26}", 30),
    ),
    _p(
        "secret.openshift-token",
        "OpenShift user token (sha256~)",
        r"sha256~[A-Za-z0-9_\-]{43}",
        ("sha256~",),
        "sha256~" + _r(43, AN + "_-"),
    ),
    _p(
        "secret.perplexity-key",
        "Perplexity API key (pplx-)",
        r"pplx-[A-Za-z0-9]{48}",
        ("pplx-",),
        "pplx-" + _r(48),
    ),
    _p(
        "secret.plaid-access-token",
        "Plaid access token (access-sandbox-, -production-)",
        r"access-(?:sandbox|development|production)-" + UUID,
        ("access-sandbox-", "access-development-", "access-production-"),
        f"access-production-{_U}",
    ),
    _p(
        "secret.postman-key",
        "Postman API key (PMAK-)",
        r"PMAK-[0-9a-f]{24}-[0-9a-f]{34}",
        ("pmak-",),
        f"PMAK-{_r(24, HX)}-{_r(34, HX)}",
    ),
    _p(
        "secret.prefect-key",
        "Prefect API key (pnu_)",
        r"pnu_[A-Za-z0-9]{36}",
        ("pnu_",),
        "pnu_" + _r(36),
    ),
    _p(
        "secret.pulumi-token",
        "Pulumi access token (pul-)",
        r"pul-[0-9a-f]{40}",
        ("pul-",),
        "pul-" + _r(40, HX),
    ),
    _p(
        "secret.readme-key",
        "ReadMe API key (rdme_)",
        r"rdme_[a-z0-9]{70}",
        ("rdme_",),
        "rdme_" + _r(70, string.ascii_lowercase + string.digits),
    ),
    _p(
        "secret.rubygems-key",
        "RubyGems API key (rubygems_)",
        r"rubygems_[0-9a-f]{48}",
        ("rubygems_",),
        "rubygems_" + _r(48, HX),
    ),
    _p(
        "secret.scalingo-token",
        "Scalingo API token (tk-us-)",
        r"tk-us-[A-Za-z0-9_\-]{48}",
        ("tk-us-",),
        "tk-us-" + _r(48, AN + "_-"),
    ),
)
