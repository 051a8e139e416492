"""Providers whose keys carry no prefix, found by their word and their value's shape.

Each family draws random values in its provider's documented alphabet and length
(nothing is copied from another tool's tests) and plants them in eight places a
key leaks in.  A value counts as found only when a format rule reports it, not
the generic ``*_KEY=`` warning.  Before ``secret_keyed`` none of these families
had a format rule: the hex and UUID ones were not reported at all.  The hard
negatives put the same words beside identifiers, digests and run ids.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid
from collections.abc import Callable

import pytest

from ftmanifest.scan.text.text import scan_buffer
from tests.scan.engines import ENGINES

LD = string.ascii_lowercase + string.digits
AN = string.ascii_letters + string.digits
HEX = "0123456789abcdef"


def _s(r: random.Random, n: int, alpha: str = LD) -> str:
    return "".join(r.choice(alpha) for _ in range(n))


def _b62(n: int, alpha: str = LD) -> Callable[[random.Random], str]:
    return lambda r: r.choice(string.ascii_lowercase) + _s(r, n - 2, alpha) + r.choice("0123456789")


def _hex(n: int) -> Callable[[random.Random], str]:
    return lambda r: _s(r, n, HEX)


def _uuid(r: random.Random) -> str:
    return str(uuid.UUID(int=r.getrandbits(128), version=4))


# provider word -> the documented shapes of its keys
FAMILIES: dict[str, tuple[Callable[[random.Random], str], ...]] = {
    "adobe": (_hex(32),),
    "algolia": (_b62(32), _hex(32)),
    "atlassian": (_b62(24, AN),),
    "jira": (_b62(24),),
    "meraki": (_hex(40),),
    "discord": (_hex(64), _b62(32, AN + "_-")),
    "etsy": (_b62(24),),
    "finicity": (_hex(32), _b62(20)),
    "jfrog": (_b62(64, AN), _b62(73)),
    "kucoin": (_hex(24), _uuid),
    "messagebird": (_b62(25, AN), _uuid),
    "sendbird": (_hex(40), _uuid),
    "squarespace": (_uuid,),
    "sumo": (lambda r: "su" + _s(r, 12, AN), _b62(64, AN)),
    "sonar": (_b62(40), lambda r: "sqp_" + _s(r, 40, HEX)),
    "square": (lambda r: "EAAA" + _s(r, 26, AN + "_-"), lambda r: "sq0csp-" + _s(r, 43, AN)),
    "telegram": (lambda r: f"{r.randint(10**7, 10**10)}:A{_s(r, 34, AN + '_-')}",),
    "twitter": (_b62(25), _b62(50, AN), lambda r: f"{r.randint(10**16, 10**18)}-{_s(r, 30, AN)}"),
    "datadog": (_b62(32), _b62(40)),
    "plaid": (_b62(24, AN), _b62(30)),
    "zendesk": (_b62(40),),
    "bitbucket": (_b62(32), _b62(64, AN + "_-")),
}

# The eight places: .env, YAML, JSON, Python, shell export, INI/TOML, a Markdown code
# block, a curl header.
CONTEXTS = (
    "{P}_API_KEY={t}\n",
    'services:\n  {p}_api_token: "{t}"\n',
    '{{"{p}Token": "{t}", "epochs": 3}}\n',
    '{p}_secret_key = "{t}"  # move to the vault\n',
    "export {P}_TOKEN='{t}'\n",
    '[services]\n{p}_api_key = "{t}"\n',
    "Run it like this:\n\n```sh\n{P}_ACCESS_TOKEN={t} python train.py\n```\n",
    'curl -s -H "X-{C}-API-Key: {t}" https://api.example.com/v1/items\n',
)
PER_FAMILY = 32


def _format_rules(text: str, engine: str) -> set[str]:
    found = scan_buffer(text.encode(), path="x", pii=False, engine=engine)
    return {f.rule for f in found if f.kind == "secret" and "generic" not in f.rule}


def _samples(word: str) -> list[tuple[str, str]]:
    r = random.Random(f"keyed:{word}")
    shapes = FAMILIES[word]
    out = []
    for i in range(PER_FAMILY):
        tok = shapes[i % len(shapes)](r)
        ctx = CONTEXTS[(i // len(shapes)) % len(CONTEXTS)]
        out.append((ctx.format(P=word.upper(), p=word, C=word.capitalize(), t=tok), tok))
    return out


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("word", sorted(FAMILIES))
def test_each_family_is_found_by_its_format_in_eight_contexts(engine: str, word: str) -> None:
    missed = [line for line, _ in _samples(word) if not _format_rules(line, engine)]
    assert len(missed) <= 0.05 * PER_FAMILY, missed


def _negatives() -> list[str]:
    r = random.Random("keyed:negatives")
    lines = []
    for i in range(20):
        u, sha1 = _uuid(r), hashlib.sha1(str(i).encode()).hexdigest()
        sha256 = hashlib.sha256(str(i).encode()).hexdigest()
        md5 = hashlib.md5(str(i).encode()).hexdigest()  # noqa: S324 - a look-alike digest
        lines += [
            f"kucoin_order_id: {u}\n",
            f"SQUARESPACE_SITE_ID={u}\n",
            f"sendbird_app_id = {u}  # the app, not its token\n",
            f"MESSAGEBIRD_ACCOUNT_ID={u}\n",
            f"adobe_asset_md5: {md5}\n",
            f"meraki_firmware_sha1 = {sha1}\n",
            f"discord_attachment_sha256: {sha256}\n",
            f"wandb: Syncing run {u[:8]} (id {u}) for the jira ticket ML-{r.randint(10, 9999)}\n",
            f"step={i * 100} loss=0.{r.randint(1000, 9999)} twitter_sentiment_acc=0.{i:02d}\n",
            f'{{"dataset": "twitter_financial_news", "revision": "{sha1}"}}\n',
            f"etsy_shop_name: {_s(r, 24, string.ascii_lowercase)}\n",
            f"jfrog_repo_url: https://acme.jfrog.io/artifactory/ml-{_s(r, 8)}\n",
            f"commit {sha1} plaid: bump the client to 1.{i}.0\n",
            f"cameraetsy_token: {_b62(24)(r)}\n",  # the word inside another word
            f"twitter_handle = '{_s(r, 15, string.ascii_lowercase)}'\n",
            "DATADOG_API_KEY=${DATADOG_API_KEY}\n",
            "DATADOG_API_KEY=<your-datadog-key>\n",
            f"algolia_index_name: products_{_s(r, 6, string.ascii_lowercase)}\n",
        ]
    return lines


@pytest.mark.parametrize("engine", ENGINES)
def test_the_same_words_beside_ids_digests_and_runs_stay_clean(engine: str) -> None:
    lines = _negatives()
    noisy = [(line, rules) for line in lines if (rules := _format_rules(line, engine))]
    assert len(lines) > 300 and noisy == []


@pytest.mark.parametrize("engine", ENGINES)
def test_hand_typed_and_masked_values_are_placeholders(engine: str) -> None:
    quiet = [
        "ALGOLIA_API_KEY=abcdefgh12345678abcdefgh12345678\n",
        "slack: xoxp-572370529330-573807301142-572331691188-####################\n",
        "curl -u <user:password> https://api.example.com\n",
        "curl --user neo4j:[PASSWORD] http://db:7474/\n",
        "curl -i -u 'test:test' https://api.example.com\n",
    ]
    assert [line for line in quiet if _format_rules(line, engine)] == []
    # control: the same places with a real-looking value are found
    assert _format_rules("ALGOLIA_API_KEY=q8w2e7r4t1y9u3i6o0p5a8s2d7f4g1h9\n", engine)
    assert _format_rules("curl -i -u 'deploy:Tr0ub4dor3x' https://api.example.com\n", engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_mask_after_a_whole_token_hides_nothing(engine: str) -> None:
    r = random.Random(7)
    hf = "hf_" + _s(r, 34)
    slack = f"xoxb-{_s(r, 12, string.digits)}-{_s(r, 13, string.digits)}-{_s(r, 24)}"
    exposed = [f"HF_TOKEN={hf}****\n", f"token: {slack}-####\n", f"slack: {slack}####\n"]
    assert [line for line in exposed if not _format_rules(line, engine)] == []


def _jwt(r: random.Random) -> str:
    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head = part(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = part(json.dumps({"sub": _s(r, 8), "exp": 1999999999}).encode())
    return f"{head}.{body}.{part(r.randbytes(32))}"


@pytest.mark.parametrize("engine", ENGINES)
def test_a_token_at_the_end_of_a_sentence_is_found(engine: str) -> None:
    r = random.Random(11)
    jwt = _jwt(r)
    ends = [f"the token is {jwt}.\n", f"token={jwt}...\n", f"see {jwt}. Then run it.\n"]
    assert [line for line in ends if not _format_rules(line, engine)] == []
    # control: a fourth dotted part makes a longer run, which is not this JWT
    assert not [x for x in _format_rules(f"id {jwt}.{_s(r, 20)}\n", engine) if "jwt" in x]
