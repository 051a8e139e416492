"""A provider's token that cannot authenticate is not reported as a generic secret:
one cut short of its provider's documented length, and a Slack token whose numeric
ids were typed by hand.  Beside each, the values that must still be reported.

Every token here is drawn from a fixed seed, so none is a real credential.
"""

from __future__ import annotations

import random
import string

import pytest

from ftmanifest.scan.text.text import scan_buffer
from tests.scan.engines import ENGINES

_rng = random.Random("ftmanifest-cut-short")
_LOWER = string.ascii_lowercase + string.digits


def _tok(n: int, alpha: str = _LOWER) -> str:
    return "".join(_rng.choice(alpha) for _ in range(n))


def _rules(text: str, engine: str) -> set[str]:
    found = scan_buffer(text.encode(), path="x.py", pii=False, engine=engine)
    return {f.rule for f in found if f.kind == "secret"}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    "prefix, full", [("sm_pat_", 16), ("sm_aat_", 16), ("ghp_", 36), ("glpat-", 20)]
)
def test_a_prefixed_token_cut_short_is_no_generic_secret(
    engine: str, prefix: str, full: int
) -> None:
    short = prefix + _tok(full // 2)
    assert _rules(f'shownToken := "{short}"', engine) == set(), short
    # nearly the format's length: perhaps a whole token of a length the rule does not
    # name, so still reported
    near = prefix + _tok(full - 1)
    assert "secret.generic-assignment" in _rules(f"API_TOKEN={near}", engine), near
    # controls: the whole token is its provider's; a value of that prefix in another
    # shape (a character outside the provider's alphabet) is still a generic secret
    whole = _rules(f'shownToken := "{prefix}{_tok(full)}"', engine)
    assert whole and "secret.generic-assignment" not in whole, whole
    other = prefix + _tok(full - 10) + "!" + _tok(4)
    assert "secret.generic-assignment" in _rules(f"API_TOKEN={other}", engine), other


@pytest.mark.parametrize("engine", ENGINES)
def test_without_a_provider_prefix_a_short_value_is_still_reported(engine: str) -> None:
    for value in ("q7xr2mzp9kw4", "task_test_" + _tok(30), "sm_pet_q7xr2mzp9k"):
        assert "secret.generic-assignment" in _rules(f'apiToken = "{value}"', engine), value


@pytest.mark.parametrize("engine", ENGINES)
def test_a_slack_token_with_ids_typed_by_hand_is_no_generic_secret(engine: str) -> None:
    hexpart = _tok(32, "0123456789abcdef")
    typed = f"xoxp-1234-1234-1234-{hexpart}"
    assert _rules(f'"token3": "{typed}"', engine) == set()
    # control: Slack's own ids (long digit runs) are a Slack token
    ids = "-".join(_tok(12, string.digits) for _ in range(3))
    assert "secret.slack-token" in _rules(f'"token3": "xoxp-{ids}-{hexpart}"', engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_an_unsigned_jwt_is_a_whole_token(engine: str) -> None:
    # alg none: the signature part is empty, and a server that accepts it is open
    unsigned = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ0cmFpbmVyLWJvdCJ9."
    assert _rules(f'String sessionToken = "{unsigned}";', engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_slack_shape_inside_another_value_hides_nothing(engine: str) -> None:
    value = "Zq9Lm4Tx8Rw-xoxa-12-34-Rk2Vb7"  # only a whole value is read as a Slack token
    assert "secret.generic-assignment" in _rules(f'db_password = "{value}"', engine)
