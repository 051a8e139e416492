"""Properties of the recipe guard: a random single change to the
``TrainingArguments`` a manifest pins, or to the loaded model's config, is always
refused; what the builders make from any manifest always passes.

The judges are the guard's own (``judge_arguments`` on the arguments'
``to_dict``, ``judge_config`` on a real transformers model), called as
``on_train_begin`` calls them, so each example costs milliseconds; that the
same refusals stop a real ``Trainer`` before step 1 is shown one change at a
time in ``trainer_recipe_test.py``.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ftmanifest.integrations.builders import pinned_arguments
from ftmanifest.integrations.model_config import IGNORED, judge_config
from ftmanifest.integrations.recipe import argument_defaults, effective_arguments, judge_arguments
from ftmanifest.integrations.transformers import training_arguments
from ftmanifest.manifest.model import Manifest

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")

WHERE = "exp.yaml"
SCHEDULES = ("linear", "cosine", "constant", "constant_with_warmup", "polynomial")
OPTIMIZERS = ("adamw_torch", "adamw_torch_fused", "sgd", "adafactor", "adagrad", "rmsprop")
SLOW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _floats(low: float, high: float) -> st.SearchStrategy[float]:
    return st.floats(low, high, allow_nan=False, allow_infinity=False, allow_subnormal=False)


@st.composite
def manifests(draw: st.DrawFn) -> Manifest:
    """A manifest whose training section pins a random recipe the Trainer can run."""
    seed = draw(st.integers(0, 2**31 - 1))
    seeds: dict[str, Any] = {
        k: seed for k in draw(st.sets(st.sampled_from(("python", "numpy", "torch"))))
    }
    if draw(st.booleans()):
        seeds["data_order"] = draw(st.integers(0, 2**31 - 1))
    optimizer = {
        "name": draw(st.sampled_from(OPTIMIZERS)),
        "lr": draw(_floats(1e-7, 1.0)),
        "weight_decay": draw(_floats(0.0, 0.5)),
        "schedule": draw(st.sampled_from(SCHEDULES)),
        "warmup_steps": draw(st.integers(0, 50)),
    }
    if draw(st.booleans()):
        optimizer["betas"] = [draw(_floats(0.0, 0.99)), draw(_floats(0.9, 0.9999))]
        optimizer["eps"] = draw(_floats(1e-12, 1e-4))
    training: dict[str, Any] = {
        "micro_batch": draw(st.integers(1, 64)),
        "grad_accum": draw(st.integers(1, 16)),
        "precision": draw(st.sampled_from(("fp32", "bf16", "fp16"))),
        "activation_checkpointing": draw(st.booleans()),
        "optimizer": optimizer,
    }
    if draw(st.booleans()):
        training["max_steps"] = draw(st.integers(1, 10_000))
    else:
        training["epochs"] = draw(_floats(0.25, 10.0))
    if draw(st.booleans()):
        training["max_grad_norm"] = draw(_floats(0.0, 10.0))
    body = {
        "ftmanifest": 1,
        "experiment": {"id": "t"},
        "model": {"path": "m"},
        "environment": {"backend": {"kind": "cpu"}},  # the builders then pass use_cpu
        "seeds": seeds,
        "training": training,
    }
    return Manifest.model_validate(body)


def _judge(manifest: Manifest, args: Any) -> Any:
    data, _ = effective_arguments(args)
    return judge_arguments(manifest, data, WHERE, argument_defaults(args))


@given(manifest=manifests())
@SLOW
def test_the_builders_output_always_passes(manifest: Manifest, tmp_path_factory: Any) -> None:
    args = training_arguments(manifest, output_dir=str(tmp_path_factory.getbasetemp()))
    check = _judge(manifest, args)
    assert check.rows == [], [(f.field, f.expected, f.observed) for f in check.rows]


def _changed(name: str, value: Any, draw: st.DrawFn) -> Any:
    """Another value of argument ``name`` than ``value``, as a script would write it."""
    if isinstance(value, bool):
        return not value
    if name in ("seed", "data_seed", "warmup_steps", "max_steps"):
        return draw(st.integers(0, 2**31 - 1).filter(lambda v: v != value))
    if isinstance(value, int):
        return draw(st.integers(1, 4096).filter(lambda v: v != value))
    if isinstance(value, float):
        scale = draw(st.sampled_from((0.5, 2.0, 10.0, 1.001)))
        new = value * scale if value else draw(_floats(1e-6, 1.0))
        return new if not math.isclose(new, value, rel_tol=1e-6) else value + 1.0
    if name == "optim":
        return draw(st.sampled_from([o for o in OPTIMIZERS if o != value]))
    if name == "lr_scheduler_type":
        return draw(st.sampled_from([s for s in SCHEDULES if s != value]))
    raise AssertionError(f"no change drawn for {name}={value!r}")


@st.composite
def single_changes(draw: st.DrawFn) -> tuple[Manifest, dict[str, Any], str, Any]:
    manifest = draw(manifests())
    from transformers import TrainingArguments

    fields = {f for f in TrainingArguments.__dataclass_fields__}
    pinned = {name: value for name, (value, _loc) in pinned_arguments(manifest, fields).items()}
    name = draw(st.sampled_from(sorted(k for k in pinned if k != "full_determinism")))
    return manifest, pinned, name, _changed(name, pinned[name], draw)


@given(case=single_changes())
@SLOW
def test_any_single_change_to_a_pinned_argument_is_refused(
    case: tuple[Manifest, dict[str, Any], str, Any], tmp_path_factory: Any
) -> None:
    from transformers import TrainingArguments

    manifest, pinned, name, value = case
    if name in ("bf16", "fp16") and value:  # a second half precision: one flag at a time
        pinned = {**pinned, "bf16": False, "fp16": False}
    if name == "max_steps" and pinned.get("max_steps") == -1:
        value = abs(value) + 1  # steps that override the pinned epochs
    kwargs = {**pinned, name: value, "use_cpu": True}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args = TrainingArguments(output_dir=str(tmp_path_factory.getbasetemp()), **kwargs)
    rows = _judge(manifest, args).rows
    assert rows, f"{name}={value!r} against {pinned[name]!r} passed"
    assert any(name in str(f.observed) for f in rows), [(f.field, f.observed) for f in rows]
    for f in rows:
        assert f.field and f.expected and f.observed and f.hint and f.path == WHERE


def test_an_unpinned_argument_off_its_default_is_refused_and_recorded(tmp_path: Path) -> None:
    body = {"ftmanifest": 1, "experiment": {"id": "t"}, "model": {"path": "m"},
            "training": {"optimizer": {"name": "adamw_torch", "lr": 0.01}}}  # fmt: skip
    manifest = Manifest.model_validate(body)
    args = training_arguments(manifest, output_dir=str(tmp_path), adam_beta1=0.5, seed=7)
    check = _judge(manifest, args)
    assert {(f.rule, f.field) for f in check.rows} == {
        ("drift.unpinned-option", "training.optimizer.betas"),
        ("drift.unpinned-option", "seeds.torch"),
    }
    assert check.unpinned["adam_beta1"] == 0.5 and check.unpinned["seed"] == 7
    plain = _judge(manifest, training_arguments(manifest, output_dir=str(tmp_path)))
    assert "adam_beta1" not in plain.unpinned and "seed" not in plain.unpinned


# --- the loaded model's config ------------------------------------------------


@pytest.fixture(scope="module")
def pinned_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest]:
    from ftmanifest.examples.tiny import build_model

    folder = build_model(tmp_path_factory.mktemp("pinned") / "model", seed=0)
    body = {"ftmanifest": 1, "experiment": {"id": "t"}, "model": {"path": "model"},
            "training": {"precision": "fp32"}}  # fmt: skip
    return folder, Manifest.model_validate(body)


def _forward_fields(folder: Path) -> dict[str, Any]:
    config = json.loads((folder / "config.json").read_text("utf-8"))
    # model_type is the config class's own (to_dict writes the class attribute):
    # the class is what computes, and the model's origin check judges it.
    skip = IGNORED | {"model_type"}
    return {k: v for k, v in config.items() if k not in skip and v is not None}


def _other(value: Any, draw: st.DrawFn) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + draw(st.integers(1, 7))
    if isinstance(value, float):
        return value * draw(st.sampled_from((0.5, 2.0, 1.0001))) if value else 0.5
    if isinstance(value, str):
        return draw(
            st.sampled_from(("relu", "gelu", "tanh", "x" + value)).filter(lambda v: v != value)
        )
    if isinstance(value, list):
        return [*value, value[-1] if value else 1]
    if isinstance(value, dict):
        return {**value, "__changed__": True}
    raise AssertionError(f"no other value for {value!r}")


@given(data=st.data())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
def test_any_single_change_to_the_loaded_config_is_refused(
    pinned_model: tuple[Path, Manifest], data: st.DataObject
) -> None:
    from transformers import AutoModelForCausalLM

    folder, manifest = pinned_model
    fields = _forward_fields(folder)
    key = data.draw(st.sampled_from(sorted(fields)))
    new = _other(fields[key], data.draw)
    try:  # as a script overrides it: the model is built with the other value
        model = AutoModelForCausalLM.from_pretrained(folder, **{key: new})
    except Exception:  # noqa: BLE001 - a value the weights cannot take: changed after loading
        model = AutoModelForCausalLM.from_pretrained(folder)
        setattr(model.config, key, new)
    rows = judge_config(model, folder, manifest, WHERE)
    assert any(f.field == f"model.config.{key}" for f in rows), (key, new, rows)
    assert judge_config(AutoModelForCausalLM.from_pretrained(folder), folder, manifest, WHERE) == []
