"""``estimate`` compares like with like: the measured peak of a preflight
step is set beside the estimate for the shape that step ran (preflight pads its step
to ``seq_len``, and records the shape), and the figure says which allocator it
assumes: under glibc's default malloc a real 512 x 4 CPU step keeps far more resident
than its live tensors, and the estimate models that."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.preflight.estimate import Setup, estimate, host_allocator
from ftmanifest.preflight.measured import compare_measured
from ftmanifest.preflight.shapes import architecture, read_architecture
from tests.conftest import ROOT, run_cli
from tests.preflight.estimate_test import GPT2, LLAMA, MEASURE

transformers = pytest.importorskip("transformers")


def _arch() -> Any:
    return architecture({**LLAMA, "model_type": "llama"})


def test_a_step_measured_at_36_tokens_is_compared_with_the_estimate_at_36_tokens() -> None:
    arch, setup = _arch(), Setup(512, 4, allocator="exact")
    at_36 = estimate(arch, Setup(36, 4, allocator="exact"))
    weights = at_36.part("weights")
    figures = {
        "measured_shape": {"seq_len": 36, "micro_batch": 4},
        "allocator": "exact",
        "peak_host_bytes": 10**9 + at_36.total - weights,
        "host_bytes_before": 10**9,
    }
    found = compare_measured(arch, setup, figures)
    assert found.measured == at_36.total and found.estimate == at_36.total
    assert (found.seq_len, found.micro_batch) == (36, 4) and found.error == 0
    assert estimate(arch, setup).total > 3 * at_36.total  # what the old line compared with


def test_a_record_without_its_shape_is_not_compared_and_says_why() -> None:
    figures = {"seq_len": 512, "micro_batch": 4, "peak_host_bytes": 2**30, "host_bytes_before": 0}
    found = compare_measured(_arch(), Setup(512, 4), figures)
    assert found.error is None and found.estimate is None
    assert found.why_not and "preflight" in found.why_not and "--only step" in found.why_not


def test_the_allocator_comes_from_the_backend_and_the_environment() -> None:
    assert host_allocator({}, "cpu", "glibc") == "glibc-dynamic"
    assert host_allocator({"MALLOC_MMAP_THRESHOLD_": "65536"}, "cpu", "glibc") == "exact"
    assert host_allocator({}, None, "glibc") == "glibc-dynamic"
    assert host_allocator({}, "cuda", "glibc") == "device"
    assert host_allocator({}, "cpu", "") == "not-modelled"


def _measure_default_malloc(folder: Path, seq: int, micro_batch: int) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env["OMP_NUM_THREADS"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(folder), str(seq), str(micro_batch), "0"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    m = json.loads(done.stdout.strip().splitlines()[-1])
    return int(m["peak"] - m["before"])


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux VmHWM reset")
@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_under_glibcs_default_malloc_a_512x4_step_is_within_25_percent(
    tmp_path: Path, arch: str
) -> None:
    pytest.importorskip("torch")
    make = transformers.LlamaConfig if arch == "llama" else transformers.GPT2Config
    config = make(**(LLAMA if arch == "llama" else GPT2))
    config.save_pretrained(tmp_path / arch)
    found = read_architecture(tmp_path / arch)
    est = estimate(found, Setup(512, 4, allocator="glibc-dynamic"))
    step = est.total - est.part("weights")  # the weights are resident before the step
    growth = _measure_default_malloc(tmp_path / arch, 512, 4)
    exact = estimate(found, Setup(512, 4, allocator="exact"))
    live = (exact.total - exact.part("weights")) / 2**20
    print(f"{arch}: modelled {step / 2**20:.0f} MiB, live tensors {live:.0f}, "
          f"measured {growth / 2**20:.0f}")  # fmt: skip
    assert abs(step - growth) <= 0.25 * growth
    assert est.part("allocator retention (glibc malloc)") > 0


def _example(tmp_path: Path, seq_len: int) -> Path:
    from ftmanifest.examples.project import build_example

    manifest = build_example(tmp_path / "tiny")
    text = manifest.read_text("utf-8")
    assert "seq_len: 32\n" in text
    manifest.write_text(text.replace("seq_len: 32\n", f"seq_len: {seq_len}\n"), "utf-8")
    return manifest


def test_preflight_measures_at_seq_len_and_estimate_compares_that_shape(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    manifest = _example(tmp_path, 128)  # the example's records are 20-40 tokens long
    assert run_cli("preflight", str(manifest), "--only", "step").returncode == 0
    out = json.loads(run_cli("estimate", str(manifest), "--format", "json").stdout)
    assert out["measured_shape"] == {"seq_len": 128, "micro_batch": 4}
    assert out["allocator"] in ("glibc-dynamic", "exact", "not-modelled")
    assert out["compared_bytes"] == out["total_bytes"]  # the same shape: the same estimate
    text = run_cli("estimate", str(manifest)).stdout
    assert re.search(r"measured peak .*128 x 4", text), text
    assert "allocator:" in text
    # a shape given on the command line is estimated; the measured step is still
    # compared with the estimate for its own shape, never with another one
    other = json.loads(
        run_cli("estimate", str(manifest), "--seq-len", "512", "--format", "json").stdout
    )
    assert other["measured_shape"] == {"seq_len": 128, "micro_batch": 4}
    assert other["compared_bytes"] == out["total_bytes"] < other["total_bytes"]
