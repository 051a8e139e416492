from __future__ import annotations

import pytest

from ftmanifest.scan.text.pii import PII_RULES
from ftmanifest.scan.text.secret_rules import SECRET_RULES
from ftmanifest.scan.text.text import scan_buffer
from tests.scan.engines import AVAILABLE, ENGINES

RULES = SECRET_RULES + PII_RULES
TP = [(r.id, ex) for r in RULES for ex in r.true_positives]
FP = [(r.id, ex) for r in RULES for ex in r.false_positives]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("rule", "example"), TP)
def test_true_positive(engine: str, rule: str, example: str) -> None:
    found = scan_buffer(example.encode(), path="x", engine=engine)
    assert rule in {f.rule for f in found}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("rule", "example"), FP)
def test_false_positive(engine: str, rule: str, example: str) -> None:
    found = scan_buffer(example.encode(), path="x", engine=engine)
    assert rule not in {f.rule for f in found}


def test_every_rule_has_examples() -> None:
    for r in RULES:
        assert r.true_positives and r.false_positives, r.id


HARD_NEGATIVES = [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "sha512-"
    + "z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg==",
    'integrity="sha384-oqVuAfXRKap7fdgcCY5uykM6+R9GqQ8K/uxy9rx7HNQlGYl1kPzQho1wx4JwY8wC"',
    "id 123e4567-e89b-12d3-a456-426614174000",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    "api_key = YOUR_API_KEY",
    "AKIAIOSFODNN7EXAMPLE",
    "token: xxxxxxxxxxxxxxxxxxxxxxxx",
    "password: <token>",
    'HF_TOKEN="${HF_TOKEN}"',
    "secret = os.environ['SECRET_KEY']",
    "token = process.env.GITHUB_TOKEN",
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("text", HARD_NEGATIVES)
def test_hard_negatives_stay_quiet(engine: str, text: str) -> None:
    assert scan_buffer(text.encode(), path="x", engine=engine) == []


def test_tokenizer_vocabulary_is_quiet(tmp_path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, trainers

    corpus = [
        "the model tokenizes text with a byte level bpe trained here",
        "secret sauce: password managers and api keys are discussed in prose",
        "def forward(self, x): return self.proj(x) + 1.5e-3 * x",
    ] * 200
    tok = tokenizers.Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator(corpus, trainer)
    out = tmp_path / "tokenizer.json"
    tok.save(str(out))
    for engine in AVAILABLE:
        assert scan_buffer(out.read_bytes(), path=str(out), engine=engine) == []


def test_excerpt_never_reveals_the_secret() -> None:
    secret = "ghp_SulEETldq8b8Vw2zbJYAxyL1aCcTlN99mhWp"
    (f,) = scan_buffer(f"x = '{secret}'".encode(), path="x")
    text = repr(f.to_dict())
    assert secret not in text and secret[4:12] not in text
    assert f.excerpt == "ghp_****…(40 chars)"


def test_fingerprint_is_independent_of_position() -> None:
    secret = "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"
    a = scan_buffer(f"{secret}\n".encode(), path="x")
    b = scan_buffer(f"\n\n  token {secret}\n".encode(), path="y")
    assert a[0].fingerprint == b[0].fingerprint and a[0].line != b[0].line
