"""What besides the weights changes an adapter's outputs is bound and compared:
the tokenizer (in the adapter folder and the base's), generation_config.json and
config.json's keys; a loaded base cast to another dtype or resized is named so.

Each attack first shows with the real loaders (transformers' tokenizer, generate,
peft) that the difference changes token ids or outputs, then that ``bind``,
``check-adapter`` or ``load_bound`` refuse it, naming the file and the key.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.adapter import AdapterRefusedError, load_bound
from ftmanifest.adapter.bind import BindRefusedError, bind_adapter
from ftmanifest.adapter.check import check_adapter
from ftmanifest.findings import Finding
from tests.adapter.conftest import copy_tree, train_adapter, trust_repo, write_manifest

TEXT = "hello , my invoice is wrong ."
TEMPLATE = "{% for m in messages %}<s> {{ m['content'] }} </s>{% endfor %}"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, signer: Any) -> Path:
    """A git repo with a trusted key, a tiny Llama base with its tokenizer and
    generation_config.json, a one-step LoRA adapter, a manifest, bound."""
    import transformers

    from ftmanifest.examples.tiny import build_model

    transformers.logging.set_verbosity_error()
    root = tmp_path_factory.mktemp("outputs")
    trust_repo(root, signer)
    build_model(root / "base", arch="llama", seed=0)
    train_adapter(root / "base", root / "adapter", "llama")
    write_manifest(root, "base", "llama")
    return root


def fresh(project: Path, tmp_path: Path) -> Path:
    return copy_tree(project, tmp_path / "p")


def bind(p: Path, key: Any) -> None:
    bind_adapter(p / "adapter", p / "exp.json", key, use_cache=False)


def errors(p: Path) -> list[Finding]:
    report = check_adapter(p / "adapter", manifest=p / "exp.json", use_cache=False)
    return [f for f in report.findings if f.severity == "error"]


def one(found: list[Finding], rule: str) -> Finding:
    hits = [f for f in found if f.rule == rule]
    assert hits, found
    hit = hits[0]
    assert hit.path and hit.field and hit.expected and hit.observed and hit.hint
    return hit


def other_tokenizer(folder: Path) -> None:
    """The base's corpus with two words made frequent: the same words, other ids."""
    from ftmanifest.examples.tiny import build_tokenizer, default_corpus

    build_tokenizer(folder, [*default_corpus(0), *["invoice wrong"] * 200])


def ids(folder: Path) -> list[int]:
    from transformers import AutoTokenizer

    return list(AutoTokenizer.from_pretrained(str(folder))(TEXT)["input_ids"])


def adapter_logits(p: Path, tokenizer: Path) -> Any:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(str(p / "base")), str(p / "adapter")
    ).eval()
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids(tokenizer)])).logits


# --- controls ---------------------------------------------------------------


def test_an_unchanged_base_and_adapter_pass(project: Path, tmp_path: Path, signer: Any) -> None:
    p = fresh(project, tmp_path)
    bind(p, signer)
    assert errors(p) == []
    assert load_bound(p / "adapter", manifest=p / "exp.json") is not None


@pytest.mark.parametrize("how", ["copied", "re-saved"])
def test_the_base_tokenizer_in_the_adapter_folder_passes(
    project: Path, tmp_path: Path, signer: Any, how: str
) -> None:
    from transformers import AutoTokenizer

    p = fresh(project, tmp_path)
    if how == "copied":
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(p / "base" / name, p / "adapter" / name)
    else:  # what a training script does: tokenizer.save_pretrained(adapter folder)
        AutoTokenizer.from_pretrained(str(p / "base")).save_pretrained(str(p / "adapter"))
    bind(p, signer)
    assert errors(p) == []


# --- the adapter folder's tokenizer ------------------------------------------


def test_another_vocabulary_in_the_adapter_folder_is_refused(
    project: Path, tmp_path: Path, signer: Any
) -> None:
    p = fresh(project, tmp_path)
    other_tokenizer(p / "adapter")
    assert ids(p / "adapter") != ids(p / "base")
    assert (adapter_logits(p, p / "adapter") - adapter_logits(p, p / "base")).abs().max() > 1e-4
    with pytest.raises(BindRefusedError) as info:
        bind(p, signer)
    hit = one(list(info.value.findings), "adapter.tokenizer-differs")
    assert hit.field == "vocab" and hit.path.endswith("tokenizer.json")
    assert "other token ids" in hit.message


def _chat_template(folder: Path) -> None:
    path = folder / "tokenizer_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "chat_template": TEMPLATE}))


def _eos(folder: Path) -> None:
    path = folder / "tokenizer_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "eos_token": "<pad>"}))


@pytest.mark.parametrize(("edit", "field"), [(_chat_template, "chat_template"),
                                             (_eos, "tokenizer_config.eos_token")])  # fmt: skip
def test_a_signed_adapter_tokenizer_unlike_the_base_is_refused(
    project: Path, tmp_path: Path, signer: Any, edit: Any, field: str
) -> None:
    """An adapter bound with a tokenizer copy, edited, then signed again as a
    binding writer that never compared it would: check-adapter and load_bound refuse."""
    from transformers import AutoTokenizer

    from ftmanifest.adapter.signed import read_signed, sign_binding

    p = fresh(project, tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(p / "base" / name, p / "adapter" / name)
    bind(p, signer)
    edit(p / "adapter")
    mine, base = (AutoTokenizer.from_pretrained(str(f)) for f in (p / "adapter", p / "base"))
    if field == "chat_template":
        chat = [{"role": "user", "content": TEXT}]
        assert base.chat_template is None and mine.apply_chat_template(chat, tokenize=True)
    else:
        assert mine.eos_token_id != base.eos_token_id  # generation stops elsewhere
    binding = read_signed(p / "adapter", use_cache=False).binding
    assert binding is not None
    sign_binding(p / "adapter", binding, signer, use_cache=False)
    hit = one(errors(p), "adapter.tokenizer-differs")
    assert hit.field == field and hit.path.endswith("tokenizer_config.json")
    with pytest.raises(AdapterRefusedError) as info:
        load_bound(p / "adapter", manifest=p / "exp.json")
    assert one(list(info.value.findings), "adapter.tokenizer-differs").field == field


# --- the base changed after binding ------------------------------------------


def test_the_base_tokenizer_changed_after_binding_is_refused(
    project: Path, tmp_path: Path, signer: Any
) -> None:
    p = fresh(project, tmp_path)
    bind(p, signer)
    before = ids(p / "base")
    other_tokenizer(p / "base")
    assert ids(p / "base") != before
    hit = one(errors(p), "adapter.base-tokenizer-differs")
    assert hit.field == "vocab" and hit.path == str(p / "base" / "tokenizer.json")
    with pytest.raises(AdapterRefusedError) as info:
        load_bound(p / "adapter", manifest=p / "exp.json")
    assert one(list(info.value.findings), "adapter.base-tokenizer-differs").field == "vocab"


def test_the_base_generation_config_changed_after_binding_is_refused(
    project: Path, tmp_path: Path, signer: Any
) -> None:
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    p = fresh(project, tmp_path)
    bind(p, signer)
    model = AutoModelForCausalLM.from_pretrained(str(p / "base")).eval()
    prompt = torch.tensor([ids(p / "base")])
    gen = p / "base" / "generation_config.json"
    before = model.generate(prompt, generation_config=GenerationConfig.from_pretrained(gen.parent))
    gen.write_text(json.dumps({**json.loads(gen.read_text()), "max_new_tokens": 2}))
    after = model.generate(prompt, generation_config=GenerationConfig.from_pretrained(gen.parent))
    assert after.shape != before.shape
    hit = one(errors(p), "adapter.base-generation-differs")
    assert hit.field == "max_new_tokens" and hit.path == str(gen)
    assert (hit.expected, hit.observed) == ("absent", "2")
    with pytest.raises(AdapterRefusedError) as info:
        load_bound(p / "adapter", manifest=p / "exp.json")
    assert one(list(info.value.findings), "adapter.base-generation-differs").path == str(gen)


def test_a_changed_config_key_is_named(project: Path, tmp_path: Path, signer: Any) -> None:
    p = fresh(project, tmp_path)
    bind(p, signer)
    cfg = p / "base" / "config.json"
    cfg.write_text(json.dumps({**json.loads(cfg.read_text()), "rope_theta": 20.0}))
    hit = one(errors(p), "adapter.base-config-differs")
    assert "rope_theta" in hit.message and "20.0 here" in hit.message


# --- what load_bound loads ----------------------------------------------------


def test_a_base_loaded_in_bf16_is_refused_naming_the_cast(
    project: Path, tmp_path: Path, signer: Any
) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    p = fresh(project, tmp_path)
    bind(p, signer)
    model = AutoModelForCausalLM.from_pretrained(str(p / "base"), dtype=torch.bfloat16)
    with pytest.raises(AdapterRefusedError) as info:
        load_bound(p / "adapter", manifest=p / "exp.json", model=model)
    hit = one(list(info.value.findings), "adapter.base-weights-differ")
    assert hit.field == "base.dtype" and (hit.expected, hit.observed) == ("F32", "BF16")
    assert "dtype cast" in hit.message


def test_a_resized_vocabulary_is_refused_naming_it(
    project: Path, tmp_path: Path, signer: Any
) -> None:
    from transformers import AutoModelForCausalLM

    p = fresh(project, tmp_path)
    bind(p, signer)
    model = AutoModelForCausalLM.from_pretrained(str(p / "base"))
    size = model.config.vocab_size
    model.resize_token_embeddings(size + 8)
    with pytest.raises(AdapterRefusedError) as info:
        load_bound(p / "adapter", manifest=p / "exp.json", model=model)
    hit = one(list(info.value.findings), "adapter.base-weights-differ")
    assert "resized vocabulary" in hit.message
    assert (hit.field, hit.expected, hit.observed) == ("vocab_size", str(size), str(size + 8))


# --- bindings written before the tokenizer was bound ---------------------------


def test_an_old_binding_is_checked_as_far_as_it_goes(
    project: Path, tmp_path: Path, signer: Any
) -> None:
    from ftmanifest.adapter.signed import read_signed, sign_binding

    p = fresh(project, tmp_path)
    bind(p, signer)
    binding = read_signed(p / "adapter", use_cache=False).binding
    assert binding is not None and binding.base_outputs is not None
    old = dataclasses.replace(binding, base_outputs=None, file_sizes={})
    assert "outputs" not in json.dumps(old.predicate())
    sign_binding(p / "adapter", old, signer, use_cache=False)
    report = check_adapter(p / "adapter", manifest=p / "exp.json", use_cache=False)
    assert report.ok
    warn = one(report.findings, "adapter.binding-outdated")
    assert warn.severity == "warning" and "bind" in warn.hint
    other_tokenizer(p / "adapter")  # what can be checked still is: the adapter's own tokenizer
    sign_binding(p / "adapter", old, signer, use_cache=False)
    assert one(errors(p), "adapter.tokenizer-differs").field == "vocab"
