"""The tutorial shows what ``make demo`` prints today.

The tutorial walks through manifests/demo.sh step by step.  This test runs the
demo in a copy of the project, then finds every command of every ``console``
block of docs/tutorial.md in the demo's full log (demo-out/demo.log), in order,
and compares the output shown under it with what the demo printed, as
``tests.support.console`` compares them.  The demo logs a command as bash's
``"$*"`` writes it (no quotes), so the tutorial's command is split as a shell
would split it before comparing; ``'...'`` stands for an argument not shown, a
leading ``(cd DIR && ...)`` for the folder it runs in, and a trailing
``# comment`` is the tutorial's own.  A command shown with no output must still
be one the demo runs as written.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.conftest import ROOT
from tests.support import demorun
from tests.support.console import commands, console_blocks, fold, matches

pytest.importorskip("transformers")  # the demo trains a real tiny model
if shutil.which("git") is None:
    pytest.skip("the demo needs git (its tiny example is a repository)", allow_module_level=True)

TUTORIAL = ROOT / "docs" / "tutorial.md"
NOT_IN_THE_LOG = {"make demo"}  # the command that runs the demo itself
_ID = re.compile(r"\b\d{8}T\d{6}Z-[0-9a-f]{12}\b")


def _pattern(command: str) -> re.Pattern[str]:
    """The demo log's ``$ COMMAND`` line for the tutorial's COMMAND."""
    command = re.sub(r"\s+#[^'\"]*$", "", command)  # the tutorial's comment
    inner = re.fullmatch(r"\(cd \S+ && (.*)\)", command)
    if inner:
        command = inner.group(1)
    words = [r"(?s:.*?)" if w == "..." else re.escape(w) for w in shlex.split(command)]
    return re.compile(r"^\$ " + " ".join(words) + r"\n", re.M)


def _outputs(log: str) -> list[tuple[int, int, int]]:
    """(start of the ``$`` line, start of its output, end of its output) of each command."""
    starts = [m.start() for m in re.finditer(r"^(?:\$ |== )", log, re.M)] + [len(log)]
    return [(a, a, b) for a, b in zip(starts, starts[1:], strict=False) if log[a] == "$"]


def stale(tutorial: str, log: str, root: str, at: int = 0) -> list[str]:
    """Every command of the tutorial's console blocks that the demo's LOG does not show
    as the tutorial does (the demo ran in ROOT), with both texts; the first command
    is looked for from offset ``at`` of the log on."""
    log = log.replace(root + "/", "")  # paths the demo printed in full: as the tutorial shows
    log = _ID.sub("<backup-id>", log)  # a backup's id is a command's argument too
    entries = _outputs(log)
    out: list[str] = []
    for block in console_blocks(tutorial):
        for command, expected in commands(block):
            if command in NOT_IN_THE_LOG:
                continue
            pattern = _pattern(_ID.sub("<backup-id>", command))
            found = next((e for e in entries if e[0] >= at and pattern.match(log, e[0])), None)
            if found is None:
                line = log[:at].count("\n")
                out.append(f"$ {command}\n--- the demo does not run this command (after line "
                           f"{line} of its log)")  # fmt: skip
                continue
            head = pattern.match(log, found[0])
            assert head is not None
            at = found[2]
            printed = log[head.end() : found[2]].rstrip("\n")
            if expected and not matches([fold(e, root) for e in expected], fold(printed, root)):
                out.append(
                    f"$ {command}\n--- the tutorial shows:\n" + "\n".join(expected)
                    + f"\n--- the demo prints now:\n{printed}"
                )  # fmt: skip
    return out


class Demo(NamedTuple):
    log: str  # the demo's full log (demo-out/demo.log)
    ran_in: str  # the folder it ran in (its log names paths under it in full)
    copy: Path  # a copy of the project, with the demo's output, to run commands in


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """The demo's log, once for the module: the log `make demo` left when its stamp
    proves it came from this tree, Python and packages (tests.support.demorun), else
    a new run in a copy of the project."""
    tmp = tmp_path_factory.mktemp("demo")
    copy = tmp / "project"
    demorun.copy_project(ROOT, copy)
    log = demorun.reusable_log(ROOT)
    if log is not None:
        shutil.copytree(ROOT / "demo-out", copy / "demo-out", symlinks=True)
        return Demo(log, str(ROOT), copy)
    done = demorun.run(copy, tmp, capture=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return Demo((copy / "demo-out" / "demo.log").read_text("utf-8"), str(copy), copy)


def test_every_console_block_of_the_tutorial_matches_the_demo(demo: Demo) -> None:
    tutorial = TUTORIAL.read_text("utf-8")
    assert console_blocks(tutorial), "the tutorial shows no console block"
    found = stale(tutorial, demo.log, demo.ran_in)
    assert not found, "tutorial console blocks that no longer match:\n\n" + "\n\n".join(found)


# --- the guides ---------------------------------------------------------------

GUIDES = ROOT / "docs" / "guides"
# Blocks that show a user's own project, not the demo's files or the repository's
# example manifests: what they print cannot be compared here.  (guide, first command)
ILLUSTRATIVE = {
    # eight ranks over a user's own data and manifest (no output shown)
    ("distributed.md", "torchrun --nproc-per-node 8 -m ftmanifest scan data/"),
    # a rank whose environment differs: the demo's case is a multi-line bash -c command
    ("distributed.md", "torchrun --nproc-per-node 2 -m ftmanifest verify demo-out/tiny/"),
    # LLaMA-Factory's own example config, not in this repository (its FILL count is
    # compared with init by tests/authoring)
    ("manifest.md", "ftmanifest init exp.yaml --from examples/train_lora/llama3_lora_sft.yaml"),
    # a colleague's manifest of a hub model whose snapshot is not cached here
    ("reproduce.md", "ftmanifest reproduce exp.yaml --no-signature"),
    # a user's own key, manifest and reviewer (no output shown)
    ("signing.md", "ftmanifest keygen -f ~/.ftmanifest/id_ed25519"),
    # a user's own training script (no output shown)
    ("ledger-and-runs.md", "ftmanifest run demo-out/tiny/manifest.yaml -- python train.py"),
}  # (guide, the start of its first command)


def _guide_blocks() -> list[tuple[str, list[str]]]:
    return [
        (guide.name, block)
        for guide in sorted(GUIDES.glob("*.md"))
        for block in console_blocks(guide.read_text("utf-8"))
    ]


def _illustrative(name: str, block: list[str]) -> tuple[str, str] | None:
    first = commands(block)[0][0]
    return next((k for k in ILLUSTRATIVE if k[0] == name and first.startswith(k[1])), None)


def test_every_guide_console_block_matches_the_demo_or_the_repository(
    demo: Demo,
) -> None:
    """A guide's block over the demo's files is found in the demo's log, as the
    tutorial's are (each block in its own order); a block over the repository's
    own example manifests runs in the demo's copy of the project; the rest are
    named in ILLUSTRATIVE, so a new block is compared unless someone says why not."""
    found: list[str] = []
    for name, block in _guide_blocks():
        if _illustrative(name, block):
            continue
        text = "\n".join(["```console", *block, "```"])
        if any("demo-out/" in c for c, _ in commands(block)):
            found += [f"{name}: {s}" for s in _stale_anywhere(text, demo.log, demo.ran_in)]
            continue
        for command, expected in commands(block):
            done = subprocess.run(
                ["bash", "-c", command], cwd=demo.copy, capture_output=True, text=True, timeout=120,
                env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                     + os.environ.get("PATH", "")},
            )  # fmt: skip
            printed = (done.stdout + done.stderr).rstrip("\n")
            if expected and not matches([fold(e) for e in expected], fold(printed)):
                found.append(
                    f"{name}: $ {command}\n--- the guide shows:\n" + "\n".join(expected)
                    + f"\n--- it prints now:\n{printed}"
                )  # fmt: skip
    assert not found, "guide console blocks that no longer match:\n\n" + "\n\n".join(found)


def _stale_anywhere(block: str, log: str, root: str) -> list[str]:
    """A guide's block shows one moment of the demo, not the demo's order: it is true
    when, from some run of its first command on, the log shows the block as it is
    (the difference from the first run when none does)."""
    first = commands(console_blocks(block)[0])[0][0]
    pattern = _pattern(_ID.sub("<backup-id>", first))
    plain = _ID.sub("<backup-id>", log.replace(root + "/", ""))
    starts = [m.start() for m in pattern.finditer(plain)]
    for start in starts:
        if not stale(block, log, root, at=start):
            return []
    return stale(block, log, root)


def test_every_illustrative_block_is_still_in_a_guide() -> None:
    present = {_illustrative(name, block) for name, block in _guide_blocks()}
    assert not ILLUSTRATIVE - present, sorted(ILLUSTRATIVE - present)


def test_the_manifest_guide_shows_the_digest_the_tool_prints() -> None:
    """Digests are folded when blocks are compared; the guide's one worked digest
    is the real one (a reader checks it by hand)."""
    guide = (GUIDES / "manifest.md").read_text("utf-8")
    shown = re.search(r"^(sha256:[0-9a-f]{64})  (manifests/\S+)$", guide, re.M)
    assert shown is not None
    from ftmanifest.manifest import load_manifest

    assert load_manifest(ROOT / shown.group(2)).digest() == shown.group(1)
