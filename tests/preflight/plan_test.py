"""``ftmanifest plan``: phases from measured throughput that add up, and a run too
big for the rental or the budget refused with by how much."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftmanifest.manifest import load_manifest
from ftmanifest.preflight.plan import Assumptions, Figures, make_plan, steps_of
from tests.conftest import run_cli

FIGURES = Figures(tokens_per_second=1000.0, train_examples=10_000, train_mean_tokens=200.0,
                  eval_tokens=300_000, steps=2_000, sequences_per_step=16,
                  preflight_seconds=120.0, resume_seconds=30.0, model_bytes=2 * 10**9)  # fmt: skip


def _manifest(tmp_path: Path, budget: str = "") -> object:
    path = tmp_path / "m.yaml"
    path.write_text(
        "ftmanifest: 1\nexperiment:\n  id: plan-test\n" + budget + "model: {path: model}\n"
        "data:\n  - {name: train, role: train, path: t.jsonl, license: x}\n"
        "training: {max_steps: 2000, micro_batch: 4, grad_accum: 4}\n"
    )
    return load_manifest(path).manifest


def test_phases_follow_the_figures_and_add_up(tmp_path: Path) -> None:
    plan = make_plan(_manifest(tmp_path), 7, FIGURES)
    hours = {name: h for name, h, _ in plan.phases}
    assert list(hours) == ["first checks", "experiment", "evaluation", "resume test", "export",
                          "margin"]  # fmt: skip
    assert hours["experiment"] == pytest.approx(2_000 * 16 * 200 / 1000 / 3600)  # 1.78 h
    assert hours["evaluation"] == pytest.approx(2 * 300_000 / 3000 / 3600)
    assert hours["first checks"] == pytest.approx(0.5 + 120 / 3600)
    assert hours["resume test"] == pytest.approx(60 / 3600)  # at least a minute
    assert hours["export"] == pytest.approx(2e9 / 200e6 / 3600)
    assert hours["margin"] == pytest.approx(0.15 * hours["experiment"] + 60 / 3600)
    assert plan.total == pytest.approx(sum(hours.values()))
    assert plan.ok and plan.to_dict()["rental_hours"] == 168
    slower = make_plan(_manifest(tmp_path), 7, FIGURES, Assumptions(retry_share=0.5))
    assert slower.total > plan.total


def test_an_oversized_run_is_refused_by_how_much(tmp_path: Path) -> None:
    big = Figures(**{**FIGURES.__dict__, "steps": 2_000_000})
    plan = make_plan(_manifest(tmp_path), 3, big)
    assert not plan.ok
    need = plan.total
    assert plan.refusals[0] == (
        f"the plan needs {need:.2f} h, {need - 72:.2f} h more than the 3-day rental (72 h)"
    )
    budget = "  budget: {max_hours: 1, max_gpu_hours: 1, max_steps: 100}\n"
    small = make_plan(_manifest(tmp_path, budget), 30, FIGURES)
    assert len(small.refusals) == 3
    assert "more than experiment.budget.max_hours (1)" in small.refusals[0]
    assert "GPU-h on 1 device(s)" in small.refusals[1]
    assert any("1900 more than experiment.budget.max_steps (100)" in r for r in small.refusals)


def test_steps_from_epochs(tmp_path: Path) -> None:
    path = tmp_path / "e.yaml"
    path.write_text("ftmanifest: 1\nexperiment: {id: e}\nmodel: {path: m}\n"
                    "training: {epochs: 2, micro_batch: 4}\n")  # fmt: skip
    assert steps_of(load_manifest(path).manifest, 10, 4) == 5


def test_cli_plans_from_the_recorded_preflight(tmp_path: Path) -> None:
    pytest.importorskip("peft")
    from ftmanifest.examples.project import build_example

    manifest = build_example(tmp_path / "tiny")
    ledger = tmp_path / "ledger"
    missing = run_cli("plan", str(manifest), "--days", "3", "--ledger", str(ledger))
    assert missing.returncode == 2 and "no measured throughput" in missing.stderr
    pre = run_cli("preflight", str(manifest), "--only", "throughput", "--throughput-seconds",
                  "0.5", "--ledger", str(ledger), "--format", "json")  # fmt: skip
    assert pre.returncode == 0, pre.stdout + pre.stderr
    window = json.loads(pre.stdout)["rows"][0]["figures"]["window_seconds"]
    assert 0.5 <= window < 2.5  # the window asked for, not the default 3 s
    out = run_cli("plan", str(manifest), "--days", "3", "--ledger", str(ledger), "--format",
                  "json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["fits"] and plan["figures"]["steps"] == 3
    assert sum(p["hours"] for p in plan["phases"]) == pytest.approx(plan["total_hours"])
    assert "(preflight)" in plan["phases"][1]["how"]
    tiny = run_cli("plan", str(manifest), "--days", "0.0001", "--tokens-per-second", "1")
    assert tiny.returncode == 1 and "REFUSED: the plan needs" in tiny.stdout


def test_estimate_shows_the_measured_peak_of_the_last_preflight(tmp_path: Path) -> None:
    pytest.importorskip("peft")
    from ftmanifest.examples.project import build_example

    manifest = build_example(tmp_path / "tiny")
    before = json.loads(run_cli("estimate", str(manifest), "--format", "json").stdout)
    assert before["measured_bytes"] is None
    assert run_cli("preflight", str(manifest), "--only", "step").returncode == 0
    after = json.loads(run_cli("estimate", str(manifest), "--format", "json").stdout)
    assert after["measured_bytes"] > after["total_bytes"] / 2  # the weights at least
    assert after["error"] == pytest.approx(
        (after["total_bytes"] - after["measured_bytes"]) / after["measured_bytes"]
    )


RATES = [(19_360.4, "19,360 tokens/s"), (123_456.0, "123,456 tokens/s"), (50.0, "50 tokens/s"),
         (2.25, "2.25 tokens/s")]  # fmt: skip


@pytest.mark.parametrize(("rate", "shown"), RATES)
def test_a_fast_rate_reads_as_a_whole_number_and_fits_the_demo_width(
    tmp_path: Path, rate: float, shown: str
) -> None:
    """A GPU's tens of thousands of tokens/s read as digits, not ``1.936e+04``, and the
    demo's experiment row (100 columns) stays on one line however fast the machine."""
    from ftmanifest.output import table

    small = Figures(**{**FIGURES.__dict__, "tokens_per_second": rate, "steps": 3,
                       "sequences_per_step": 4, "train_mean_tokens": 25.0})  # fmt: skip
    plan = make_plan(_manifest(tmp_path), 3, small)
    text = dict((name, why) for name, _, why in plan.phases)["experiment"]
    assert text.endswith(f" at {shown} (preflight)") and "e+" not in text
    rows = [(name, f"{hours:.2f}", "0.0%", why) for name, hours, why in plan.phases]
    lines = table(
        rows, ["phase", "hours", "of rental", "from"], width=100, nowrap=(0, 1, 2)
    ).splitlines()
    assert [ln for ln in lines if ln.startswith("experiment")] and len(lines) == 2 + 6
