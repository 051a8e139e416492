"""Secret rules for tokens whose telling part sits inside them, not at their start.

Layer: judging rooms - pure core (scan rules).  An Authress service client key opens
with a common word (``sc_``, ``ext_``) and shows its kind only at ``.acc_`` in its
middle; a Sidekiq Enterprise gem URL shows it at the host.  The literal keyword is
that middle part and the match may start up to ``back`` bytes before it.  Written
from the providers' documentation; the examples are drawn from a fixed seed.
"""

from __future__ import annotations

import random
import string

from ftmanifest.scan.text import secrets as v
from ftmanifest.scan.text.secret_rules import Rule

_LD = string.ascii_lowercase + string.digits
_HX = "0123456789abcdef"
_rng = random.Random("ftmanifest-secret-compound")


def _r(n: int, alpha: str = _LD) -> str:
    return "".join(_rng.choice(alpha) for _ in range(n))


_AUTHRESS = f"sc_{_r(10)}.{_r(4)}.acc_{_r(10)}.{_r(40, _LD + '-')}"
_SIDEKIQ = f"https://{_r(8, _HX)}:{_r(8, _HX)}@gems.contribsys.com/"

COMPOUND_RULES: tuple[Rule, ...] = (
    Rule(
        "secret.authress-service-key",
        "secret",
        "Authress service client access key (sc_….acc_….secret)",
        r"(?:sc|ext|scauth|authress)_[a-z0-9]{5,30}\.[a-z0-9]{4,6}\.acc[_\-][a-z0-9\-]{10,32}"
        r"\.[a-z0-9+/_=\-]{30,120}",
        (".acc_", ".acc-"),
        validator=v.provider_token,
        back=46,
        back_chars=r"a-z0-9_.",
        fwd=160,
        ignore_case=True,
        true_positives=(f"AUTHRESS_KEY={_AUTHRESS}", f'{{"authressToken": "{_AUTHRESS}"}}'),
        false_positives=(
            "AUTHRESS_KEY=sc_<client>.<key>.acc_<account>.<secret>",
            f"AUTHRESS_KEY={_AUTHRESS[:-25]}",
        ),
    ),
    Rule(
        "secret.sidekiq-url",
        "secret",
        "Sidekiq Enterprise gem source URL with its credentials",
        r"(?:https?://)?[0-9a-f]{8}:[0-9a-f]{8}@(?:gems|enterprise)\.contribsys\.com",
        ("@gems.contribsys.com", "@enterprise.contribsys.com"),
        validator=v.provider_token,
        back=26,
        back_chars=r"a-f0-9htps:/",
        fwd=40,
        ignore_case=True,
        true_positives=(f"source '{_SIDEKIQ}' do", f"BUNDLE_MIRROR={_SIDEKIQ}"),
        false_positives=(
            "source 'https://gems.contribsys.com/' do",
            "source 'https://xxxxxxxx:xxxxxxxx@gems.contribsys.com/' do",
        ),
    ),
)
