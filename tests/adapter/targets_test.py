"""One resolver of peft's target rules: checked against real peft on tiny
models, from the live model and from the base's headers, and used alike by bind and
check-adapter, so ``all-linear``, a regex and their explicit expansion agree."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ftmanifest.adapter import headers
from ftmanifest.adapter.bind import BindRefusedError, bind_adapter
from ftmanifest.adapter.check import check_adapter
from ftmanifest.adapter.tensors import tensor_shapes, weight_files
from ftmanifest.manifest import targets as tg
from tests.adapter.conftest import copy_tree, make_model, trust_repo, write_manifest

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

# GPT-2's all-linear: every Conv1D of both blocks, not the tied lm_head
GPT2_ALL = [f"transformer.h.{i}.{m}" for i in (0, 1)
            for m in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")]  # fmt: skip

CASES: list[tuple[str, dict[str, Any]]] = [
    ("gpt2", {"target_modules": "all-linear"}),
    ("gpt2", {"target_modules": "ALL-LINEAR", "exclude_modules": ["c_fc"]}),
    ("gpt2", {"target_modules": ["c_attn", "lm_head"]}),
    ("gpt2", {"target_modules": ["c_attn", "wte"], "modules_to_save": ["lm_head"]}),
    ("llama", {"target_modules": "all-linear"}),
    ("llama", {"target_modules": r".*\.(q|v)_proj", "rank_pattern": {"q_proj": 2},
               "alpha_pattern": {"layers.0.self_attn.v_proj": 3}}),
    ("llama", {"target_modules": "all-linear", "exclude_modules": r".*layers\.0\..*"}),
    ("llama", {"target_modules": ["q_proj", "v_proj", "embed_tokens"],
               "modules_to_save": ["lm_head"]}),
    ("llama", {"target_modules": ["q_proj", "down_proj"], "layers_to_transform": [1]}),
    ("llama", {"target_modules": ["q_proj", "v_proj"], "layer_replication": [[0, 2], [1, 2]]}),
    ("llama", {"target_modules": ["q_proj", "o_proj"], "use_rslora": True, "r": 9,
               "rank_pattern": {"o_proj": 3}}),
]  # fmt: skip


def _peft(arch_name: str, lora: dict[str, Any]) -> Any:
    from peft import LoraConfig, get_peft_model

    return get_peft_model(make_model(arch_name, 0), LoraConfig(**{"r": 4, "lora_alpha": 8, **lora}))


def _live(peft_model: Any) -> dict[str, Any]:
    """What the real peft model wraps: {module name: layer} relative to the base."""
    from peft.tuners.lora import LoraLayer

    base = peft_model.base_model.model
    return {n: m for n, m in base.named_modules() if isinstance(m, LoraLayer)}


@pytest.mark.parametrize(("arch_name", "lora"), CASES)
def test_resolve_on_the_live_tree_is_what_peft_wraps(arch_name: str, lora: dict[str, Any]) -> None:
    from ftmanifest.integrations.peft_model import observe

    tree = observe(make_model(arch_name, 0)).tree
    res = tg.resolve(tg.spec_from_config({"r": 4, "lora_alpha": 8, **lora}), tree)
    peft_model = _peft(arch_name, lora)
    live = _live(peft_model)
    assert res.errors == () and res.unsupported == ()
    assert list(res.wrapped) == list(live)
    for name, layer in live.items():
        assert res.r[name] == layer.r["default"]
        assert res.alpha[name] == layer.lora_alpha["default"]
        assert res.scaling[name] == layer.scaling["default"]
    assert res.fan_in_fan_out == peft_model.peft_config["default"].fan_in_fan_out


@pytest.mark.parametrize(("arch_name", "lora"), CASES)
def test_resolve_on_the_headers_is_what_peft_wraps(
    models: dict[str, Path], arch_name: str, lora: dict[str, Any]
) -> None:
    folder = models[f"{arch_name}-a"]
    config = json.loads((folder / "config.json").read_text())
    shapes = headers.with_tied_head(tensor_shapes(weight_files(folder)), config)
    res = tg.resolve(tg.spec_from_config(lora), headers.header_tree(shapes, config))
    assert sorted(res.wrapped) == sorted(_live(_peft(arch_name, lora)))


@pytest.mark.parametrize("arch_name", ["gpt2", "llama"])
def test_all_linear_a_regex_and_the_expansion_resolve_alike(arch_name: str) -> None:
    from ftmanifest.integrations.peft_model import observe

    tree = observe(make_model(arch_name, 0)).tree
    expanded = list(_live(_peft(arch_name, {"target_modules": "all-linear"})))
    leaves = sorted({n.rpartition(".")[2] for n in expanded})
    regex = r".*\.h\.\d+\.(attn|mlp)\.c_\w+" if arch_name == "gpt2" else r".*_proj"
    sets = {
        str(spec): set(tg.resolve(tg.spec_from_config({"target_modules": spec}), tree).wrapped)
        for spec in ("all-linear", regex, expanded, leaves)
    }
    assert all(s == set(expanded) for s in sets.values()), sets


def test_peft_rules_not_guessed() -> None:
    """The corners of peft's matching, each as peft 0.21 has it."""
    spec = tg.Spec(target_modules=("c_attn", "h.1.mlp.c_fc"))
    assert tg.matches(spec, "transformer.h.0.attn.c_attn")
    assert tg.matches(spec, "transformer.h.1.mlp.c_fc")
    assert not tg.matches(spec, "transformer.h.0.mlp.c_fc")
    assert not tg.matches(spec, "transformer.h.0.attn.xc_attn")  # a '.'-suffix, not a suffix
    regex = tg.Spec(target_modules=r".*\.q_proj")
    assert tg.matches(regex, "model.layers.0.self_attn.q_proj")
    assert not tg.matches(regex, "model.layers.0.self_attn.q_proj.x")  # fullmatch
    # exclusions come first; a modules_to_save entry is a regex piece, unescaped
    saved = tg.Spec(target_modules=("q_proj",), modules_to_save=("layers.0.self_attn",))
    assert not tg.matches(saved, "model.layers.0.self_attn.q_proj")
    assert tg.excluded(tg.Spec(modules_to_save=("l.",)), "a.lX")  # '.' is any character
    # the first matching pattern key wins, in order; a key is matched after a '.'
    assert tg.pattern_key(["proj", "q_proj"], "m.q_proj") == "q_proj"  # 'proj' needs a '.'
    keys = ["q_proj", "layers.0.self_attn.q_proj"]
    assert tg.pattern_key(keys, "model.layers.0.self_attn.q_proj") == "q_proj"
    # modules_to_save wraps any name ending with the entry (no dot needed)
    assert tg.saved_modules(tg.tree([("x.lm_head", "linear"), ("mylm_head", "linear")]),
                            ["lm_head"]) == ("x.lm_head", "mylm_head")  # fmt: skip


def test_a_pattern_that_does_not_compile_resolves_to_errors_not_a_crash() -> None:
    res = tg.resolve(
        tg.Spec(target_modules="(q", rank_pattern={"v[": 2}), tg.tree([("q", "linear")])
    )
    assert res.wrapped == () and [e[0] for e in res.errors] == [
        ("target_modules",),
        ("rank_pattern", "v["),
    ]


def test_a_matched_module_lora_cannot_wrap_is_unsupported() -> None:
    tree = tg.tree([("m.attn", "other"), ("m.attn.q", "linear")])
    res = tg.resolve(tg.Spec(target_modules=("attn", "q")), tree)
    assert res.wrapped == ("m.attn.q",) and res.unsupported == (("m.attn", "other"),)


def test_layer_replication_of_a_model_peft_cannot_replicate_is_an_error() -> None:
    tree = tg.tree([("transformer.h.0.attn.c_attn", "conv1d")])  # GPT-2: no model.layers
    res = tg.resolve(tg.Spec(target_modules=("c_attn",), layer_replication=((0, 1),)), tree)
    assert res.errors and res.errors[0][0] == ("layer_replication",)


# --- bind and check-adapter compare the resolved sets ---------------------------


@pytest.fixture(scope="module")
def all_linear(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A GPT-2 adapter trained with target_modules='all-linear' (peft saves the expansion)."""
    from tests.adapter.conftest import train_adapter

    out = tmp_path_factory.mktemp("all-linear") / "adapter"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return train_adapter(models["gpt2-a"], out, "gpt2", target_modules="all-linear")


def _project(models: dict[str, Path], adapter: Path, tmp: Path, signer: Any, **method: Any) -> Path:
    trust_repo(tmp, signer)
    copy_tree(models["gpt2-a"], tmp / "base")
    copy_tree(adapter, tmp / "adapter")
    return write_manifest(tmp, "base", "gpt2", **method)


def test_peft_saves_the_expansion_of_all_linear(all_linear: Path) -> None:
    saved = json.loads((all_linear / "adapter_config.json").read_text())["target_modules"]
    assert sorted(saved) == sorted(GPT2_ALL)


@pytest.mark.parametrize(
    "targets",
    ["all-linear", r".*\.(c_attn|c_proj|c_fc)", ["c_attn", "c_proj", "c_fc"], GPT2_ALL],
    ids=["all-linear", "regex", "names", "expansion"],
)
def test_bind_and_check_accept_every_spelling_of_the_same_set(
    models: dict[str, Path], all_linear: Path, tmp_path: Path, signer: Any, targets: Any
) -> None:
    """The explicit list lint asked for made bind refuse (peft saved the expanded
    names); all-linear and a regex went through unresolved."""
    manifest = _project(models, all_linear, tmp_path, signer, target_modules=targets)
    result = bind_adapter(tmp_path / "adapter", manifest, signer)
    assert sorted(result.binding.method["wrapped"]) == sorted(GPT2_ALL)
    report = check_adapter(tmp_path / "adapter", manifest=manifest)
    assert report.ok, report.findings


@pytest.mark.parametrize(
    ("targets", "missing", "extra"),
    [(["c_attn", "c_proj"], [], ["transformer.h.0.mlp.c_fc", "transformer.h.1.mlp.c_fc"]),
     (r".*\.c_attn", [], "all but c_attn"), ("all-linear", None, None)],
)  # fmt: skip
def test_bind_names_the_modules_missing_and_extra(
    models: dict[str, Path], all_linear: Path, tmp_path: Path, signer: Any,
    targets: Any, missing: Any, extra: Any,
) -> None:  # fmt: skip
    manifest = _project(models, all_linear, tmp_path, signer, target_modules=targets)
    if missing is None:  # all-linear, narrowed by exclude_modules in the manifest only
        body = json.loads(manifest.read_text())
        body["method"]["exclude_modules"] = ["c_fc"]
        manifest.write_text(json.dumps(body))
    with pytest.raises(BindRefusedError) as info:
        bind_adapter(tmp_path / "adapter", manifest, signer)
    rows = {f.field: f for f in info.value.findings if f.rule == "adapter.method-differs"}
    row = rows["method.target_modules"]
    assert row.path and row.expected and row.observed and row.hint
    if isinstance(extra, list):
        assert row.extra["extra"] == extra and row.extra["missing"] == missing
    if missing is None:
        assert "method.exclude_modules" in rows


def test_rank_pattern_declared_passes_and_another_is_refused(
    models: dict[str, Path], tmp_path: Path, signer: Any
) -> None:
    """rank_pattern had no way through: any adapter with one was refused."""
    from tests.adapter.conftest import train_adapter

    patterns = {"rank_pattern": {"h.0.attn.c_attn": 2}, "alpha_pattern": {"c_proj": 16}}
    adapter = train_adapter(models["gpt2-a"], tmp_path / "trained", "gpt2", **patterns)
    good = _project(models, adapter, tmp_path / "good", signer,
                    rank_pattern={"transformer.h.0.attn.c_attn": 2},
                    alpha_pattern={r"h\.\d\.(attn|mlp)\.c_proj": 16})  # fmt: skip
    bind_adapter(tmp_path / "good" / "adapter", good, signer)
    assert check_adapter(tmp_path / "good" / "adapter", manifest=good).ok
    bad = _project(models, adapter, tmp_path / "bad", signer, rank_pattern={"c_attn": 2},
                   alpha_pattern={"c_proj": 16})  # fmt: skip
    with pytest.raises(BindRefusedError) as info:
        bind_adapter(tmp_path / "bad" / "adapter", bad, signer)
    (row,) = [f for f in info.value.findings if f.rule == "adapter.method-differs"]
    assert row.field == "method.rank_pattern"
    assert "transformer.h.1.attn.c_attn=2" in str(row.expected) and "=4" in str(row.observed)


def test_verify_resolves_all_linear_for_the_trainable_count(
    models: dict[str, Path], tmp_path: Path
) -> None:
    from ftmanifest.adapter.base import manifest_method_findings
    from ftmanifest.manifest import load_manifest

    shutil.copytree(models["gpt2-a"], tmp_path / "base")
    peft_model = _peft("gpt2", {"target_modules": "all-linear"})
    count = peft_model.get_nb_trainable_parameters()[0]
    path = write_manifest(tmp_path, "base", "gpt2", target_modules="all-linear",
                          trainable_params=count)  # fmt: skip
    assert manifest_method_findings(load_manifest(path).manifest, path) == []


def test_a_base_saved_without_its_head_prefix_resolves_peft_full_names(
    tmp_path: Path, signer: Any
) -> None:
    """Hub gpt2 keeps ``h.0...`` for the model's ``transformer.h.0...``: the full
    names peft saves for all-linear are resolved in the model's namespace."""
    from tests.adapter.conftest import train_adapter

    headless = tmp_path / "headless"
    make_model("gpt2", 0).transformer.save_pretrained(str(headless))
    adapter = train_adapter(headless, tmp_path / "trained", "gpt2", target_modules="all-linear")
    project = tmp_path / "p"
    trust_repo(project, signer)
    copy_tree(headless, project / "base")
    copy_tree(adapter, project / "adapter")
    manifest = write_manifest(project, "base", "gpt2", target_modules="all-linear")
    bind_adapter(project / "adapter", manifest, signer)
    assert check_adapter(project / "adapter", manifest=manifest).ok


def test_all_linear_in_the_manifest_is_resolved_not_skipped(
    bound: dict[str, Path], tmp_path: Path
) -> None:
    """check-adapter skipped target_modules: all-linear ("peft resolves it"), so an
    adapter on c_attn and c_proj alone passed a manifest that trains every layer."""
    project = shutil.copytree(bound["gpt2"], tmp_path / "p")
    manifest = write_manifest(project, "base", "gpt2", target_modules="all-linear")
    report = check_adapter(project / "adapter", manifest=manifest)
    (row,) = [f for f in report.findings if f.field == "method.target_modules"]
    assert row.extra["missing"] == ["transformer.h.0.mlp.c_fc", "transformer.h.1.mlp.c_fc"]


def test_a_regex_that_does_not_compile_is_a_row_not_a_crash(
    models: dict[str, Path], tmp_path: Path
) -> None:
    from ftmanifest.adapter.base import manifest_method_findings
    from ftmanifest.manifest import load_manifest

    shutil.copytree(models["llama-a"], tmp_path / "base")
    path = write_manifest(tmp_path, "base", "llama", target_modules=r".*\.(q|v_proj")
    (row,) = manifest_method_findings(load_manifest(path).manifest, path)
    assert (row.rule, row.field) == ("adapter.pattern-invalid", "method.target_modules")
    assert row.observed == r".*\.(q|v_proj" and row.hint


def test_load_bound_loads_an_all_linear_adapter_under_a_regex(
    models: dict[str, Path], all_linear: Path, tmp_path: Path, signer: Any
) -> None:
    from ftmanifest.adapter import load_bound
    from ftmanifest.integrations.peft_model import resolved_peft

    manifest = _project(models, all_linear, tmp_path, signer, target_modules=r".*\.c_\w+")
    bind_adapter(tmp_path / "adapter", manifest, signer)
    model = load_bound(tmp_path / "adapter", manifest=manifest)
    assert sorted(resolved_peft(model)["wrapped"]) == sorted(GPT2_ALL)


NAME = st.lists(st.sampled_from(["model", "layers", "0", "1", "q_proj", "mlp", "h", "x.y"]),
                min_size=1, max_size=5).map(".".join)  # fmt: skip


@given(
    key=NAME,
    targets=st.one_of(st.lists(NAME, max_size=4), st.sampled_from([r".*q_proj", r"model\..*"])),
    exclude=st.one_of(st.none(), st.lists(NAME, max_size=2), st.just(r".*\.1\..*")),
    saved=st.lists(st.sampled_from(["mlp", "h", "q_proj", "1"]), max_size=2),
    layers=st.one_of(st.none(), st.just([1]), st.just(0)),
)
@settings(max_examples=400, deadline=None)
def test_matching_is_peft_check_target_module_exists(
    key: str, targets: Any, exclude: Any, saved: list[str], layers: Any
) -> None:
    """Differential against peft's own function, on random names and specs."""
    from peft.tuners.tuners_utils import check_target_module_exists

    class Config:
        target_modules = set(targets) if isinstance(targets, list) else targets
        exclude_modules = set(exclude) if isinstance(exclude, list) else exclude
        modules_to_save = saved or None
        target_parameters = None
        layers_to_transform = layers if isinstance(targets, list) else None
        layers_pattern = None

    spec = tg.Spec(
        target_modules=tuple(targets) if isinstance(targets, list) else targets,
        exclude_modules=tuple(exclude) if isinstance(exclude, list) else exclude,
        modules_to_save=tuple(saved),
        layers_to_transform=Config.layers_to_transform,
    )
    assert tg.matches(spec, key) == bool(check_target_module_exists(Config, key))
