"""seed_everything and data_order_generator on the real libraries."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

import ftmanifest
from ftmanifest.errors import InputError
from ftmanifest.manifest import load_manifest
from ftmanifest.seeding import (
    CUBLAS_DEFAULT,
    data_order_generator,
    seed_everything,
)
from tests.conftest import CLF


@pytest.fixture(autouse=True)
def _restore_global_state() -> Iterator[None]:
    """Every test leaves torch's flags, RNGs and the environment as it found them."""
    det = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    cudnn = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    cublas = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    py_state, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        yield
    torch.use_deterministic_algorithms(det, warn_only=warn_only)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = cudnn
    if cublas is None:
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    else:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = cublas
    random.setstate(py_state)
    np.random.set_state(np_state)


def _draws() -> tuple[list[float], list[float], list[float]]:
    return (
        [random.random() for _ in range(4)],
        np.random.rand(4).tolist(),
        torch.rand(4).tolist(),
    )


def test_same_seeds_give_identical_draws_from_every_library() -> None:
    applied = seed_everything(CLF)
    first = _draws()
    _draws()  # move every generator on
    seed_everything(CLF)
    assert _draws() == first
    assert applied["python"] == applied["numpy"] == applied["torch"] == 1234


def test_other_seeds_give_other_draws(mutate: Callable[..., Path]) -> None:
    seed_everything(CLF)
    first = _draws()
    other = mutate(
        "  python: 1234", "  python: 99", ("  numpy: 1234", "  numpy: 99"),
        ("  torch: 1234", "  torch: 99"),
    )  # fmt: skip
    seed_everything(other)
    second = _draws()
    assert all(a != b for a, b in zip(first, second, strict=True))


def test_deterministic_flag_really_set_and_switched_off_again(
    mutate: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    torch.use_deterministic_algorithms(False)
    applied = seed_everything(CLF)  # deterministic: true, cudnn_benchmark: false
    assert torch.are_deterministic_algorithms_enabled()
    assert torch.backends.cudnn.deterministic
    assert torch.backends.cudnn.benchmark is False
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == CUBLAS_DEFAULT
    assert applied["deterministic"] is True

    loose = mutate(
        "  deterministic: true", "  deterministic: false",
        ("  cudnn_benchmark: false", "  cudnn_benchmark: true"),
    )  # fmt: skip
    seed_everything(loose)
    assert not torch.are_deterministic_algorithms_enabled()
    assert torch.backends.cudnn.benchmark is True


def test_existing_cublas_setting_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    assert seed_everything(CLF)["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"


def test_accepts_loaded_manifest_and_model() -> None:
    loaded = load_manifest(CLF)
    seed_everything(loaded)
    a = _draws()
    seed_everything(loaded.manifest)
    assert _draws() == a
    with pytest.raises(InputError) as err:
        seed_everything(42)  # type: ignore[arg-type]
    assert err.value.observed == "int"


@pytest.mark.parametrize("name", ["python", "numpy", "torch"])
def test_missing_seed_names_the_field_and_the_fix(name: str, mutate: Callable[..., Path]) -> None:
    path = mutate(f"  {name}: 1234\n", "")
    with pytest.raises(InputError) as err:
        seed_everything(path)
    assert err.value.field == f"seeds.{name}"
    assert err.value.path == str(path)
    assert err.value.hint and f"{name}:" in err.value.hint
    assert err.value.exit_code == 2


def test_data_order_generator_is_seeded_from_data_order(mutate: Callable[..., Path]) -> None:
    order = torch.randperm(20, generator=data_order_generator(CLF)).tolist()
    assert torch.randperm(20, generator=data_order_generator(CLF)).tolist() == order
    other = mutate("  data_order: 42", "  data_order: 43")
    assert torch.randperm(20, generator=data_order_generator(other)).tolist() != order
    with pytest.raises(InputError) as err:
        data_order_generator(mutate("  data_order: 42\n", ""))
    assert err.value.field == "seeds.data_order"


def test_lazy_export_keeps_import_free_of_torch() -> None:
    assert ftmanifest.seed_everything is seed_everything
    code = (
        "import sys, ftmanifest\n"
        "assert 'torch' not in sys.modules and 'numpy' not in sys.modules\n"
        "f = ftmanifest.seed_everything\n"
        "assert 'torch' not in sys.modules, 'resolving the name must not import torch'\n"
        "print(f.__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "seed_everything"
    with pytest.raises(AttributeError):
        ftmanifest.no_such_name  # noqa: B018
