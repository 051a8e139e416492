"""The secret rule table: one small record per provider format.

Layer: judging rooms - pure core (scan rules).  A rule is found through literal
*keywords* (matched ASCII-case-insensitively; the multi-pattern engine only locates
them) and confirmed by a linear-time regex run in a small window around each keyword
hit, then by a validator.  Every rule carries true- and false-positive examples;
``tests/scan/secrets_rules_test.py`` runs all of them.
"""

from __future__ import annotations

from ftmanifest.scan.text import secrets as v
from ftmanifest.scan.text.gates import not_led_by
from ftmanifest.scan.text.rule import Rule as Rule  # re-exported: the rule modules import it here
from ftmanifest.scan.text.secret_contexts import CURL_USER_PASSWORD

_GEN_KEYS = r"(?:password|passwd|pwd|secret|token|api[_\-]?key|access[_\-]?key|auth[_\-]?key)"
_VALUE_EXCLUDED = r"\s\"'`,;(){}\[\]<>\\"  # bytes a generic assignment's value stops at
# Values ``generic_assignment`` refuses by their first bytes (``is_placeholder``: an
# environment reference or a placeholder word), left out by its Hyperscan gate.  None
# holds a digit: a value cut short inside one of them has none and is refused too.
_REFUSED_LEADS = (
    "os.environ", "os.getenv", "getenv", "process.env", "****", "your", "xxxx",
    *("$" + c for c in "abcdefghijklmnopqrstuvwxyz_"),
)  # fmt: skip

SECRET_RULES: tuple[Rule, ...] = (
    Rule(
        "secret.aws-access-key-id",
        "secret",
        "AWS access key id (AKIA, ASIA, ABIA, ACCA)",
        r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}",
        ("akia", "asia", "abia", "acca"),
        validator=v.aws_key_id,
        fwd=24,
        true_positives=(
            "key = AKIAQWB5PDKHX6PYGPAN",
            "ABIAZ3KD7QW2MPX4RT6N",
            "ACCA2QJ5VNKXW7LT3PRB",
        ),
        false_positives=("AKIAIOSFODNN7EXAMPLE", "XAKIAQWB5PDKHX6PYGPAN1"),
    ),
    Rule(
        "secret.aws-secret-access-key",
        "secret",
        "AWS secret access key assignment",
        r"aws[\w\-]{0,30}?secret[\w\-]{0,30}?[\"']?\s{0,3}[:=]{1,2}>?\s{0,3}[\"']?"
        r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        ("aws",),
        validator=v.provider_token,
        gate=r"aws[\w\-]{0,30}secret",
        gate_len=70,
        group=1,
        fwd=160,
        ignore_case=True,
        true_positives=(
            "aws_secret_access_key = 0JxXujr4qqaaABvvLOzAxzXMcU1vsHiQMaRiNTN9",
            'AWS_SECRET_ACCESS_KEY="0JxXujr4qqaaABvvLOzAxzXMcU1vsHiQMaRiNTN9"',
        ),
        false_positives=(
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_access_key = ${AWS_SECRET_ACCESS_KEY}",
        ),
    ),
    Rule(
        "secret.github-pat",
        "secret",
        "GitHub classic token (ghp_, gho_, ghu_, ghs_, ghr_)",
        r"gh[pousr]_[A-Za-z0-9]{36}",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        validator=v.provider_token,
        fwd=40,
        true_positives=(
            "token: ghp_SulEETldq8b8Vw2zbJYAxyL1aCcTlN99mhWp",
            "gho_708DwGw5HqXDgLVXZx3scB8fnvGNx6jvr7SI",
        ),
        false_positives=("ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "ghp_short1234"),
    ),
    Rule(
        "secret.github-fine-grained-pat",
        "secret",
        "GitHub fine-grained token (22, underscore, 59; older ones run 82 without it)",
        r"github_pat_[A-Za-z0-9_]{82}",
        ("github_pat_",),
        validator=v.provider_token,
        fwd=100,
        true_positives=(
            "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",
        ),
        false_positives=("github_pat_YOUR_TOKEN_HERE",),
    ),
    Rule(
        "secret.gitlab-pat",
        "secret",
        "GitLab personal access token",
        r"glpat-[A-Za-z0-9_\-]{20,300}(?:\.[0-9a-z]{9})?",  # routable: a dot and 9 more
        ("glpat-",),
        validator=v.provider_token,
        fwd=320,
        true_positives=("GITLAB_TOKEN=glpat-y0I9lO7F3vlfFrGYJ3Gx",),
        false_positives=("glpat-xxxxxxxxxxxxxxxxxxxx", "glpat-<your-token-here>"),
    ),
    Rule(
        "secret.gitlab-token",
        "secret",
        "GitLab token (deploy, runner, trigger, feed, OAuth, CI job, agent, SCIM, mail)",
        r"(?:(?:gloas|gldt|glrt|glptt|glft|glsoat|glimt|glcbt|glffct|glagent|glwt)-"
        r"[A-Za-z0-9_\-]{20,300}(?:\.[0-9a-z]{9})?|GR1348941[A-Za-z0-9_\-]{20,40})",
        ("gloas-", "gldt-", "glrt-", "glptt-", "glft-", "glsoat-", "glimt-", "glcbt-")
        + ("glffct-", "glagent-", "glwt-", "gr1348941"),
        validator=v.provider_token,
        fwd=330,
        true_positives=(
            "CI_DEPLOY_TOKEN=gldt-7Hq2vK9xLm4RtZ8wPb3N",
            "runner token glrt-t3_Wq8JzK2nV7xLm4RtZ9pB",
            "GR1348941Zq7Wm2Kx9Lv4Nt8Rb3Hc",
        ),
        false_positives=("gldt-xxxxxxxxxxxxxxxxxxxx", "glrt-<your-runner-token>"),
    ),
    Rule(
        "secret.aws-bedrock-api-key",
        "secret",
        "Amazon Bedrock API key (long-term ABSK, short-term bedrock-api-key-)",
        r"(?:ABSKQmVkcm9ja0FQSUtleS[A-Za-z0-9+/]{40,400}|"
        r"bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[A-Za-z0-9+/]{40,3000})={0,2}",
        ("absk", "bedrock-api-key-"),
        validator=v.provider_token,
        fwd=3100,
        true_positives=(
            "AWS_BEARER_TOKEN_BEDROCK=ABSKQmVkcm9ja0FQSUtleS1qb2huLWF0LTEyMzQ1Njc4OTAxMjpQ"
            "dDd3TGs4Vm41UXhSMm1aOWpCM3lIZkE2c0Q0Z0sxbk1vWjc=",
        ),
        false_positives=("ABSKQmVkcm9ja0FQSUtleS", "bedrock-api-key-<your key>"),
    ),
    Rule(
        "secret.huggingface-token",
        "secret",
        "Hugging Face access token",
        r"hf_[A-Za-z0-9]{34}",
        ("hf_",),
        validator=v.provider_token,
        gate=r"hf_[A-Za-z0-9]{34}",
        gate_len=37,
        fwd=40,
        true_positives=('{"hub_token": "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"}',),
        false_positives=("hf_hub_download(repo_id)", "hf_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
    ),
    Rule(
        "secret.huggingface-org-token",
        "secret",
        "Hugging Face organisation API token (api_org_)",
        r"api_org_[A-Za-z0-9]{34}",
        ("api_org_",),
        validator=v.provider_token,
        fwd=44,
        true_positives=('HF_API_TOKEN: "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"',),
        false_positives=("api_org_name = 'acme'", "api_org_" + "x" * 34),
    ),
    Rule(
        "secret.anthropic-api-key",
        "secret",
        "Anthropic API key",
        r"sk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_\-]{80,120}",
        ("sk-ant-",),
        validator=v.provider_token,
        fwd=140,
        true_positives=(
            "sk-ant-api03-e17SWjAEVaSZJ0oVeMmLRLTq10V7suW9zrlSaWnPsPW23C-L9WXuHM-G1cON_Ks9dp4FL"
            "frYb9JF8eF_ItKL-8pcqMKRLAA",
        ),
        false_positives=("sk-ant-api03-YOUR-KEY", "sk-ant-api03-" + "x" * 93),
    ),
    Rule(
        "secret.openai-api-key",
        "secret",
        "OpenAI API key (sk-, sk-proj-)",
        r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,200}",
        ("sk-",),
        validator=v.openai_key,
        gate=r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20}",
        gate_len=40,
        fwd=220,
        true_positives=(
            "OPENAI_API_KEY=sk-proj-Ds0GPRZwwrPwV81Aw71l33SCx9vHjHkm1x72EsSfUQUAkNX7",
            "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",
        ),
        false_positives=(
            "sk-learn-classification-pipeline",
            "task-proj-abcdefghijklmnopqrstu",
            "sk-proj-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        ),
    ),
    Rule(
        "secret.google-api-key",
        "secret",
        "Google API key",
        r"AIza[0-9A-Za-z_\-]{35}",
        ("aiza",),
        validator=v.provider_token,
        fwd=40,
        true_positives=("key=AIzad7SUqeaG6nyb229X8YzL7iMa3K8Nsv9-Qt2",),
        false_positives=("AIzaYOUR_API_KEY", "AIza" + "0" * 35),
    ),
    Rule(
        "secret.slack-token",
        "secret",
        "Slack token (xoxb-, xoxp-, ..., xoxe- refresh and config tokens)",
        r"(?:xoxe\.)?xox[abposre]-[0-9]{1,}-[0-9A-Za-z\-]{10,250}",
        ("xox",),
        validator=v.slack_token,
        fwd=270,
        true_positives=(
            "xoxb-980134110561-6701139124722-NlAZkeNncJgQyVerdKKhVz4N",
            "xoxe.xoxp-1-Mi0yLTQwMjIxMDYzMjgtNzQxNjM4NTk0NzQ0LTc0MTYzODU5NDg2MA",
            "xoxe-1-My0xLTQwMjIxMDYzMjgtNzQxNjM4NTk1MDk4LTQyYjQzNmRmNTc2ZGEx",
        ),
        false_positives=(
            "xoxb-your-token-here",
            "xoxo-hugs-and-kisses-forever",
            "xoxp-1234-5678-9012-8c4f1b2e9d7a3c6f5e0b4a1d2c3e9f7a",  # ids typed by hand
        ),
    ),
    Rule(
        "secret.slack-app-token",
        "secret",
        "Slack app-level token (xapp-)",
        r"xapp-[0-9]-[A-Z0-9]{9,12}-[0-9]{10,16}-[a-f0-9]{60,70}",
        ("xapp-",),
        validator=v.provider_token,
        fwd=110,
        true_positives=(
            "SLACK_APP_TOKEN=xapp-1-A04QW7JZB2K-4851773020134-"
            "3c9f1e7a5b2d4c6e8f0a1b3c5d7e9f2a4c6e8b0d1f3a5c7e9b2d4f6a8c0e1f3a",
        ),
        false_positives=("xapp-1-YOUR-APP-TOKEN",),
    ),
    Rule(
        "secret.slack-webhook",
        "secret",
        "Slack webhook URL (incoming webhooks, workflow and trigger URLs)",
        r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/"
        r"(?:T[A-Za-z0-9]{8,12}/[A-Za-z0-9]{8,16}/[A-Za-z0-9/]{10,80}|[A-Za-z0-9+/]{43,56})",
        ("hooks.slack.com",),
        validator=v.provider_token,
        back_chars="htps:/",
        back=8,
        fwd=120,
        true_positives=(
            "https://hooks.slack.com/services/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",
        ),
        false_positives=(
            "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        ),
    ),
    Rule(
        "secret.stripe-live-key",
        "secret",
        "Stripe live secret or restricted key",
        r"(?:sk|rk)_live_[0-9A-Za-z]{24,99}",
        ("sk_live_", "rk_live_"),
        validator=v.provider_token,
        fwd=110,
        true_positives=("sk_live_cf3hGMDpy4DE9ugYHbIUyd2j", "rk_live_88BRYoVhf6QF0niSNyw1psv7"),
        false_positives=("sk_test_cf3hGMDpy4DE9ugYHbIUyd2j", "sk_live_XXXXXXXXXXXXXXXXXXXXXXXX"),
    ),
    Rule(
        "secret.azure-storage-key",
        "secret",
        "Azure storage connection string AccountKey",
        r"AccountKey=([A-Za-z0-9+/]{86}==)",
        ("accountkey=",),
        validator=v.provider_token,
        group=1,
        fwd=110,
        true_positives=(
            "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=ssXBRbeX3bkSblzKIDESEF9nZBT6"
            "9rIA2vCZ26Xu7DNiT1Ekv8XwTYI4jlKSeBD2ELC8oR4L6fFPPKaV6HpTEQ==",
        ),
        false_positives=("AccountKey=<your-account-key>", "AccountKey=" + "A" * 86 + "=="),
    ),
    Rule(
        "secret.azure-sas-signature",
        "secret",
        "Azure SAS token signature",
        r"[?&]sig=([A-Za-z0-9%+/]{40,120})",
        ("sig=",),
        validator=v.azure_sas,
        back_chars="?&",
        group=1,
        back=1,
        fwd=130,
        true_positives=(
            "https://a.blob.core.windows.net/c?sv=2022-11-02&ss=b&se=2030-01-01"
            "&sig=zdDkZUNx7UKi7uEwAf3Ia7h50vfeSmjE/l8gFg+YhgG%3D",
        ),
        false_positives=("https://x.org/?sig=zdDkZUNx7UKi7uEwAf3Ia7h50vfeSmjE/l8gFg+YhgG%3D",),
    ),
    Rule(
        "secret.wandb-api-key",
        "secret",
        "Weights & Biases API key in a wandb context",
        r"wandb[\w.\-]{0,30}?(?:\(\s{0,3}key\s{0,3}=|[\"']?\s{0,3}[:=])\s{0,3}[\"']?"
        r"((?:local-)?[0-9a-f]{40})(?![0-9A-Za-z])",
        ("wandb",),
        validator=v.provider_token,
        gate=r"wandb[\w.\-]{0,30}(?:\(\s{0,3}key\s{0,3}=|[\"']?\s{0,3}[:=])",
        gate_len=60,
        group=1,
        fwd=140,
        ignore_case=True,
        true_positives=(
            "WANDB_API_KEY=de91165c672a325260ebfdc409e7349f28ca442f",
            'wandb.login(key="de91165c672a325260ebfdc409e7349f28ca442f")',
        ),
        false_positives=("wandb_run_id = 0123456789", "WANDB_API_KEY=$WANDB_API_KEY"),
    ),
    Rule(
        "secret.pypi-token",
        "secret",
        "PyPI upload token",
        r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,300}",
        ("pypi-ageichlwas5vcmc",),
        validator=v.provider_token,
        fwd=330,
        true_positives=(
            "pypi-AgEIcHlwaS5vcmcFk2FJh-FgzKVmj1OWaKqd4scg2InWqPiNvrH-PKeiddpgqT3HcD2qUzQTbuu",
        ),
        false_positives=("pypi-AgEIcHlwaS5vcmc", "pypi-AgEIcHlwaS5vcmc" + "x" * 60),
    ),
    Rule(
        "secret.npm-token",
        "secret",
        "npm access token",
        r"npm_[A-Za-z0-9]{36}",
        ("npm_",),
        validator=v.provider_token,
        fwd=40,
        true_positives=(
            "//registry.npmjs.org/:_authToken=npm_UgrHMkOTjCW8BYBhvuC6oDMBkCdXQ7kIEFMa",
        ),
        false_positives=("npm_config_cache_directory_for_builds", "npm_" + "x" * 36),
    ),
    Rule(
        "secret.azure-ad-client-secret",
        "secret",
        "Azure AD (Entra ID) client secret",
        r"[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.\-]{31,34}",
        ("q~",),
        validator=v.provider_token,
        back=4,
        back_chars="A-Za-z0-9_~.",
        fwd=40,
        true_positives=('client_secret = "Zx48Q~kV2pL9mN3qR7sT1wY5bC8dF0gH4jK6nM"',),
        false_positives=("abc8Q~short", "Zx48Q~" + "x" * 32),
    ),
    CURL_USER_PASSWORD,
    Rule(
        "secret.planetscale-token",
        "secret",
        "PlanetScale service token, password or OAuth token",
        r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.=\-]{32,64}",
        ("pscale_",),
        validator=v.provider_token,
        fwd=80,
        true_positives=("DATABASE_PASSWORD=pscale_pw_Tq8Wm2Kx9Lv4Nt8Rb3HcZ7pY5sD1fG6jQ0eA",),
        false_positives=("pscale_pw_<your-password-here-xxxxxxxxxxxxxxx>",),
    ),
    Rule(
        "secret.age-identity",
        "secret",
        "age secret key (an identity that decrypts backups)",
        r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        ("age-secret-key-1",),
        validator=v.provider_token,
        fwd=80,
        true_positives=(
            "AGE-SECRET-KEY-1" + "GDM32KU5WS06KWFGDZZTPC5JVQRHZGSJ7DXGLS3VJH7G4NUYURFS68E4F5",
        ),
        false_positives=("AGE-SECRET-KEY-1XXXXXXXX",),
    ),
    Rule(
        "secret.private-key",
        "secret",
        "private key block (PEM, OpenSSH, PGP)",
        r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:\\r|\\n|\s){1,8}"
        r"(?:[A-Za-z\-]{1,20}: [^\r\n\\]{1,100}(?:\\r|\\n|\s){1,4}){0,4}[A-Za-z0-9+/=]{40}",
        ("-----begin",),
        validator=v.private_key,
        fwd=600,
        true_positives=(
            "-----BEGIN RSA PRIVATE KEY-----\nWbnxXcOdNX8Z5hs1UcAKKjdlT0NbJEjelMSA9lpER2YaXWwAPXPnVFmBLNIjvj0x\n",  # noqa: E501
            '{"key": "-----BEGIN OPENSSH PRIVATE KEY-----\\nWbnxXcOdNX8Z5hs1UcAKKjdlT0NbJEjelMSA9lpER2Y\\n"}',  # noqa: E501
        ),
        false_positives=(
            "-----BEGIN PUBLIC KEY-----\nWbnxXcOdNX8Z5hs1UcAKKjdlT0NbJEjelMSA9lpER2Y\n",
            "-----BEGIN PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----",
        ),
    ),
    Rule(
        "secret.jwt",
        "secret",
        "JSON Web Token",
        r"eyJ[A-Za-z0-9_\-]{8,2000}\.eyJ[A-Za-z0-9_\-]{4,8000}\.[A-Za-z0-9_\-]{8,2000}",
        ("eyj",),
        validator=v.jwt,
        fwd=12100,
        true_positives=(
            "Authorization: Bearer eyJhbGciOiAiSFMyNTYiLCAidHlwIjogIkpXVCJ9.eyJzdWIiOiAiMTIzNDU2"
            "Nzg5MCIsICJuYW1lIjogIkFkYSIsICJpYXQiOiAxNTE2MjM5MDIyfQ.nq1gAaeE9TY7BzJzMTEUTFh-ZSssE",
        ),
        false_positives=("eyJub3QiOiAiand0In0.eyJhIjogMX0.abcdefghijkl",),
    ),
    Rule(
        "secret.url-password",
        "secret",
        "URL with an embedded password",
        r"[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^\s:@/\"'<>\\]{1,64}:([^\s:@/\"'<>\\]{3,128})@"
        r"[A-Za-z0-9.\-]{2,253}",
        ("://",),
        validator=v.url_password,
        back_chars=r"A-Za-z0-9+.\-",
        gate=r"://[^\s:@/\"'<>\\]{1,64}:[^\s:@/\"'<>\\]{3,128}@",  # the regex up to its @
        gate_len=197,
        group=1,
        back=22,
        fwd=480,
        true_positives=("postgres://admin:oPeKKO1O4IUAAoBE@db.internal.corp:5432/app",),
        false_positives=(
            "postgres://user:password@localhost/db",
            "https://user:${DB_PASSWORD}@db.example.com",
            "https://github.com/a/b",
        ),
    ),
    Rule(
        "secret.generic-assignment",
        "secret",
        "high-entropy value assigned to a secret-like key",
        r"[\w.\-]{0,40}" + _GEN_KEYS + r"[\w.\-]{0,40}[\"']?\s{0,3}(?::=|=>|=|:)\s{0,3}[\"']?"
        r"([^\s\"'`,;(){}\[\]<>\\]{8,200})",
        (
            "password",
            "passwd",
            "pwd",
            "secret",
            "token",
            "api_key",
            "apikey",
            "api-key",
            "access_key",
            "accesskey",
            "auth_key",
        ),
        validator=v.generic_assignment,
        back_chars=r"\w.\-",
        gate=_GEN_KEYS
        + r"[\w.\-]{0,40}[\"']?\s{0,3}(?::=|=>|=|:)\s{0,3}[\"']?"
        + not_led_by(_REFUSED_LEADS, _VALUE_EXCLUDED, 8),
        gate_len=130,
        group=1,
        back=48,
        fwd=300,
        ignore_case=True,
        severity="warning",
        true_positives=(
            'db_password = "oPeKKO1O4IUAAoBE"',
            '{"client_secret": "x9Q2mZ7vR4tL8wK1pN"}',
            "ACCESS_KEY: Ab7eQG1w3",
            "secretStoreVaultKey: ml-prod-4Xq1R902Kb",
            "ACCESS_KEY: AbCeFG123",  # typed like an example, a value all the same
            'vault_password = "correct-horse-battery-staple9"',  # a passphrase
        ),
        false_positives=(
            'password = "YOUR_PASSWORD"',
            "api_key = os.environ['API_KEY']",
            '"tokenizer_class": "LlamaTokenizer2Fast"',
            '"max_tokens": 4096',
            "token = ${HF_TOKEN}",
            "secret_sha = 3f786850e387550fdab836ed7e6dc881de23001b",
            "secretStoreVault: ml-prod-4471902285",  # a resource's name
        ),
    ),
)
