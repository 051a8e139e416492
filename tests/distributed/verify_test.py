"""``ftmanifest verify M --distributed`` on a real two-rank torchrun job (gloo, CPU),
and the verdict every rank computes from the gathered fingerprints."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.cli import main
from ftmanifest.cli.verify import print_job, rank_line
from ftmanifest.distributed.fingerprint import sane, strategy_from_args, strategy_from_env
from ftmanifest.distributed.verify import judge, judge_manifests
from ftmanifest.errors import EXIT_INPUT, EXIT_OK, EXIT_REFUSED
from ftmanifest.manifest import load_manifest
from ftmanifest.probe.packages import forced_versions, installed_distributions
from tests.distributed.launch import JobResult, torchrun, two_rank_example, verify_job

WIDE = {"COLUMNS": "250"}  # table rows on one line each


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return two_rank_example(tmp_path_factory.mktemp("example"))


def _copy(locked: Path, folder: Path) -> Path:
    shutil.copytree(locked.parent, folder)
    return folder / locked.name


def _argv(manifest: str, *extra: str) -> list[str]:
    return ["verify", manifest, "--no-signature", "--distributed", "--rank-timeout", "60", *extra]


def _row(out: str, rank: str, field: str) -> str | None:
    """The table line of (rank, field), or None."""
    found = re.search(rf"^{re.escape(rank)}\s+\S+\s+{re.escape(field)}\s.*$", out, re.M)
    return found.group(0) if found else None


def _codes(job: JobResult) -> dict[int, int | None]:
    return job.codes()


# --- on a real torchrun job -------------------------------------------------------


ENTRY = "import runpy\nrunpy.run_module('ftmanifest', run_name='__main__', alter_sys=True)\n"


def test_identical_ranks_pass_on_both_through_the_real_entry_point(
    locked: Path, tmp_path: Path
) -> None:
    manifest = _copy(locked, tmp_path / "p")
    job = torchrun(tmp_path / "job", ENTRY, args=_argv(str(manifest)), env=WIDE)
    assert job.rc == EXIT_OK, job.log
    assert "OK: 2 ranks agree with each other and the manifest" in job.log
    assert re.search(r"rank 1 \(.+\): OK, all 2 ranks agree", job.log)
    assert "job:       2 rank(s) on 1 node(s)" in job.log
    assert job.log.count("manifest:  ") == 1  # only rank 0 prints the report


def test_a_package_version_on_rank_1_refuses_on_every_rank(locked: Path, tmp_path: Path) -> None:
    manifest = _copy(locked, tmp_path / "p")
    version = installed_distributions()["torch"]  # the installed one: still only drift
    forced = {"FTMANIFEST_TESTING": "1", "FTMANIFEST_TEST_PACKAGE_VERSIONS": f"torch={version}"}
    job = verify_job(tmp_path / "job", _argv(str(manifest)), {"1": {"env": forced}})
    assert _codes(job) == {0: EXIT_REFUSED, 1: EXIT_REFUSED}, job.log
    zero = job.ranks[0]
    drift = _row(zero.out, "1", "environment.packages.torch")
    assert drift is not None and f"{version} (manifest)" in drift, zero.out
    assert "test override" in drift
    assert _row(zero.out, "0", "environment.packages.torch") is None  # rank 0 is fine
    assert "REFUSED: rank(s) 1 differ or drifted" in zero.out
    assert "rank(s) 1: TEST OVERRIDE ACTIVE" in zero.err  # rank 0 says so too
    one = job.ranks[1]
    assert one.out == ""  # rank 1 prints one line, on stderr
    assert "TEST OVERRIDE ACTIVE" in one.err
    assert re.search(r"rank 1 \(.+\): REFUSED; this rank: .*environment\.packages\.torch", one.err)


def test_an_env_var_on_rank_1_refuses_with_per_rank_json(locked: Path, tmp_path: Path) -> None:
    """CUBLAS_WORKSPACE_CONFIG is on the allowlist and torchrun does not set it."""
    manifest = _copy(locked, tmp_path / "p")
    job = verify_job(
        tmp_path / "job",
        _argv(str(manifest), "--format", "json"),
        {"1": {"env": {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}}},
    )
    assert _codes(job) == {0: EXIT_REFUSED, 1: EXIT_REFUSED}, job.log
    report = json.loads(job.ranks[0].out)  # rank 0's stdout is one JSON document
    assert report["ok"] is False and report["exit_code"] == EXIT_REFUSED
    assert report["world_size"] == 2 and report["nodes"] == 1
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    assert report["ranks"][1]["environment"]["env_vars"]["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert "CUBLAS_WORKSPACE_CONFIG" not in report["ranks"][0]["environment"]["env_vars"]
    rows = [(r["rank"], r["field"], r["expected"], r["observed"]) for r in report["rows"]]
    assert rows == [
        ("1", "environment.env_vars.CUBLAS_WORKSPACE_CONFIG", "(absent) (as rank 0)", ":4096:8")
    ]
    assert job.ranks[1].out == ""
    assert "this rank: environment.env_vars.CUBLAS_WORKSPACE_CONFIG" in job.ranks[1].err


def test_a_different_data_file_on_rank_1_refuses_on_every_rank(
    locked: Path, tmp_path: Path
) -> None:
    """Each rank reads its own copy of the project; rank 1's training data differs."""
    for rank in (0, 1):
        _copy(locked, tmp_path / f"r{rank}")
    train = tmp_path / "r1" / "data" / "train.jsonl"
    data = bytearray(train.read_bytes())
    at = data.index(b"department")
    data[at] = ord("D")
    train.write_bytes(bytes(data))
    job = verify_job(tmp_path / "job", _argv(str(tmp_path / "r{rank}" / locked.name)))
    assert _codes(job) == {0: EXIT_REFUSED, 1: EXIT_REFUSED}, job.log
    out = job.ranks[0].out
    drift = [line for line in out.splitlines() if re.match(r"^1\s+\S+\s+data\[0\]\.digest", line)]
    assert len(drift) == 1 and "(manifest)" in drift[0], out  # its drift row says it all
    assert not re.search(r"^(0|all)\s", out, re.M)  # rank 0 is named nowhere
    assert "this rank: data[0].digest" in job.ranks[1].err


def test_a_rank_that_never_joins_is_a_timeout_refusal(locked: Path, tmp_path: Path) -> None:
    manifest = _copy(locked, tmp_path / "p")
    argv = ["verify", str(manifest), "--no-signature", "--distributed", "--rank-timeout", "4"]
    job = verify_job(
        tmp_path / "job", argv, {"0": {"real_exit": True}, "1": {"sleep": 300}}, timeout=90
    )
    assert job.ranks[0].rc == EXIT_REFUSED, job.log
    assert "not every rank answered while joining within 4 s" in job.ranks[0].err
    assert "--rank-timeout" in job.ranks[0].err  # the hint
    assert job.ranks[1].rc is None  # it never joined; torchrun stopped it
    assert job.elapsed < 4 + 40


def test_a_rank_that_cannot_read_its_manifest_stops_everyone_at_once(
    locked: Path, tmp_path: Path
) -> None:
    """Rank 1's copy has no manifest: exit 2 on both ranks, long before the deadline."""
    _copy(locked, tmp_path / "r0")
    (tmp_path / "r1").mkdir()
    argv = _argv(str(tmp_path / "r{rank}" / locked.name))
    argv[argv.index("60")] = "200"
    job = verify_job(tmp_path / "job", argv)
    assert _codes(job) == {0: EXIT_INPUT, 1: EXIT_INPUT}, job.log
    assert job.elapsed < 60
    assert re.search(r"^1\s+\S+\s+", job.ranks[0].out, re.M), job.ranks[0].out
    assert "ERROR (exit 2): rank(s) 1 could not verify" in job.ranks[0].out
    assert "this rank:" in job.ranks[1].err


# --- without a launcher ---------------------------------------------------------------


def test_distributed_without_a_launcher_is_a_usage_error(
    locked: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert main(["verify", str(locked), "--distributed"]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert "torchrun --nproc-per-node N" in err and "Traceback" not in err
    assert main(["verify", str(locked), "--rank-timeout", "5"]) == EXIT_INPUT
    assert "--rank-timeout needs --distributed" in capsys.readouterr().err


# --- the test-only package override ---------------------------------------------------


def test_the_override_is_ignored_unless_testing() -> None:
    assert forced_versions({"FTMANIFEST_TEST_PACKAGE_VERSIONS": "torch=1.0"}) == {}
    assert (
        forced_versions({"FTMANIFEST_TESTING": "0", "FTMANIFEST_TEST_PACKAGE_VERSIONS": "a=1"})
        == {}
    )
    forced = forced_versions(
        {"FTMANIFEST_TESTING": "1", "FTMANIFEST_TEST_PACKAGE_VERSIONS": "Torch_X=1.0"}
    )
    assert list(forced) == ["torch-x"] and forced["torch-x"].startswith("1.0 (test override ")


def test_the_override_cannot_forge_a_clean_verify(
    locked: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Forcing the very version the manifest pins still drifts: it can only look different."""
    pinned = load_manifest(locked).manifest.environment.packages["torch"].lstrip("=")
    monkeypatch.setenv("FTMANIFEST_TESTING", "1")
    monkeypatch.setenv("FTMANIFEST_TEST_PACKAGE_VERSIONS", f"torch={pinned}")
    assert main(["verify", str(locked), "--no-signature"]) == EXIT_REFUSED
    captured = capsys.readouterr()
    assert "TEST OVERRIDE ACTIVE" in captured.err
    assert "environment.packages.torch" in captured.out
    one, two = forced_versions(), forced_versions()
    assert one["torch"] != two["torch"]  # a fresh marker each time: nothing to pin in advance


# --- the verdict (pure) ---------------------------------------------------------------


def _fp(rank: int, **changes: Any) -> dict[str, Any]:
    fp: dict[str, Any] = {
        "rank": rank,
        "host": f"h{rank // 2}",
        "node_rank": rank // 2,
        "local_rank": rank % 2,
        "world_size": 4,
        "ftmanifest": "1",
        "strategy": "ddp",
        "test_override": [],
        "manifest_digest": "sha256:" + "a" * 64,
        "environment": {"python": "3.11.7", "packages": {"torch": "==2.13.0"}, "env_vars": {}},
        "files": {"data[0].digest": "sha256:" + "b" * 64},
        "findings": [],
        "warnings": [],
        "ok": True,
        "error": None,
    }
    fp.update(changes)
    return fp


def _env(**packages: str) -> dict[str, Any]:
    return {"python": "3.11.7", "packages": packages, "env_vars": {}}


def test_the_majority_is_expected_so_a_drifted_rank_0_is_named(locked: Path) -> None:
    manifest = load_manifest(locked).manifest.model_copy(
        update={
            "distributed": load_manifest(locked).manifest.distributed.model_copy(
                update={"world_size": 4, "nodes": 2}
            )
        }
    )
    prints = [_fp(0, environment=_env(torch="==2.12.0"))] + [_fp(r) for r in (1, 2, 3)]
    verdict = judge(prints, manifest)
    assert verdict.exit_code == EXIT_REFUSED
    assert [(r.extra["rank"], r.field, r.expected, r.observed) for r in verdict.rows] == [
        ("0", "environment.packages.torch", "==2.13.0 (as rank 1-3)", "==2.12.0")
    ]
    assert verdict.named() == {0: ["environment.packages.torch"]}


def test_a_tie_goes_to_the_lowest_rank() -> None:
    prints = [_fp(0), _fp(1, files={"data[0].digest": "sha256:" + "c" * 64})]
    rows = judge(prints, None).rows
    assert [(r.extra["rank"], r.field) for r in rows] == [("1", "data[0].digest")]
    assert rows[0].expected.endswith("(as rank 0)")


def test_the_same_drift_on_every_rank_is_one_row_for_all() -> None:
    drift = {"field": "environment.python", "expected": "3.11.7", "observed": "3.12.1",
             "rule": "drift.python", "message": "python differs"}  # fmt: skip
    verdict = judge([_fp(0, findings=[drift]), _fp(1, findings=[drift])], None)
    assert [(r.extra["rank"], r.field) for r in verdict.rows] == [("all", "environment.python")]
    assert verdict.named() == {0: ["environment.python"], 1: ["environment.python"]}


def test_the_job_is_checked_against_the_distributed_section(locked: Path) -> None:
    manifest = load_manifest(locked).manifest  # ddp, world size 2, one node
    prints = [_fp(r, strategy="fsdp") for r in range(4)]  # 4 ranks on 2 nodes, FSDP
    rows = judge(prints, manifest).rows
    assert [(r.extra["rank"], r.field, r.expected, r.observed) for r in rows] == [
        ("job", "distributed.world_size", "2", "4"),
        ("job", "distributed.nodes", "1", "2"),
        ("job", "distributed.strategy", "ddp", "fsdp"),
    ]
    accepted = judge(prints[:2], manifest, {"distributed.strategy": "set by the script"})
    assert accepted.ok and [a.finding.field for a in accepted.accepted] == ["distributed.strategy"]


def test_a_rank_whose_verify_raised_fails_everyone_with_its_exit_code() -> None:
    err = {"message": "manifest.yaml: not found", "exit_code": 2, "field": None, "hint": None}
    verdict = judge([_fp(0), _fp(1, error=err, environment=None, files={})], None)
    assert verdict.exit_code == EXIT_INPUT
    assert [(r.extra["rank"], r.observed) for r in verdict.rows] == [
        ("1", "manifest.yaml: not found")
    ]  # and no "differs" rows against a rank that observed nothing


def test_different_manifests_are_refused_before_anything_else() -> None:
    assert judge_manifests([_fp(0), _fp(1)]) is None
    verdict = judge_manifests([_fp(0), _fp(1, manifest_digest="sha256:" + "f" * 64)])
    assert verdict is not None and verdict.exit_code == EXIT_REFUSED
    assert [(r.extra["rank"], r.field) for r in verdict.rows] == [("1", "manifest")]


def test_the_strategy_is_read_from_accelerate_and_the_training_arguments() -> None:
    assert strategy_from_env(1, {}) == "none"
    assert strategy_from_env(2, {}) == "ddp"
    assert strategy_from_env(2, {"ACCELERATE_USE_FSDP": "true"}) == "fsdp"
    deepspeed = {"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3"}
    assert strategy_from_env(2, deepspeed) == "zero3"
    unknown = strategy_from_env(2, {"ACCELERATE_USE_DEEPSPEED": "TRUE"})
    assert unknown == "deepspeed (ZeRO stage unknown)"  # matches no manifest value

    class Args:
        fsdp: Any = None
        deepspeed: Any = None

    args = Args()
    assert strategy_from_args(args, 2) == "ddp" and strategy_from_args(args, 1) == "none"
    args.deepspeed = {"zero_optimization": {"stage": 2}}
    assert strategy_from_args(args, 2) == "zero2"
    args.fsdp = True
    assert strategy_from_args(args, 2) == "fsdp"


@pytest.mark.parametrize(
    "answer",
    [
        None,
        "a string",
        ["a", "list"],
        {"rank": 1},  # no host
        {**_fp(1), "node_rank": "0"},
        {**_fp(1), "files": {"data[0].digest": ["not", "a", "digest"]}},
        {**_fp(1), "findings": ["not a row"]},
        {**_fp(1), "manifest_digest": ["unhashable"]},
        {**_fp(1), "error": {"message": "x", "exit_code": 0}},  # an error that is no failure
        {**_fp(1), "error": {"message": "x", "exit_code": "2"}},
    ],
)
def test_an_answer_that_is_not_a_fingerprint_names_its_rank(answer: Any) -> None:
    prints = sane([_fp(0), answer])
    verdict = judge(prints, None)
    assert verdict.exit_code == EXIT_REFUSED
    assert [(r.extra["rank"], r.observed) for r in verdict.rows] == [
        ("1", "rank 1 sent an answer that is not a fingerprint")
    ]
    assert judge_manifests(prints) is not None


def test_a_rank_cannot_claim_to_be_another() -> None:
    prints = sane([_fp(0), _fp(0, files={"data[0].digest": "sha256:" + "c" * 64})])
    assert [fp["rank"] for fp in prints] == [0, 1]
    assert [r.extra["rank"] for r in judge(prints, None).rows] == ["1"]


def test_what_ranks_send_is_escaped_on_the_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    hostile = "\x1b[2J\rrank 0: OK"
    env = {"python": "3.11.7", "packages": {"torch": "==2.13.0"}, "env_vars": {"TORCH_X": hostile}}
    prints = sane([_fp(0), _fp(1, host="evil\x1b]0;x\x07", environment=env)])
    verdict = judge(prints, None)
    args = argparse.Namespace(format="text", manifest=Path("m.yaml"))
    print_job(args, verdict, None, "ddp")
    sys.stderr.write(rank_line(1, verdict))
    captured = capsys.readouterr()
    for text in (captured.out, captured.err):
        assert "\x1b" not in text and "\r" not in text and "\x07" not in text
    assert "\\x1b[2J\\rrank 0: OK" in captured.out
    assert [r.field for r in verdict.rows] == ["environment.env_vars.TORCH_X"]
