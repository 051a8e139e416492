"""The tiny example builders, read back through the libraries' own functions."""

from __future__ import annotations

import json
import os
from pathlib import Path

import huggingface_hub as hh
import pytest

from ftmanifest.errors import UsageError
from ftmanifest.examples.tiny import DEPARTMENTS, build_dataset, build_model, read_texts
from tests.support.hubcache import build_hub_cache, git_blob_sha1, hub_etag


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {
        "llama": build_model(root / "llama", arch="llama", seed=0),
        "gpt2": build_model(root / "gpt2", arch="gpt2", seed=1),
    }


def _bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_dataset_is_chat_jsonl_covering_every_department(tmp_path: Path) -> None:
    files = build_dataset(tmp_path, n_train=20, n_eval=5, n_test=5)
    assert sorted(files) == ["eval", "test", "train"]
    rows = [json.loads(line) for line in files["train"].read_text("utf-8").splitlines()]
    assert len(rows) == 20
    assert {r["label"] for r in rows} == set(DEPARTMENTS)
    for r in rows:
        roles = [m["role"] for m in r["messages"]]
        assert roles == ["system", "user", "assistant"]
        assert r["messages"][-1]["content"] == r["label"]
    assert len(files["eval"].read_text("utf-8").splitlines()) == 5


def test_dataset_is_deterministic_for_a_seed(tmp_path: Path) -> None:
    a = build_dataset(tmp_path / "a", seed=3)
    b = build_dataset(tmp_path / "b", seed=3)
    c = build_dataset(tmp_path / "c", seed=4)
    assert all(a[k].read_bytes() == b[k].read_bytes() for k in a)
    assert a["train"].read_bytes() != c["train"].read_bytes()
    with pytest.raises(UsageError):
        build_dataset(tmp_path / "d", n_eval=-1)


def test_model_loads_with_transformers_and_matches_its_tokenizer(
    models: dict[str, Path], tmp_path: Path
) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    for arch, folder in models.items():
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(_bytes(folder))
        tok = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder)
        assert model.config.model_type == arch
        assert model.config.vocab_size == len(tok)
        assert model.config.num_hidden_layers == 2
        text = read_texts(build_dataset(tmp_path / arch, n_train=1, n_eval=0, n_test=0)["train"])
        ids = tok(text[1], return_tensors="pt")["input_ids"]
        assert tok.unk_token_id not in ids[0].tolist()  # the corpus covers the data
        with torch.no_grad():
            logits = model(ids).logits
        assert logits.shape == (1, ids.shape[1], len(tok))


def test_model_bytes_are_deterministic_and_rng_untouched(
    models: dict[str, Path], tmp_path: Path
) -> None:
    import torch

    torch.manual_seed(7)
    before = torch.random.get_rng_state()
    again = build_model(tmp_path / "again", arch="llama", seed=0)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert _bytes(again) == _bytes(models["llama"])
    other = build_model(tmp_path / "other", arch="llama", seed=5)
    assert _bytes(other)["model.safetensors"] != _bytes(again)["model.safetensors"]
    with pytest.raises(UsageError) as err:
        build_model(tmp_path / "bad", arch="bert")  # type: ignore[arg-type]
    assert err.value.field == "arch"


def test_hub_cache_is_read_by_huggingface_hub(models: dict[str, Path], tmp_path: Path) -> None:
    cache = tmp_path / "hub"
    repo_id = "acme/docroute-tiny"
    commits = build_hub_cache(
        cache, repo_id, {"v1": models["llama"], "v2": models["gpt2"]}, {"main": "v2", "old": "v1"}
    )
    assert commits["main"] == commits["v2"] != commits["v1"]
    assert all(len(c) == 40 and int(c, 16) >= 0 for c in commits.values())

    info = hh.scan_cache_dir(cache)
    assert info.warnings == []
    (repo,) = info.repos
    assert repo.repo_id == repo_id and repo.repo_type == "model"
    refs = {r.commit_hash: set(r.refs) for r in repo.revisions}
    assert refs == {commits["v2"]: {"main"}, commits["v1"]: {"old"}}
    assert all(r.nb_files == 5 for r in repo.revisions)

    snap = Path(hh.snapshot_download(repo_id, revision="main", cache_dir=cache,
                                     local_files_only=True))  # fmt: skip
    assert snap.name == commits["v2"] and snap.parent.name == "snapshots"
    for name, data in _bytes(models["gpt2"]).items():
        link = snap / name
        assert link.is_symlink() and not os.path.isabs(os.readlink(link))
        assert os.readlink(link) == f"../../blobs/{hub_etag(name, data)}"
        assert link.read_bytes() == data

    for rev, src in (("main", models["gpt2"]), (commits["v1"], models["llama"])):
        found = hh.try_to_load_from_cache(repo_id, "model.safetensors", cache_dir=cache,
                                          revision=rev)  # fmt: skip
        assert (
            isinstance(found, str)
            and Path(found).read_bytes() == (src / "model.safetensors").read_bytes()
        )
    assert hh.try_to_load_from_cache(repo_id, "nope.json", cache_dir=cache) is None


def test_blob_names_follow_the_hub_etags(models: dict[str, Path], tmp_path: Path) -> None:
    import hashlib

    weights = (models["llama"] / "model.safetensors").read_bytes()
    config = (models["llama"] / "config.json").read_bytes()
    assert hub_etag("model.safetensors", weights) == hashlib.sha256(weights).hexdigest()
    assert hub_etag("config.json", config) == git_blob_sha1(config)
    # `git hash-object` of "hello\n" is this well-known id
    assert git_blob_sha1(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"
    build_hub_cache(tmp_path, "a/b", {"v1": models["llama"]}, {})
    blobs = {p.name for p in (tmp_path / "models--a--b" / "blobs").iterdir()}
    assert hashlib.sha256(weights).hexdigest() in blobs
    assert git_blob_sha1(config) in blobs


def test_hub_cache_refuses_bad_arguments(models: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        build_hub_cache(tmp_path, "no-org", {"v1": models["llama"]}, {})
    with pytest.raises(UsageError) as err:
        build_hub_cache(tmp_path, "a/b", {"v1": models["llama"]}, {"main": "v9"})
    assert err.value.field == "refs.main"
