"""Processes appending to one ledger at once lose nothing and, under the
folder lock (flock), form one chain.

Eight interpreters each append 25 records.  They start together: each says
"ready" once its imports are done, then waits on its stdin until all eight
are ready, so the appends really overlap (no sleeps).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ftmanifest.ledger import Ledger
from tests.conftest import ROOT
from tests.ledger.conftest import check_json

WRITERS = 8
EACH = 25

CHILD = """
import sys
from ftmanifest.ledger import Ledger

store = Ledger(sys.argv[1])
writer = sys.argv[2]
print("ready", flush=True)
sys.stdin.readline()  # the starting gun
for i in range(int(sys.argv[3])):
    store.append({"status": "planned", "attempt": f"{writer}-{i}", "writer": writer, "i": i})
print("done", flush=True)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="no flock on Windows: appends fork there")
def test_concurrent_appends_form_one_chain(folder: Path) -> None:
    folder.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(folder), f"w{n}", str(EACH)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for n in range(WRITERS)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            assert p.stdout.readline().strip() == "ready", p.stderr.read() if p.stderr else ""
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0 and out.strip() == "done", err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    contents = Ledger(folder).read()
    assert contents.problems == []
    assert len(contents.entries) == WRITERS * EACH
    assert len(list(folder.iterdir())) == WRITERS * EACH  # no temp file left behind
    assert sorted(e.record["attempt"] for e in contents.entries) == sorted(
        f"w{n}-{i}" for n in range(WRITERS) for i in range(EACH)
    )
    # one chain: every record follows exactly the one before it
    assert [e.seq for e in contents.entries] == list(range(1, WRITERS * EACH + 1))
    for before, after in zip(contents.entries, contents.entries[1:], strict=False):
        assert after.prev == [before.id]
    assert len(contents.heads()) == 1
    # each writer's own records stay in its order
    for n in range(WRITERS):
        mine = [e.record["i"] for e in contents.entries if e.record["writer"] == f"w{n}"]
        assert mine == list(range(EACH))

    code, report = check_json(folder)
    assert (code, report["problems"], report["records"]) == (0, [], WRITERS * EACH)
    assert report["heads"] == [contents.entries[-1].id]
