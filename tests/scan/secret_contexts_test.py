"""Credentials known by the file that holds them: Kubernetes Secrets, NuGet.config,
curl commands over several lines; and the look-alikes beside them that stay quiet.

Every token here is drawn from a fixed seed, so none is a real credential.
"""

from __future__ import annotations

import base64
import random
import string

import pytest

from ftmanifest.scan.text.text import scan_buffer
from tests.scan.engines import ENGINES

_rng = random.Random("ftmanifest-secret-contexts")
_ALNUM = string.ascii_letters + string.digits


def _tok(n: int, alpha: str = _ALNUM) -> str:
    return "".join(_rng.choice(alpha) for _ in range(n))


PASSWORDS = [_tok(14) for _ in range(6)]


def _rules(text: str, engine: str) -> set[str]:
    found = scan_buffer(text.encode(), path="x.yaml", pii=False, engine=engine)
    return {f.rule for f in found if f.kind == "secret"}


def _b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def _secret(pw: str) -> str:
    return (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-credentials\n  namespace: ml\n"
        f"type: Opaque\ndata:\n  username: {_b64('trainer')}\n  password: {_b64(pw)}\n"
    )


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("pw", PASSWORDS)
def test_a_kubernetes_secret_is_found_however_it_is_laid_out(engine: str, pw: str) -> None:
    data_first = (
        f"apiVersion: v1\ndata:\n\t# rotated monthly\n\tpassword: '{_b64(pw)}'\nkind: 'Secret'\n"
    )
    config = _b64('{"auths":{"registry.local":{"auth":"' + pw + '"}}}')
    block = (
        "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/dockerconfigjson\ndata:\n"
        f"  .dockerconfigjson: |\n    {config}\n"
    )
    string_data = f"kind: Secret\nstringData:\n  DB_HOST: db.ml.svc\n  DB_PASSWORD: {pw}\n"
    for text in (_secret(pw), data_first, block, "---\n" + _secret(pw) + "---\nkind: Service\n"):
        assert "secret.kubernetes-secret" in _rules(text, engine), text
    assert "secret.kubernetes-secret-stringdata" in _rules(string_data, engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_no_secret_outside_a_kubernetes_secret(engine: str) -> None:
    pw = PASSWORDS[0]
    configmap = _secret(pw).replace("kind: Secret", "kind: ConfigMap")
    other_doc = (
        f"kind: Secret\nmetadata:\n  name: a\n---\nkind: ConfigMap\ndata:\n  k: {_b64(pw)}\n"
    )
    external = (
        "apiVersion: external-secrets.io/v1beta1\nkind: ExternalSecret\nspec:\n  data:\n"
        "    - secretKey: password\n      remoteRef:\n        key: ml/db\n"
    )
    templated = (
        "kind: Secret\ndata:\n  password: {{ .Values.password | b64enc }}\n"
        '  token: ""\n  short: YmFyCg==\n'
    )
    placeholders = (
        f"kind: Secret\ndata:\n  password: {_b64('changeme')}\n"
        "stringData:\n  api_token: ${API_TOKEN}\n  password: <password>\n"
    )
    for text in (configmap, other_doc, external, templated, placeholders):
        assert not {r for r in _rules(text, engine) if "kubernetes" in r}, text
    # the generic rule still reads a ConfigMap's password: only the Secret rule is quiet
    assert _rules(configmap, engine) == {"secret.generic-assignment"}


NUGET = """<?xml version="1.0" encoding="utf-8"?>
<configuration>
  <packageSourceCredentials>
    <ml-feed>
      <add key="Username" value="ci" />
      <add key="ClearTextPassword" value="{pw}" />
    </ml-feed>
  </packageSourceCredentials>
</configuration>
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_a_nuget_clear_text_password(engine: str) -> None:
    for pw in PASSWORDS:
        assert "secret.nuget-cleartext-password" in _rules(NUGET.format(pw=pw), engine)
    for quiet in ("%FEED_PASSWORD%", "xxxxxxxxxxxx", "abc", "<password>"):
        assert _rules(NUGET.format(pw=quiet), engine) == set(), quiet


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("pw", PASSWORDS[:3])
def test_curl_credentials_on_continued_lines(engine: str, pw: str) -> None:
    bearer = f'curl -X POST https://api.example.com/v1/jobs \\\n  -H "Authorization: Bearer {pw}"'
    commented = (
        f"# curl -X POST \\\n#   https://api.example.com \\\n#   -H 'X-Service-ApiKey: {pw}'"
    )
    token = f'curl -XPOST https://api.example.com -H "Token: {pw}"'
    user = f"curl -k -X POST https://api.example.com/jobs \\\n  -d 'x' \\\n  -u trainer:{pw}"
    empty_user = f'curl -u ":{pw}" https://api.example.com'
    key_user = f"curl https://api.example.com/v1/charges -u sk_{pw}:"
    assert "secret.curl-auth-header" in _rules(bearer, engine)
    assert "secret.curl-auth-header" in _rules(commented, engine)
    assert "secret.curl-auth-header" in _rules(token, engine)
    assert "secret.curl-user-password" in _rules(user, engine)
    assert "secret.curl-user-password" in _rules(empty_user, engine)
    assert "secret.curl-user-key" in _rules(key_user, engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_curl_placeholders_and_unjoined_lines_stay_quiet(engine: str) -> None:
    pw = PASSWORDS[0]
    for text in (
        'curl -H "Authorization: Bearer $TOKEN" https://api.example.com',
        'curl -H "Authorization: Bearer ${API_KEY}" https://api.example.com',
        'curl -H "Authorization: Bearer <token>" https://api.example.com',
        'curl -H "Authorization: Token xxxxxxxxxxxx" https://api.example.com',
        'curl -u "${username}:${password}" https://api.example.com',
        "curl -u $USER: https://api.example.com",
        # a newline without a backslash ends the command
        f'curl https://api.example.com\n-H "Authorization: Bearer {pw}"\n-u trainer:{pw}',
    ):
        assert _rules(text, engine) == set(), text


@pytest.mark.parametrize("engine", ENGINES)
def test_slack_ids_typed_by_hand_are_not_a_slack_token(engine: str) -> None:
    hexpart = _tok(32, "0123456789abcdef")
    ids = "-".join(_tok(12, string.digits) for _ in range(3))
    real = f"xoxp-{ids}-{hexpart}"
    typed = f"xoxp-1234-5678-9012-{hexpart}"
    assert "secret.slack-token" in _rules(f"notes: {real}", engine)
    assert "secret.slack-token" in _rules(f"refresh: xoxe-1-{_tok(60)}", engine)
    assert "secret.slack-token" not in _rules(f"notes: {typed}", engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_generic_warning_skips_only_a_resource_named_by_a_place_for_secrets(engine: str) -> None:
    for quiet in (
        "keyVaultToStoreSecrets: cmp2-qat-1208358310",
        "secretStoreVault: ml-prod-4471902285",
    ):
        assert _rules(quiet, engine) == set(), quiet
    for loud in (
        "SUMO_ACCESS_KEY: Ab7eQG1w3",
        "SUMO_ACCESS_KEY: AbCeFG123",  # typed like an example: still a value
        "api_key = abcd1234",  # a weak key is a key
        'db_password = "abdf1235"',
        f"HF_TOKEN={PASSWORDS[2]}",
        "db_password: cmp2-qat-1208358310",  # the key names no place for secrets
        f"keyVaultToStoreSecrets: {PASSWORDS[3]}",
        # a key that names a place and ends on a credential holds the credential
        'vault_password = "correct-horse-battery-staple9"',
        'VAULT_TOKEN = "prod-db-pass-88123"',
        "keystore_password: winter-sun-rises-42",
        'bucket_secret = "xk-prod-77a1-9q2z-k88"',
        "secrets: prod-db-pass-88123",  # no place word: a list of secrets is not a place
    ):
        assert "secret.generic-assignment" in _rules(loud, engine), loud


@pytest.mark.parametrize("engine", ENGINES)
def test_a_placeholder_first_in_the_map_hides_no_later_value(engine: str) -> None:
    key = _b64(PASSWORDS[4] + PASSWORDS[5])  # e.g. a private key's base64, under no credential word
    later = f"kind: Secret\ndata:\n  password: {_b64('changeme')}\n  tls.crt: {key}\n"
    assert "secret.kubernetes-secret" in _rules(later, engine)
    block = f"kind: Secret\ndata:\n  a: {_b64('changeme')}\n  tls.key: |\n    {key}\n"
    assert "secret.kubernetes-secret" in _rules(block, engine)
    # controls: every value a placeholder, the map ended before the value, another kind
    assert _rules(f"kind: Secret\ndata:\n  a: {_b64('changeme')}\n  b: {_b64('password')}\n",
                  engine) == set()  # fmt: skip
    ended = f"kind: Secret\ndata:\n  a: {_b64('changeme')}\nmetadata:\n  tls.crt: {key}\n"
    assert "secret.kubernetes-secret" not in _rules(ended, engine)
    assert "secret.kubernetes-secret" not in _rules(later.replace("Secret", "ConfigMap"), engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_templated_entries_before_a_value_hide_nothing(engine: str) -> None:
    # a chart's Secret: many templated values, then one written out in base64
    templated = "".join(f'  k{i}: "{{{{ .Values.k{i} | b64enc }}}}"\n' for i in range(60))
    key = _b64(PASSWORDS[2] + PASSWORDS[3])
    late = f"kind: Secret\ndata:\n{templated}  tls.key: {key}\n"
    assert "secret.kubernetes-secret" in _rules(late, engine)
    # controls: the same map with every value templated; the value after the map ended
    assert _rules(f"kind: Secret\ndata:\n{templated}", engine) == set()
    ended = f"kind: Secret\ndata:\n{templated}metadata:\n  tls.key: {key}\n"
    assert "secret.kubernetes-secret" not in _rules(ended, engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_secret_in_a_list_is_read_to_its_own_map_end(engine: str) -> None:
    key = _b64(PASSWORDS[0] + PASSWORDS[1])
    listed = f"kind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  data:\n    tls.key: {key}\n"
    assert "secret.kubernetes-secret" in _rules(listed, engine)
    # control: a value under a key beside the map (its metadata), not inside it
    beside = (
        f"kind: List\nitems:\n- kind: Secret\n  data:\n    a: {_b64('changeme')}\n"
        f"  metadata:\n    checksum: {key}\n"
    )
    assert "secret.kubernetes-secret" not in _rules(beside, engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_what_one_file_says_of_its_kind_is_not_carried_to_the_next(engine: str) -> None:
    key = _b64(PASSWORDS[4] + PASSWORDS[5])
    secret = f"kind: Secret\ndata:\n  tls.key: {key}\n"
    assert "secret.kubernetes-secret" in _rules(secret, engine)
    assert _rules(secret.replace("Secret", "Config"), engine) == set()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_byte_order_mark_before_the_kind_hides_nothing(engine: str) -> None:
    # editors on Windows write one; YAML readers, kubectl's included, skip it
    key = _b64(PASSWORDS[2] + PASSWORDS[5])
    marked = f"\ufeffkind: Secret\ndata:\n  tls.key: {key}\n"
    assert "secret.kubernetes-secret" in _rules(marked, engine)
    assert _rules(marked.replace("Secret", "ConfigMap"), engine) == set()
    first = f"\ufeffdata:\n  tls.key: {key}\nkind: Secret\n"
    assert "secret.kubernetes-secret" in _rules(first, engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_secret_whose_data_opens_a_list_item_is_read(engine: str) -> None:
    key = _b64(PASSWORDS[1] + PASSWORDS[3])
    for text in (
        f"kind: List\nitems:\n- data:\n    tls.key: {key}\n  kind: Secret\n",
        f"kind: List\nitems:\n  - data:\n      tls.key: {key}\n    kind: Secret\n",
    ):
        assert "secret.kubernetes-secret" in _rules(text, engine), text
        assert _rules(text.replace("Secret", "ConfigMap"), engine) == set(), text


@pytest.mark.parametrize("engine", ENGINES)
def test_a_comment_after_the_map_key_hides_nothing(engine: str) -> None:
    key = _b64(PASSWORDS[0] + PASSWORDS[5])
    data = f"kind: Secret\ndata:  # base64, see the runbook\n  tls.key: {key}\n"
    assert "secret.kubernetes-secret" in _rules(data, engine)
    plain = f"kind: Secret\nstringData: # plain text\n  DB_PASSWORD: {PASSWORDS[2]}\n"
    assert "secret.kubernetes-secret-stringdata" in _rules(plain, engine)
    assert _rules(data.replace("Secret", "ConfigMap"), engine) == set()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_comment_after_the_kind_hides_nothing(engine: str) -> None:
    key = _b64(PASSWORDS[3] + PASSWORDS[4])
    text = f"kind: Secret  # the database's\ndata:\n  tls.key: {key}\n"
    assert "secret.kubernetes-secret" in _rules(text, engine)
    # controls: another kind with the same comment; a kind named in a comment only
    assert _rules(text.replace("Secret", "ConfigMap", 1), engine) == set()
    quoted = f"kind: ConfigMap  # not a Secret\ndata:\n  tls.key: {key}\n"
    assert _rules(quoted, engine) == set()


def test_a_buffer_changed_in_place_is_read_again() -> None:
    # a caller may hand the same bytearray again with other bytes: what it said of its
    # kind before is not kept
    key = _b64(PASSWORDS[1] + PASSWORDS[2])
    buf = bytearray(f"kind: Config\ndata:\n  tls.key: {key}\n".encode())
    found = scan_buffer(buf, path="x.yaml", pii=False, engine="re")
    assert found == []
    buf[6:12] = b"Secret"
    found = scan_buffer(buf, path="x.yaml", pii=False, engine="re")
    assert "secret.kubernetes-secret" in {f.rule for f in found}
