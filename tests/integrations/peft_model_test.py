"""The model as it will compute, judged before step 1: real peft models on
the tiny bases, built exactly as a training script builds them, against the manifest's
``method``.  A LoRA r=8 under a manifest of r=4 was noticed only when the first
checkpoint was bound; a LoRA under ``method: full`` never."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ftmanifest.findings import Finding
from ftmanifest.integrations.peft_model import judge_peft_model, resolved_peft
from tests.adapter.conftest import make_model

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

WHERE = "exp.yaml"
LORA: dict[str, Any] = {"kind": "lora", "r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}
LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def manifest(method: dict[str, Any] | None = None) -> Any:
    from ftmanifest.manifest.model import Manifest

    body: dict[str, Any] = {"ftmanifest": 1, "experiment": {"id": "t"}, "model": {"path": "b"}}
    if method is not None:
        body["method"] = method
    return Manifest.model_validate(body)


def lora_model(arch: str = "llama", **config: Any) -> Any:
    from peft import LoraConfig, get_peft_model

    kw: dict[str, Any] = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    kw.update(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return get_peft_model(make_model(arch, 0), LoraConfig(**kw))


def judge(model: Any, method: dict[str, Any] | None) -> list[Finding]:
    rows = judge_peft_model(model, manifest(method), WHERE)
    for f in rows:  # every refusal names the file, the field, both sides and a fix
        assert (f.kind, f.rule, f.path) == ("drift", "drift.method", WHERE), f
        assert f.field and f.field.startswith("method") and f.loc and f.loc[0] == "method", f
        assert f.expected and f.observed and f.hint, f
    return rows


def fields(rows: list[Finding]) -> set[str]:
    return {str(f.field) for f in rows}


def test_the_manifests_lora_passes() -> None:
    assert judge(lora_model(), LORA) == []


def test_lora_r8_under_a_manifest_of_r4_is_refused_before_any_step() -> None:
    rows = judge(lora_model(r=8), LORA)
    (row,) = rows
    assert (row.field, row.expected, row.observed) == ("method.r", "4", "8")


def test_a_peft_model_under_full_fine_tuning_is_refused() -> None:
    for method in ({"kind": "full"}, None):
        (row,) = judge(lora_model(), method)
        assert row.field == "method.kind" and "LORA" in row.message


def test_a_plain_model_under_lora_is_refused() -> None:
    (row,) = judge(make_model("llama", 0), LORA)
    assert row.field == "method.kind"
    assert (
        row.message == "the model has no adapter and the manifest declares LoRA (method.kind: lora)"
    )


def test_full_fine_tuning_trains_everything_but_frozen_modules() -> None:
    model = make_model("llama", 0)
    assert judge(model, {"kind": "full"}) == []
    model.model.embed_tokens.weight.requires_grad_(False)
    (row,) = judge(model, {"kind": "full"})
    assert row.field == "method.frozen_modules" and "model.embed_tokens.weight" in str(row.observed)
    assert judge(model, {"kind": "full", "frozen_modules": ["embed_tokens"]}) == []
    model.model.embed_tokens.weight.requires_grad_(True)
    (row,) = judge(model, {"kind": "full", "frozen_modules": ["embed_tokens"]})
    assert row.expected == "frozen"
    count = sum(p.numel() for p in model.parameters())
    assert judge(model, {"kind": "full", "trainable_params": count}) == []
    assert fields(judge(model, {"kind": "full", "trainable_params": count - 1})) == {
        "method.trainable_params"
    }
    assert fields(judge(model, {"kind": "full", "frozen_modules": ["nothere"]})) == {
        "method.frozen_modules"
    }


@pytest.mark.parametrize(
    "targets",
    ["all-linear", r"model\.layers\.\d+\.(self_attn|mlp)\.\w+_proj", list(LINEAR), "expanded"],
)
def test_all_linear_a_regex_and_the_expansion_agree(targets: Any) -> None:
    model = lora_model(target_modules="all-linear")
    if targets == "expanded":
        targets = resolved_peft(model)["wrapped"]
    assert judge(model, {**LORA, "target_modules": targets}) == []
    assert judge(lora_model(target_modules=targets), {**LORA, "target_modules": "all-linear"}) == []


def test_other_targets_name_the_missing_and_extra_modules() -> None:
    (row,) = judge(lora_model(target_modules=["q_proj", "k_proj"]), LORA)
    assert row.field == "method.target_modules"
    assert row.extra["missing"] == [
        "model.layers.0.self_attn.v_proj",
        "model.layers.1.self_attn.v_proj",
    ]
    assert row.extra["extra"] == [
        "model.layers.0.self_attn.k_proj",
        "model.layers.1.self_attn.k_proj",
    ]


def test_rank_pattern_declared_passes_and_another_is_refused() -> None:
    model = lora_model(rank_pattern={"q_proj": 2}, alpha_pattern={"layers.1.self_attn.v_proj": 3})
    declared = {**LORA, "rank_pattern": {r"self_attn\.q_proj": 2},
                "alpha_pattern": {"model.layers.1.self_attn.v_proj": 3}}  # fmt: skip
    assert judge(model, declared) == []
    assert fields(judge(model, LORA)) == {"method.rank_pattern", "method.alpha_pattern"}
    other = {**declared, "rank_pattern": {"layers.0.self_attn.q_proj": 2}}
    (row,) = judge(model, other)
    assert row.field == "method.rank_pattern"
    assert row.expected == "model.layers.1.self_attn.q_proj=4" and str(row.observed).endswith("=2")


@pytest.mark.parametrize(
    ("config", "field", "declared"),
    [({"layer_replication": [(0, 2), (1, 2)]}, "method.layer_replication",
      {"layer_replication": [[0, 2], [1, 2]]}),
     ({"init_lora_weights": "olora"}, "method.init", {"init": "olora"}),
     ({"use_dora": True}, "method.use_dora", {"use_dora": True}),
     ({"modules_to_save": ["lm_head"]}, "method.modules_to_save", {"modules_to_save": ["lm_head"]}),
     ({"lora_bias": True}, "method.lora_bias", None)],
)  # fmt: skip
def test_a_setting_that_changes_computation_must_be_declared(
    config: dict[str, Any], field: str, declared: dict[str, Any] | None
) -> None:
    model = lora_model(**config)
    assert field in fields(judge(model, LORA))
    if declared is not None:
        assert judge(model, {**LORA, **declared}) == []


def test_module_values_changed_after_wrapping_are_seen() -> None:
    """The live layers are read, not only the config peft keeps."""
    model = lora_model()
    layer = model.base_model.model.model.layers[0].self_attn.q_proj
    layer.scaling["default"] = 10.0
    (row,) = judge(model, LORA)
    assert row.field == "method.alpha" and "q_proj=10" in str(row.observed)


def test_only_the_adapter_trains() -> None:
    model = lora_model()
    model.base_model.model.model.norm.weight.requires_grad_(True)
    (row,) = judge(model, LORA)
    assert row.field == "method.trainable_params" and row.observed == "model.norm.weight"
    frozen = lora_model(inference_mode=True)
    (row,) = judge(frozen, LORA)
    assert "frozen" in row.message and "lora_A.default.weight" in str(row.observed)
    count = lora_model().get_nb_trainable_parameters()[0]
    assert judge(lora_model(), {**LORA, "trainable_params": count}) == []
    (row,) = judge(lora_model(), {**LORA, "trainable_params": count + 1})
    assert (row.expected, row.observed) == (str(count + 1), str(count))


def _ia3() -> Any:
    from peft import IA3Config, get_peft_model

    config = IA3Config(target_modules=["q_proj", "v_proj", "down_proj"],
                       feedforward_modules=["down_proj"])  # fmt: skip
    return get_peft_model(make_model("llama", 0), config)


IA3: dict[str, Any] = {"kind": "peft", "peft_type": "IA3",
       "config": {"target_modules": ["v_proj", "q_proj", "down_proj"],
                  "feedforward_modules": ["down_proj"]}}  # fmt: skip


def test_ia3_declared_passes_and_its_config_is_compared() -> None:
    model = _ia3()
    assert judge(model, IA3) == []
    other = {**IA3, "config": {**IA3["config"], "feedforward_modules": []}}
    assert fields(judge(model, other)) == {"method.config.feedforward_modules"}
    assert fields(judge(model, {**IA3, "peft_type": "LOHA"})) == {"method.kind"}


def test_ia3_under_lora_is_one_plain_sentence() -> None:
    (row,) = judge(_ia3(), LORA)
    assert row.field == "method.kind"
    assert row.message == "the model is IA3 and the manifest declares LoRA (method.kind: lora)"


def test_resolved_peft_is_json() -> None:
    import json

    facts = resolved_peft(lora_model(target_modules="all-linear", lora_dropout=0.1))
    assert json.loads(json.dumps(facts)) == facts
    assert facts["peft"] and facts["peft_type"] == "LORA" and len(facts["wrapped"]) == 14
    q = facts["modules"]["model.layers.0.self_attn.q_proj"]
    assert (q["r"], q["alpha"], q["scaling"], q["dropout"]) == (4, 8.0, 2.0, 0.1)
    plain = resolved_peft(make_model("llama", 0))
    assert not plain["peft"] and plain["wrapped"] == []


def test_a_model_that_cannot_be_read_is_a_row_not_a_pass() -> None:
    (row,) = judge(object(), LORA)
    assert row.field == "method" and row.severity == "error"


# --- property: one change to the LoraConfig is always refused -------------------


def one(key: str, values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return values.map(lambda v: {key: v})


OTHER_TARGETS = st.sets(st.sampled_from(LINEAR), min_size=1).filter(
    lambda t: t != {"q_proj", "v_proj"}
)
CHANGES = st.one_of(
    one("r", st.integers(1, 12).filter(lambda r: r != 4)),
    one("lora_alpha", st.sampled_from([1, 2, 4, 16, 32, 7.5])),
    one("lora_dropout", st.sampled_from([0.05, 0.1, 0.5])),
    one("target_modules", OTHER_TARGETS.map(sorted)),
    one("bias", st.sampled_from(["all", "lora_only"])),
    one("use_rslora", st.just(True)),
    one("use_dora", st.just(True)),
    one("rank_pattern", st.dictionaries(st.sampled_from(["q_proj", "layers.1.self_attn.v_proj"]),
                                        st.integers(1, 8).filter(lambda r: r != 4), min_size=1)),
    one("alpha_pattern", st.dictionaries(st.sampled_from(["v_proj", r"layers\.0\..*"]),
                                         st.sampled_from([1, 4, 16]), min_size=1)),
    one("modules_to_save", st.sampled_from(["lm_head", "embed_tokens", "norm"]).map(lambda m: [m])),
    one("init_lora_weights", st.sampled_from(["gaussian", False, "olora", "pissa"])),
)  # fmt: skip


@given(change=CHANGES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_single_change_to_the_lora_config_is_refused(change: dict[str, Any]) -> None:
    assert judge(lora_model(**change), LORA) != [], change


METHODS = st.fixed_dictionaries(
    {"kind": st.just("lora"), "r": st.integers(1, 8), "alpha": st.sampled_from([1, 8, 16.0]),
     "target_modules": st.one_of(st.just("all-linear"), st.just(r".*\.(q|k)_proj"),
                                 st.lists(st.sampled_from(LINEAR), min_size=1, unique=True))},
    optional={"dropout": st.sampled_from([0.0, 0.1]), "bias": st.sampled_from(["none", "all"]),
              "use_rslora": st.booleans(), "use_dora": st.booleans(),
              "rank_pattern": st.just({"q_proj": 2}), "alpha_pattern": st.just({"layers.0.*": 3}),
              "modules_to_save": st.just(["lm_head"]), "init": st.sampled_from([True, "gaussian"]),
              "exclude_modules": st.just(["down_proj"])},
)  # fmt: skip


@given(method=METHODS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_config_built_from_the_manifest_always_passes(method: dict[str, Any]) -> None:
    from peft import get_peft_model

    from ftmanifest.integrations.builders import lora_config

    m = manifest(method)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = get_peft_model(make_model("llama", 0), lora_config(m))
        except ValueError:  # peft refuses the combination (all targets excluded...)
            return
    assert judge_peft_model(model, m, WHERE) == []
