"""Every subcommand, through the real console entry, against bad paths and inputs.

A user mistake is exit 2 (or a refusal, 1) with the path and a fix; never exit
3, never a traceback, never "internal error".  The list of commands comes from
the one registry (``ftmanifest.cli.COMMANDS``); a test fails when a command is
added without rows here.  The FIFO rows rely on the runner's timeout (120 s): a
command that blocks on a FIFO fails instead of hanging the suite.

Each row runs in a process forked from a server that imported the CLI once
(``run_cli_forked``; ``tests.support.cli_fork`` says what a fork shares with its
server): a separate process with the row's own environment, folder and fds, the
same exit code and output as a fresh interpreter, without three seconds of
start-up and imports a row.  A row whose environment a fork cannot honour (one
read at start-up or import) runs a fresh interpreter by itself; no row here has
one today.  The ``needs`` rows change files, not the process, so they fork too.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ftmanifest.cli import COMMANDS
from tests.conftest import run_cli_forked

ROOT_USER = os.geteuid() == 0

MINIMAL = """\
ftmanifest: 1
experiment: {id: bad-input}
model: {path: model}
data:
  - {name: train, role: train, path: train.jsonl, license: test}
"""

# name -> file content (bytes), or a builder for what is not a plain file
INPUTS: dict[str, bytes | None] = {
    "empty": b"",
    "binary": random.Random(7).randbytes(4096),
    "nul": b"ftmanifest: 1\nexperiment: {id: x\x00}\n",
    "utf8": b"ftmanifest: 1\nexperiment: {id: caf\xe9}\n",
    "big": b"# padding\n" * (2 * 1024 * 1024 // 10 + 1),
    "huge-int": MINIMAL.encode() + b"seeds: {python: 99999999999999999999}\n",
    "huge-int-free": b"ftmanifest: 1\nexperiment: {id: x, changes: {lr: 99999999999999999999}}\n",
    "inf": b"ftmanifest: 1\nexperiment: {id: x, changes: {lr: 1e400}}\n",
    "tab": b"ftmanifest: 1\nexperiment:\n\tid: x\n",
    "unclosed": b'ftmanifest: 1\nexperiment:\n  id: "x\nmodel: {path: m}\n',
    "not-a-mapping": b"- 1\n- 2\n",
    "template": None,  # `ftmanifest init`'s own output
    "missing": None,
    "dir": None,
    "fifo": None,
    "loop": None,
    "unreadable": None,
    "proc-file": None,
    "proc-dir": None,
}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """What `ftmanifest init template.yaml` writes (the same bytes every time: one run
    serves every row, each of which gets its own copy)."""
    path = tmp_path_factory.mktemp("init") / "template.yaml"
    assert run_cli_forked("init", str(path)).returncode == 0
    return path.read_bytes()


@pytest.fixture
def bad(tmp_path: Path, template: bytes) -> Iterator[dict[str, Path]]:
    """One path per entry of ``INPUTS``, plus output targets; immutable bits undone after."""
    paths: dict[str, Path] = {}
    for name, content in INPUTS.items():
        if content is not None:
            paths[name] = tmp_path / f"{name}.yaml"
            paths[name].write_bytes(content)
    paths["missing"] = tmp_path / "absent.yaml"
    paths["dir"] = tmp_path / "folder"
    paths["dir"].mkdir()
    paths["fifo"] = tmp_path / "fifo.yaml"
    os.mkfifo(paths["fifo"])
    paths["loop"] = tmp_path / "loop.yaml"
    paths["loop"].symlink_to(paths["loop"])
    paths["unreadable"] = tmp_path / "unreadable.yaml"
    paths["unreadable"].write_text(MINIMAL)
    paths["unreadable"].chmod(0)
    paths["proc-file"] = Path("/proc/self/status")
    paths["proc-dir"] = Path("/proc/self")
    paths["template"] = tmp_path / "template.yaml"
    paths["template"].write_bytes(template)
    # a project `lock` can pin (no git needed), then made unwritable
    project = tmp_path / "project"
    (project / "model").mkdir(parents=True)
    (project / "model" / "config.json").write_text("{}")
    (project / "train.jsonl").write_text('{"text": "a"}\n')
    paths["lockable"] = project / "exp.yaml"
    paths["lockable"].write_text(MINIMAL)
    paths["frozen-dir"] = tmp_path / "frozen"
    paths["frozen-dir"].mkdir()
    paths["frozen-file"] = paths["frozen-dir"] / "kept.json"
    paths["frozen-file"].write_text("{}")
    paths["clean"] = tmp_path / "clean.txt"
    paths["clean"].write_text("nothing to see\n")
    frozen: list[Path] = []
    if ROOT_USER:  # root writes through 0o555; the immutable bit stops even root
        for p in (paths["frozen-file"], paths["frozen-dir"]):
            if _chattr("+i", p):
                frozen.append(p)
    else:
        paths["frozen-dir"].chmod(0o555)
    yield paths
    for p in frozen:
        _chattr("-i", p)
    paths["frozen-dir"].chmod(0o755)


@dataclass(frozen=True)
class Row:
    id: str
    argv: Callable[[dict[str, Path]], list[str]]
    env: tuple[tuple[str, str], ...] = ()
    codes: tuple[int, ...] = (1, 2)
    xfail: str | None = None
    needs: str | None = None  # "not-root" or "frozen"


MANIFEST_INPUTS = [n for n in INPUTS if n != "unreadable"] + (
    ["unreadable"] if not ROOT_USER else []
)

# command -> argv around the manifest
MANIFEST_COMMANDS: dict[str, Callable[[Path, dict[str, Path]], list[str]]] = {
    "lint": lambda m, p: ["lint", str(m)],
    "digest": lambda m, p: ["digest", str(m)],
    "lock": lambda m, p: ["lock", "--dry-run", str(m)],
    "verify": lambda m, p: ["verify", str(m), "--no-signature"],
    "reproduce": lambda m, p: ["reproduce", str(m), "--requirements", str(p["dir"] / "req.txt")],
    "run": lambda m, p: ["run", str(m), "--no-signature", "--", "true"],
    "sign": lambda m, p: ["sign", str(m), "--key", str(p["missing"].with_name("no-key"))],
    "signers": lambda m, p: ["signers", str(m)],
    "runs": lambda m, p: ["runs", str(m), "--mark", "invalid", "--reason", "bad input"],
    "bind": lambda m, p: [
        "bind",
        str(p["dir"]),
        "--manifest",
        str(m),
        "--key",
        str(p["missing"].with_name("no-key")),
    ],  # fmt: skip
    "check-adapter": lambda m, p: ["check-adapter", str(p["dir"]), "--manifest", str(m)],
    "audit": lambda m, p: ["audit", str(p["dir"]), "--manifest", str(m), "--no-signature"],
    "score": lambda m, p: [
        "score",
        "--manifest",
        str(m),
        "--split",
        "train",
        "--predictions",
        str(p["clean"]),
        "--out",
        str(p["dir"] / "r.json"),
    ],  # fmt: skip
    "backup": lambda m, p: [
        "backup",
        "create",
        str(p["clean"]),
        "--to",
        str(p["dir"] / "backups"),
        "--key",
        str(p["missing"].with_name("no-key")),
        "--manifest",
        str(m),
    ],  # fmt: skip
    "prune": lambda m, p: ["prune", str(p["dir"]), "--manifest", str(m)],
    "diff": lambda m, p: ["diff", str(p["template"]), str(m)],
    "estimate": lambda m, p: ["estimate", str(m)],
    "data": lambda m, p: ["data", "check", str(m)],
    "ledger": lambda m, p: ["ledger", "plan", str(m), "--ledger", str(p["dir"] / "ledger")],
    "preflight": lambda m, p: ["preflight", str(m), "--no-record", "--only", "stack"],
    "plan": lambda m, p: ["plan", str(m), "--days", "3", "--tokens-per-second", "100"],
    "export": lambda m, p: ["export", str(m), "--format", "cyclonedx"],
    "unseal": lambda m, p: [
        "unseal",
        str(m),
        "--split",
        "train",
        "--reason",
        "bad input",
        "--ledger",
        str(p["dir"] / "ledger"),
    ],  # fmt: skip
    "compare": lambda m, p: [
        "compare",
        str(m),
        "--baseline",
        str(p["clean"]),
        "--candidate",
        str(p["clean"]),
    ],  # fmt: skip
}
# (command, input) pairs that still exit 3 in code this suite's owner does not own
SIGNING_XFAIL: dict[tuple[str, str], str] = {}


def _manifest_rows() -> list[Row]:
    rows = []
    for command, build in MANIFEST_COMMANDS.items():
        for name in MANIFEST_INPUTS:
            codes = (
                (0, 1, 2)
                if name == "template" and command in ("digest", "runs", "diff", "ledger", "data")
                else (1, 2)
            )
            rows.append(
                Row(
                    f"{command}-{name}",
                    lambda p, b=build, n=name: b(p[n], p),
                    codes=codes,
                    xfail=SIGNING_XFAIL.get((command, name)),
                )
            )
    return rows


def _out(p: dict[str, Path], where: str) -> Path:
    return {
        "dir": p["dir"],
        "proc": Path("/proc/self/new-file.json"),
        "sys": Path("/sys/new-file.json"),
        "no-folder": p["dir"] / "no" / "such" / "out.json",
        "frozen-dir": p["frozen-dir"] / "new.json",
        "frozen-file": p["frozen-file"],
        "file-as-folder": p["clean"] / "out.json",
    }[where]


OUTPUTS = ["dir", "proc", "sys", "no-folder", "frozen-dir", "frozen-file", "file-as-folder"]


def _output_rows() -> list[Row]:
    rows = []
    for where in OUTPUTS:
        needs = "frozen" if where.startswith("frozen") else None
        rows += [
            Row(
                f"init-{where}",
                lambda p, w=where: ["init", "--force", str(_out(p, w))],
                needs=needs,
            ),
            Row(
                f"schema-write-{where}",
                lambda p, w=where: ["schema", "--write", str(_out(p, w))],
                needs=needs,
            ),  # fmt: skip
            Row(
                f"scan-write-baseline-{where}",
                lambda p, w=where: ["scan", str(p["clean"]), "--write-baseline", str(_out(p, w))],
                needs=needs,
            ),  # fmt: skip
            Row(
                f"scan-redact-to-{where}",
                lambda p, w=where: [
                    "scan",
                    str(p["clean"]),
                    "--redact-to",
                    str(_out(p, w).parent if w == "frozen-file" else _out(p, w)),
                ],
                codes=(0, 1, 2) if where == "dir" else (1, 2),
                needs=needs,
            ),  # fmt: skip
            Row(  # keygen makes a missing folder, as ssh-keygen makes ~/.ssh
                f"keygen-{where}",
                lambda p, w=where: ["keygen", "-f", str(_out(p, w)), "--no-passphrase"],
                codes=(0, 1, 2) if where == "no-folder" else (1, 2),
                needs=needs,
            ),  # fmt: skip
        ]
    rows += [
        Row("lock-frozen-manifest", lambda p: ["lock", str(p["lockable"])], needs="frozen-lock"),
        Row("lock-frozen-folder", lambda p: ["lock", str(p["lockable"])], needs="frozen-lock-dir"),
    ]
    return rows


SCAN_INPUTS = ["missing", "dir", "fifo", "loop", "proc-file", "binary", "nul", "big", "empty"]

OTHER_ROWS = [
    *(
        Row(
            f"ledger-{action}-{name}",
            lambda p, n=name, a=action: [
                "ledger",
                a,
                *(["x1"] if a == "show" else []),
                "--ledger",
                str(p[n]),
            ],
            codes=(0, 1, 2),
        )  # fmt: skip
        for name in SCAN_INPUTS
        for action in ("list", "check", "show")
    ),
    *(
        Row(f"scan-{name}", lambda p, n=name: ["scan", "--no-cache", str(p[n])], codes=(0, 1, 2))
        for name in SCAN_INPUTS
    ),
    *(
        Row(
            f"report-{name}",
            lambda p, n=name: ["report", str(p[n]), "--out", str(p["dir"] / "report")],
            codes=(2,),
        )
        for name in SCAN_INPUTS
    ),
    *(
        # none of these holds a backup: nothing verified is never OK
        Row(f"backup-check-{name}", lambda p, n=name: ["backup", "check", str(p[n])], codes=(1, 2))
        for name in SCAN_INPUTS
    ),  # fmt: skip
    *(
        Row(
            f"restore-{name}",
            lambda p, n=name: [
                "restore",
                str(p[n]),
                "-i",
                str(p["clean"]),
                "--to",
                str(p["dir"] / "restored"),
            ],
            codes=(1, 2),
        )  # fmt: skip
        for name in SCAN_INPUTS
    ),
    *(
        Row(
            f"backup-{name}",
            lambda p, n=name: [
                "backup",
                "create",
                str(p[n]),
                "--to",
                str(p["dir"] / "b"),
                "--key",
                str(p["binary"]),
                "-r",
                "age1" + "q" * 58,
            ],
            codes=(2,),
        )  # fmt: skip
        for name in SCAN_INPUTS
    ),
    *(
        Row(
            f"prune-{name}",
            lambda p, n=name: ["prune", str(p[n]), "--keep-last", "2"],
            codes=(0, 2),
        )
        for name in SCAN_INPUTS
    ),  # fmt: skip
    Row("prune-no-policy", lambda p: ["prune", str(p["dir"])], codes=(2,)),
    Row("prune-keep-zero", lambda p: ["prune", str(p["dir"]), "--keep-last", "0"], codes=(2,)),
    Row(
        "prune-keep-within-word",
        lambda p: ["prune", str(p["dir"]), "--keep-within", "forever"],
        codes=(2,),
    ),  # fmt: skip
    Row(
        "prune-both-policies",
        lambda p: ["prune", str(p["dir"]), "--keep-last", "1", "--manifest", str(p["template"])],
        codes=(2,),
    ),  # fmt: skip
    Row("backup-no-to", lambda p: ["backup", "create", str(p["clean"]), "--key", "k"], codes=(2,)),
    Row(
        "backup-bad-recipient",
        lambda p: [
            "backup",
            "create",
            str(p["clean"]),
            "--to",
            str(p["dir"]),
            "--key",
            "k",
            "-r",
            "age1xyz",
        ],
        codes=(2,),
    ),  # fmt: skip
    Row(
        "backup-rsa-recipient",
        lambda p: [
            "backup",
            "create",
            str(p["clean"]),
            "--to",
            str(p["dir"]),
            "--key",
            "k",
            "-r",
            "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ",
        ],
        codes=(2,),
    ),  # fmt: skip
    Row(
        "backup-recipients-file-fifo",
        lambda p: [
            "backup",
            "create",
            str(p["clean"]),
            "--to",
            str(p["dir"]),
            "--key",
            "k",
            "-R",
            str(p["fifo"]),
        ],
        codes=(2,),
    ),  # fmt: skip
    Row(
        "backup-passphrase-and-recipient",
        lambda p: [
            "backup",
            "create",
            str(p["clean"]),
            "--to",
            str(p["dir"]),
            "--key",
            "k",
            "-r",
            "age1" + "q" * 58,
            "--passphrase-env",
            "HOME",
        ],
        codes=(2,),
    ),  # fmt: skip
    Row(
        "backup-check-two", lambda p: ["backup", "check", str(p["dir"]), str(p["dir"])], codes=(2,)
    ),
    Row(
        "backup-check-identity-fifo",
        lambda p: ["backup", "check", str(p["dir"]), "--read-data", "-i", str(p["fifo"])],
        codes=(2,),
    ),  # fmt: skip
    Row(
        "scan-engine-bogus",
        lambda p: ["scan", "--no-cache", str(p["clean"])],
        env=(("FTMANIFEST_SCAN_ENGINE", "bogus"),),
        codes=(2,),
    ),  # fmt: skip
    Row("scan-jobs-negative", lambda p: ["scan", str(p["clean"]), "--jobs", "-1"], codes=(2,)),
    Row(
        "scan-max-size-word", lambda p: ["scan", str(p["clean"]), "--max-size", "lots"], codes=(2,)
    ),
    Row(
        "scan-baseline-dir",
        lambda p: ["scan", str(p["clean"]), "--baseline", str(p["dir"])],
        codes=(2,),
    ),  # fmt: skip
    Row(
        "scan-baseline-binary",
        lambda p: ["scan", str(p["clean"]), "--baseline", str(p["binary"])],
        codes=(2,),
    ),  # fmt: skip
    Row(
        "scan-baseline-fifo",
        lambda p: ["scan", str(p["clean"]), "--baseline", str(p["fifo"])],
        codes=(2,),
    ),  # fmt: skip
    Row(
        "scan-phone-regions-bogus",
        lambda p: ["scan", str(p["clean"]), "--phone-regions", "ZZ"],
        codes=(2,),
    ),  # fmt: skip
    Row("no-command", lambda p: [], codes=(2,)),
    Row("unknown-command", lambda p: ["frobnicate"], codes=(2,)),
    Row("lint-nothing", lambda p: ["lint"], codes=(2,)),
    Row(
        "lint-abbreviated-option",
        lambda p: ["lint", "--form", "json", str(p["template"])],
        codes=(2,),
    ),  # fmt: skip
    Row("init-nothing", lambda p: ["init", "--force"], codes=(2,)),
    Row("init-two-paths", lambda p: ["init", str(p["missing"]), str(p["dir"])], codes=(2,)),
    Row("init-bad-id", lambda p: ["init", str(p["missing"]), "--id", "../x y"], codes=(2,)),
    Row("schema-write-nothing", lambda p: ["schema", "--write"], codes=(2,)),
    Row(
        "digest-canonical-json",
        lambda p: ["digest", "--canonical", "--format", "json", str(p["template"])],
        codes=(0,),
    ),  # fmt: skip
    Row("lock-check-alone", lambda p: ["lock", "--check", str(p["missing"])], codes=(2,)),
    Row(
        "lock-code-missing",
        lambda p: ["lock", str(p["lockable"]), "--code", str(p["missing"])],
        codes=(0, 1, 2),
    ),  # fmt: skip
    Row("lock-toml", lambda p: ["lock", str(p["dir"] / "x.toml")], codes=(2,)),
    Row(
        "verify-accept-without-reason",
        lambda p: ["verify", str(p["template"]), "--accept", "model.revision"],
        codes=(1, 2),
    ),  # fmt: skip
    Row(
        "run-without-command", lambda p: ["run", str(p["template"]), "--no-signature"], codes=(1, 2)
    ),  # fmt: skip
    Row(
        "run-grace-word",
        lambda p: ["run", str(p["template"]), "--grace", "soon", "--", "true"],
        codes=(2,),
    ),  # fmt: skip
    Row(
        "sign-abbreviated-passphrase",
        lambda p: ["sign", str(p["template"]), "--key", "k", "--pass", "hunter2"],
        codes=(2,),
    ),  # fmt: skip
    Row("sign-key-dir", lambda p: ["sign", str(p["template"]), "--key", str(p["dir"])]),
    Row("sign-key-binary", lambda p: ["sign", str(p["template"]), "--key", str(p["binary"])]),
    Row("signers-trust-dir", lambda p: ["signers", str(p["template"]), "--trust", str(p["dir"])]),
    Row(
        "signers-threshold-word",
        lambda p: ["signers", str(p["template"]), "--threshold", "two"],
        codes=(2,),
    ),  # fmt: skip
    Row(
        "signers-threshold-zero",
        lambda p: ["signers", str(p["template"]), "--threshold", "0"],
        codes=(1, 2),
    ),  # fmt: skip
    *(
        Row(
            f"trust-add-{name}",
            lambda p, n=name: ["trust", "add", str(p[n]), "--principal", "a@example.org"],
            codes=(2,),
        )
        for name in ("dir", "fifo", "template")
    ),  # fmt: skip
    Row(
        "keygen-passphrase-env-unset",
        lambda p: ["keygen", "-f", str(p["dir"] / "k"), "--passphrase-env", "FTM_TEST_UNSET_VAR"],
        codes=(2,),
    ),  # fmt: skip
    Row(
        "keygen-both-passphrase-options",
        lambda p: ["keygen", "-f", str(p["dir"] / "k"), "--passphrase-env", "X", "--no-passphrase"],
        codes=(2,),
    ),  # fmt: skip
    *(
        Row(
            f"data-sample-{name}",
            lambda p, n=name: ["data", "sample", str(p[n]), "--per-category", "1"],
            codes=(0, 1, 2) if name == "template" else (1, 2),
        )
        for name in MANIFEST_INPUTS
    ),
    *(
        Row(
            f"data-sample-{what}",
            lambda p, a=argv: ["data", "sample", str(p["lockable"]), *a],
            codes=(2,),
        )
        for what, argv in (
            ("no-per-category", []),
            ("per-category-zero", ["--per-category", "0"]),
            ("per-category-word", ["--per-category", "two"]),
            ("seed-negative", ["--per-category", "1", "--seed", "-1"]),
            ("unknown-split", ["--per-category", "1", "--split", "nope"]),
        )
    ),
    Row(
        "data-sample-html-onto-manifest",
        lambda p: [
            "data",
            "sample",
            str(p["lockable"]),
            "--per-category",
            "1",
            "--html",
            str(p["lockable"]),
        ],
        codes=(2,),
    ),  # fmt: skip
    *(
        Row(
            f"data-sample-html-{where}",
            lambda p, w=where: [
                "data",
                "sample",
                str(p["lockable"]),
                "--per-category",
                "1",
                "--html",
                str(_out(p, w)),
            ],
            needs="frozen" if where.startswith("frozen") else None,
        )  # fmt: skip
        for where in OUTPUTS
    ),
]

ROWS = _manifest_rows() + _output_rows() + OTHER_ROWS


def _param(row: Row) -> object:
    marks = [pytest.mark.xfail(reason=row.xfail, strict=False)] if row.xfail else []
    return pytest.param(row, id=row.id, marks=marks)


def test_every_command_has_rows() -> None:
    covered = {r.argv(_FAKE)[0] for r in ROWS if r.argv(_FAKE)}
    assert set(COMMANDS) <= covered, set(COMMANDS) - covered


_FAKE: dict[str, Path] = {
    k: Path("/x")
    for k in [*INPUTS, "lockable", "frozen-dir", "frozen-file", "clean"]  # fmt: skip
}


def _chattr(flag: str, path: Path) -> bool:
    """Set or clear the immutable bit; False where chattr or the file system cannot."""
    if shutil.which("chattr") is None:  # e2fsprogs; .ci/run installs it
        return False
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


def _frozen(p: dict[str, Path], needs: str) -> bool:
    """Make the lock target unwritable; False when this machine cannot."""
    target = p["lockable"] if needs == "frozen-lock" else p["lockable"].parent
    if ROOT_USER:
        return _chattr("+i", target)
    target.chmod(0o555 if target.is_dir() else 0o444)
    return needs == "frozen-lock-dir"  # a non-root rename over a 0444 file still succeeds


@pytest.mark.parametrize("row", [_param(r) for r in ROWS])
def test_bad_input_is_never_an_internal_error(row: Row, bad: dict[str, Path]) -> None:
    undo = None
    if row.needs and row.needs.startswith("frozen-lock"):
        if not _frozen(bad, row.needs):
            pytest.skip("cannot make a file unwritable here")
        undo = bad["lockable"] if row.needs == "frozen-lock" else bad["lockable"].parent
    elif row.needs == "frozen" and ROOT_USER:
        probe = subprocess.run(["lsattr", "-d", str(bad["frozen-dir"])], capture_output=True)
        if b"i" not in probe.stdout.split(b" ")[0]:
            pytest.skip("chattr +i is not available here")
    try:
        result = run_cli_forked(*row.argv(bad), env=dict(row.env))
    finally:
        if undo is not None and ROOT_USER:
            _chattr("-i", undo)
        elif undo is not None:
            undo.chmod(0o755 if undo.is_dir() else 0o644)
    text = result.stdout + result.stderr
    assert result.returncode != 3, text
    assert "Traceback" not in text and "internal error" not in text, text
    assert result.returncode in row.codes, (result.returncode, text)
    if "hunter2" in " ".join(row.argv(bad)):
        assert "hunter2" not in text  # an abbreviated secret option is never echoed
