"""Gates that leave out what a validator refuses: fewer candidates, the same findings.

The Hyperscan gates of the generic assignment (values led by an environment reference
or a placeholder), the e-mail rule (a local part ``git``), URL passwords (no ``@``
after ``user:pass``) and ``curl -u`` keep code lines out of Python.  The ``re`` engine
runs no gate, so both engines must report the same findings on text built around
every left-out prefix, and the left-out text must reach no Python at all.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ftmanifest.scan.text.gates import not_led_by
from ftmanifest.scan.text.matcher import matcher
from ftmanifest.scan.text.secret_rules import _REFUSED_LEADS, _VALUE_EXCLUDED
from ftmanifest.scan.text.text import scan_buffer
from tests.scan.engines import needs_hyperscan

REAL = "x9Q2mZ7vR4tL8wK1pN"


def _same(buf: bytes) -> list[dict]:
    a = [f.to_dict() for f in scan_buffer(buf, path="x", engine="re")]
    b = [f.to_dict() for f in scan_buffer(buf, path="x", engine="hyperscan")]
    assert a == b, buf
    return a


def _candidates(buf: bytes, rule: str) -> set[int]:
    m = matcher(True, True, "hyperscan")
    return {pos for pid, pos in m.candidates(buf) if m.rules[m.patterns[pid][1]].id == rule}


@pytest.mark.parametrize("lead", _REFUSED_LEADS)
@pytest.mark.parametrize("tail", ["", "1", "Q2mZ7vR4tL8wK1pN", "_9Q2mZ7vR4", "['HF_TOKEN']"])
def test_every_left_out_lead_is_refused_by_the_validator(lead: str, tail: str) -> None:
    for text in (f"token = {lead}{tail}", f'api_key: "{lead.upper()}{tail}"'):
        found = scan_buffer(text.encode(), path="x", engine="re")
        assert not [f for f in found if f.rule == "secret.generic-assignment"], text


@needs_hyperscan
def test_code_lines_the_validators_refuse_reach_no_python() -> None:
    code = b"token = os.environ['HF_TOKEN']\napi_key = os.getenv('OPENAI_API_KEY')\n"
    assert _candidates(code, "secret.generic-assignment") == set()
    assert _candidates(b"ssh git@github.com && curl -s", "pii.email") == set()
    health = b"curl -s http://10.0.0.12:8080/health"
    assert _candidates(health, "secret.url-password") == set()
    assert _candidates(health, "secret.curl-user-password") == set()
    # controls: the same shapes with a real value still become candidates and findings
    for text, rule in (
        (f"token = os.enviro1{REAL}", "secret.generic-assignment"),
        (f"token = $1{REAL}", "secret.generic-assignment"),
        ("mail digit@acme-corp.io", "pii.email"),
        (f"curl -u deploy:{REAL} https://ci.acme.io", "secret.curl-user-password"),
        (f"postgres://svc:{REAL}@db.corp.io/app", "secret.url-password"),
    ):
        assert _candidates(text.encode(), rule), text
        assert rule in {f["rule"] for f in _same(text.encode())}, text


def test_a_value_led_by_a_literal_has_no_branch() -> None:
    import re

    gate = re.compile(not_led_by(("os.environ", "$a"), _VALUE_EXCLUDED, 8), re.I)
    assert gate.match("os.environ['X']") is None and gate.match("OS.ENVIRON.get") is None
    assert gate.match("$abcdefgh") is None and gate.match("$Abcdefgh") is None
    assert gate.match("os.enviro1") and gate.match("os.envir1") and gate.match("$1bcdefg")
    assert gate.match("x9Q2mZ7v") and gate.match("x9Q2mZ7") is None  # eight bytes at least
    with pytest.raises(ValueError, match="digit"):
        not_led_by(("os.environ1",), _VALUE_EXCLUDED, 8)


KEYS = st.sampled_from(["token", "db_password", "API_KEY", "secret", "client_secret", "pwd"])
SEPS = st.sampled_from([" = ", "=", ": ", '": "', " := ", "=>", " = '", ":"])
LEADS = st.sampled_from([*_REFUSED_LEADS, "", "OS.", "proc", "$", "*", "y"])
PIECE = st.text(alphabet="os.envirgtpcEN$*_xyu19QZ-/+:='\"()[] \n", max_size=14)


@needs_hyperscan
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(KEYS, SEPS, LEADS, st.integers(0, 12), PIECE, st.sampled_from(["", REAL, "7k"]))
def test_engines_agree_on_values_around_left_out_leads(key, sep, lead, cut, piece, tail) -> None:
    value = lead[: cut or None] + piece + tail
    _same(f"{key}{sep}{value}".encode())
    _same(f"x {key}{sep}{value.upper()} y".encode())


LOCALS = st.sampled_from(["git", "Git", "GIT", "digit", "agit", "it", "t", "gi", "xit", "noreply"])
BEFORE = st.sampled_from(["", " ", ".", "_", "+", "é", "\u00e9git", "\xff", "<", "a", "\n"])


@needs_hyperscan
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BEFORE, LOCALS, st.sampled_from(["github.com", "acme-corp.io", "bücher.de", "x.io:org/r"]))
def test_engines_agree_on_addresses_around_git(before, local, domain) -> None:
    _same(f"{before}{local}@{domain} ok".encode())


@needs_hyperscan
@pytest.mark.parametrize("user", [1, 63, 64, 65])
@pytest.mark.parametrize("password", [2, 3, 127, 128, 129])
def test_engines_agree_on_url_passwords_at_their_length_bounds(user: int, password: int) -> None:
    secret = ("p7Q" * 43)[:password]
    for at in ("@db.corp.io/app", ":5432/app", "@", " @db.corp.io"):
        _same(f"https://{'u' * user}:{secret}{at}".encode())
        _same(f"postgres://{'u' * user}:{REAL[:password]}{at}".encode())


@needs_hyperscan
@pytest.mark.parametrize("gap", [0, 1, 180, 190, 194, 195, 196, 200, 201])
def test_engines_agree_on_curl_users_at_the_window_bound(gap: int) -> None:
    for flag in ("-u", "--user", "-u=", "--user='"):
        for cred in ("deploy:Tr0ub4dor3x", "a:abc", "a:abcd", "u" * 64 + ":" + REAL, ":" + REAL):
            _same(f"curl {'x' * gap} {flag} {cred} https://ci.acme.io".encode())
