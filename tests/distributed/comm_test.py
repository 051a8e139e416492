"""Which rank this is, and the gather with a deadline, on a real torchrun job; a rank
that sends a crafted pickle runs nothing on the others and is refused by name."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from ftmanifest.distributed.comm import Job, job_from_env
from ftmanifest.errors import EXIT_INPUT, UsageError
from tests.distributed.launch import torchrun

TORCHRUN_ENV = {
    "RANK": "3",
    "WORLD_SIZE": "8",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "2",
    "GROUP_RANK": "1",
    "MASTER_ADDR": "node0",
    "MASTER_PORT": "29500",
}


def test_no_launcher_means_no_job() -> None:
    assert job_from_env({}) is None
    assert job_from_env({"RANK": "0", "MASTER_ADDR": "x", "MASTER_PORT": "1"}) is None


def test_reads_what_torchrun_sets() -> None:
    assert job_from_env(TORCHRUN_ENV) == Job(
        rank=3, world_size=8, local_rank=1, local_world_size=2, node_rank=1, master="node0:29500"
    )


def test_a_launcher_that_sets_only_the_essentials() -> None:
    """srun/kubectl setups often leave out LOCAL_* and GROUP_RANK: one node is assumed."""
    env = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}
    job = job_from_env(env)
    assert job is not None
    assert (job.local_rank, job.local_world_size, job.node_rank) == (0, 2, 0)
    assert not job.is_main and job_from_env({**env, "RANK": "0"}).is_main  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"RANK": "one"}, "RANK"),
        ({"WORLD_SIZE": "2.0"}, "WORLD_SIZE"),
        ({"LOCAL_RANK": ""}, "LOCAL_RANK"),
        ({"GROUP_RANK": "0x1"}, "GROUP_RANK"),
        ({"RANK": "8"}, "RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT"),
        ({"RANK": "-1"}, "RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT"),
        ({"WORLD_SIZE": "0", "RANK": "0"}, "RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT"),
        ({"MASTER_PORT": None}, "RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT"),
        ({"RANK": None}, "RANK"),
    ],
)
def test_variables_that_describe_no_job_are_usage_errors(
    changes: dict[str, str | None], field: str
) -> None:
    env = {k: v for k, v in {**TORCHRUN_ENV, **changes}.items() if v is not None}
    with pytest.raises(UsageError) as caught:
        job_from_env(env)
    assert caught.value.exit_code == EXIT_INPUT
    assert caught.value.field == field
    assert "torchrun" in (caught.value.hint or "")


GATHER = """\
import json, os, sys, time
from ftmanifest.distributed.comm import UNREADABLE, job_from_env, joined
from ftmanifest.errors import FtManifestError

job = job_from_env()
time.sleep(float(os.environ.get(f"FTM_SLEEP_{job.rank}", "0")))
started = time.monotonic()
try:
    with joined(job, float(os.environ["FTM_TIMEOUT"])) as comm:
        started = time.monotonic()
        time.sleep(float(os.environ.get(f"FTM_HANG_{job.rank}", "0")))
        got = comm.all_gather_json({"rank": job.rank, "pid": os.getpid()}, "test objects")
        as_json = comm.all_gather_json({"rank": job.rank, "text": "é\\n" * (job.rank * 5000)})
        if job.rank == 1:  # a rank whose answer is not JSON (a hostile or broken peer)
            import json as json_module
            json_module.dumps = lambda *a, **k: "{not json"
        broken = comm.all_gather_json({"rank": job.rank})
    result = {
        "got": got,
        "json": as_json,
        "unreadable": [b is UNREADABLE for b in broken],
    }
except FtManifestError as exc:
    result = {"error": exc.message, "exit_code": exc.exit_code, "reason": exc.reason}
result["elapsed"] = time.monotonic() - started
with open(f"{os.environ['FTM_OUT']}/gather-{job.rank}.json", "w") as f:
    json.dump(result, f)
sys.exit(result.get("exit_code", 0))
"""


def _gathered(folder: Path, rank: int) -> dict[str, object]:
    path = folder / f"gather-{rank}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def test_every_rank_gets_every_rank_object_in_rank_order(tmp_path: Path) -> None:
    job = torchrun(tmp_path, GATHER, env={"FTM_TIMEOUT": "60"})
    assert job.rc == 0, job.log
    results = [_gathered(tmp_path, r) for r in (0, 1)]
    for result in results:
        got = result["got"]
        assert isinstance(got, list)
        assert [g["rank"] for g in got] == [0, 1]
        assert len({g["pid"] for g in got}) == 2  # two processes, not one object twice
    assert results[0]["got"] == results[1]["got"]
    for result in results:  # as JSON: answers of different lengths, never unpickled
        assert result["json"] == [{"rank": 0, "text": ""}, {"rank": 1, "text": "é\n" * 5000}]
        assert result["unreadable"] == [False, True]


def test_a_rank_that_never_joins_is_a_timeout_refusal_not_a_hang(tmp_path: Path) -> None:
    """Rank 1 sleeps far past the deadline; rank 0 refuses (exit 1) within it."""
    job = torchrun(tmp_path, GATHER, env={"FTM_TIMEOUT": "3", "FTM_SLEEP_1": "300"}, timeout=90)
    zero = _gathered(tmp_path, 0)
    assert zero.get("exit_code") == 1, job.log
    assert zero["reason"] == "rank-timeout"
    assert "rank 0 of 2: not every rank answered while joining within 3 s" in str(zero["error"])
    assert 2.5 <= float(zero["elapsed"]) < 3 + 15  # the deadline, not the sleep
    assert _gathered(tmp_path, 1) == {}  # rank 1 never got that far: torchrun stopped it
    assert job.rc != 0 and job.elapsed < 60


def test_a_rank_that_joins_then_hangs_is_a_timeout_refusal(tmp_path: Path) -> None:
    """Rank 1 joins, then stops answering; rank 0's gather gives up at the deadline."""
    job = torchrun(tmp_path, GATHER, env={"FTM_TIMEOUT": "3", "FTM_HANG_1": "300"}, timeout=90)
    zero = _gathered(tmp_path, 0)
    assert zero.get("exit_code") == 1, job.log
    # the rank that went silent is named, with its host
    host = socket.gethostname()
    assert f"rank 1 ({host}) did not answer while gathering test objects within 3 s" in str(
        zero["error"]
    )
    assert 2.5 <= float(zero["elapsed"]) < 3 + 15
    assert job.elapsed < 60


ATTACK = """\
import json, os, pickle, sys
from pathlib import Path
from ftmanifest.data import parallel, ranks
from ftmanifest.distributed import shard
from ftmanifest.distributed.comm import job_from_env, joined
from ftmanifest.errors import FtManifestError

class Boom:
    def __reduce__(self):
        return (os.mkdir, (os.environ["FTM_MARKER"],))

job = job_from_env()
out = Path(os.environ["FTM_OUT"])
steps = {
    "exit codes": lambda c: shard.agree_exit(c, 0),
    "file stats": lambda c: shard.hash_files(c, [out / "ftm_rank_main.py"], use_cache=False),
    "record signatures": lambda c: list(
        ranks.RankSigner(c, parallel.Workers(1)).signatures(out / "rows.jsonl", None)
    ),
}
result = {}
with joined(job, 60.0) as comm:
    for name, step in steps.items():
        if job.rank == 1:  # a hostile peer: raw pickle bytes instead of the step's answer
            comm.all_gather_bytes(pickle.dumps(Boom()), name)
            continue
        try:
            step(comm)
            result[name] = "accepted"
        except FtManifestError as exc:
            result[name] = {"message": exc.message, "exit_code": exc.exit_code}
(out / f"attack-{job.rank}.json").write_text(json.dumps(result))
"""


def test_a_rank_sending_a_crafted_pickle_runs_nothing_and_is_refused(tmp_path: Path) -> None:
    """Rank 1 answers three gathers with pickle bytes that would create a folder when
    unpickled: rank 0 refuses each naming rank 1 (exit 1), and the folder never appears."""
    import os
    import pickle

    marker = tmp_path / "pwned"
    probe = tmp_path / "probe"

    class Boom:
        def __reduce__(self) -> tuple[object, ...]:
            return (os.mkdir, (str(probe),))

    pickle.loads(pickle.dumps(Boom()))  # what all_gather_object would have done
    assert probe.is_dir()
    rows = "".join(json.dumps({"text": f"row {i} of the data"}) + "\n" for i in range(50))
    (tmp_path / "rows.jsonl").write_text(rows, "utf-8")
    job = torchrun(tmp_path, ATTACK, env={"FTM_MARKER": str(marker)}, timeout=120)
    assert job.rc == 0, job.log
    result = _gathered_attack(tmp_path)
    assert set(result) == {"exit codes", "file stats", "record signatures"}, job.log
    for name, refusal in result.items():
        assert refusal["exit_code"] == 1, (name, refusal)
        assert refusal["message"].startswith("rank 1 sent an answer that is not"), refusal
        assert name in refusal["message"]
    assert not marker.exists()


def _gathered_attack(folder: Path) -> dict[str, dict[str, object]]:
    return json.loads((folder / "attack-0.json").read_text())  # type: ignore[no-any-return]
