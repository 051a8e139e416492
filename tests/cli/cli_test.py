"""End-to-end: the real console entry point in a fresh interpreter."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from ftmanifest import __version__
from ftmanifest.cli import main
from tests.conftest import CLF, EXAMPLES, ROOT, run_cli


def test_lint_examples_exit_0() -> None:
    result = run_cli("lint", *map(str, EXAMPLES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""
    assert f"{len(EXAMPLES)} manifest(s) pinned" in result.stderr


def test_unpinned_revision_exits_1_naming_the_line(mutate) -> None:  # type: ignore[no-untyped-def]
    path = mutate("  revision: ", "  revision: main  # was: ")
    result = run_cli("lint", str(path))
    assert result.returncode == 1
    line_no = next(
        i for i, t in enumerate(path.read_text().splitlines(), 1) if "revision: main" in t
    )
    assert result.stdout.startswith(f"{path}:{line_no}:3: FTM001 model.revision:")
    assert "observed main" in result.stdout and "(fix: " in result.stdout


def test_unknown_field_exits_2_naming_it(mutate) -> None:  # type: ignore[no-untyped-def]
    path = mutate("  seq_len: 1024", "  seq_length: 1024")
    result = run_cli("lint", str(path))
    assert result.returncode == 2
    assert "training.seq_length: unknown field 'seq_length'" in result.stdout
    assert "did you mean 'seq_len'?" in result.stdout
    assert "Traceback" not in result.stderr


def test_lint_json_output(mutate) -> None:  # type: ignore[no-untyped-def]
    path = mutate("  grad_accum: 4\n", "")
    result = run_cli("lint", "--format", "json", str(path), str(CLF))
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["files"] == 2 and report["unusable"] == 0
    [finding] = report["findings"]
    assert finding["rule"] == "FTM060" and finding["field"] == "training.grad_accum"
    assert finding["path"] == str(path) and finding["line"] > 1


def test_lint_sarif_output(mutate) -> None:  # type: ignore[no-untyped-def]
    import jsonschema

    path = mutate("    records: 2000\n", "", source=CLF)
    result = run_cli("lint", "--format", "sarif", str(path))
    log = json.loads(result.stdout)
    schema = json.loads((ROOT / "tests" / "fixtures" / "sarif-2.1.0.json").read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(log)
    assert log["runs"][0]["results"][0]["ruleId"] == "FTM040"


def test_missing_file_exits_2(tmp_path: Path) -> None:
    result = run_cli("lint", str(tmp_path / "absent.yaml"))
    assert result.returncode == 2
    assert "manifest not found" in result.stdout


def test_schema_command_prints_the_committed_schema() -> None:
    result = run_cli("schema")
    assert result.returncode == 0
    assert result.stdout == (ROOT / "schema" / "ftmanifest.schema.json").read_text("utf-8")


def test_digest_ignores_comments_and_changes_with_values(tmp_path: Path) -> None:
    copy = tmp_path / "c.yaml"
    copy.write_text(CLF.read_text().replace("# every department", "# edited comment"))
    first = run_cli("digest", str(CLF)).stdout.split()[0]
    assert run_cli("digest", str(copy)).stdout.split()[0] == first
    copy.write_text(CLF.read_text().replace("data_order: 42", "data_order: 43"))
    assert run_cli("digest", str(copy)).stdout.split()[0] != first
    assert first.startswith("sha256:") and len(first) == 71


def test_init_template_is_valid_but_refused_by_lint(tmp_path: Path) -> None:
    path = tmp_path / "new-exp.yaml"
    assert run_cli("init", str(path)).returncode == 0
    result = run_cli("lint", str(path))
    assert result.returncode == 1, result.stdout
    rules = {line.split()[1] for line in result.stdout.splitlines()}
    assert {"FTM001", "FTM010", "FTM030", "FTM041", "FTM050", "FTM070"} <= rules
    assert "experiment:\n  id: new-exp" in path.read_text()
    again = run_cli("init", str(path))
    assert again.returncode == 2 and "not overwriting" in again.stderr


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"ftmanifest {__version__}"


def test_usage_error_exits_2() -> None:
    result = run_cli("lint")
    assert result.returncode == 2 and "usage:" in result.stderr


@pytest.mark.parametrize("command", [["lint"], ["digest"], ["scan"], ["signers"]])
def test_fast_commands_do_not_import_heavy_frameworks(command: list[str]) -> None:
    code = (
        "import sys\n"
        "from ftmanifest.cli import main\n"
        f"rc = main({command + [str(CLF)]!r})\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules)\n"
        "print('HEAVY', heavy)\n"
    )
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr


def test_lint_does_not_build_pydantic_models() -> None:
    code = (
        "import sys\n"
        "from ftmanifest.cli import main\n"
        f"main(['lint', {str(CLF)!r}])\n"
        "print('MODEL', 'ftmanifest.manifest.model' in sys.modules)\n"
    )
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "MODEL False" in out.stdout, out.stdout + out.stderr


# --- the command line ------------------------------------------------


def test_no_option_is_abbreviated_in_any_parser() -> None:
    from ftmanifest.cli import COMMANDS, build_parser

    parser = build_parser()
    subparsers = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(subparsers) == set(COMMANDS)
    assert parser.allow_abbrev is False
    assert all(p.allow_abbrev is False for p in subparsers.values())


def test_abbreviated_secret_option_is_refused_and_not_echoed(tmp_path: Path) -> None:
    for secret_option in (["--pass", "hunter2"], ["--passphrase=hunter2"]):
        result = run_cli("sign", str(CLF), "--key", str(tmp_path / "k"), *secret_option)
        assert result.returncode == 2, result.stderr
        assert "unrecognized arguments" in result.stderr
        assert "hunter2" not in result.stdout + result.stderr


def test_double_dash_ends_options_for_every_command_but_run(tmp_path: Path) -> None:
    odd = tmp_path / "-odd.yaml"
    odd.write_text("ftmanifest: 1\n")
    result = run_cli("lint", str(CLF), "--", str(tmp_path / "absent.yaml"))
    assert result.returncode == 2  # the file after `--` was linted
    assert "absent.yaml" in result.stdout and "manifest not found" in result.stdout
    result = run_cli("digest", "--", "-odd.yaml", cwd=tmp_path)
    assert result.returncode == 2 and "-odd.yaml" in result.stderr, result.stderr


def test_broken_pipe_exits_141_quietly() -> None:
    """A reader that went away (``| head -0``): the exit a SIGPIPE'd program
    reports (128+13), nothing on stderr."""
    import subprocess
    import sys

    for argv in (["schema"], ["lint", *map(str, EXAMPLES), "--format", "json"]):
        proc = subprocess.Popen(
            [sys.executable, "-m", "ftmanifest", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the read end is gone before the command writes
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 141, err
        assert "Traceback" not in err and "Exception ignored" not in err, err


def test_root_help_ends_with_exit_codes_and_examples() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    tail = result.stdout[result.stdout.index("exit codes:") :]
    for code in ("0 ", "1 ", "2 ", "3 ", "130", "141"):
        assert f"  {code}" in tail
    examples = tail[tail.index("examples:") :].splitlines()[1:]
    assert len([e for e in examples if e.strip().startswith("ftmanifest ")]) == 2


@pytest.mark.parametrize("command", ["init", "lint", "schema", "digest", "lock", "scan"])
def test_every_option_has_help_and_shows_its_default(command: str) -> None:
    import argparse

    from ftmanifest.cli import build_parser

    parser = build_parser(only=command)
    sub = parser._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{command} {action.dest} has no help"
        # SUPPRESS: no value unless given (-q after the command keeps one given before it)
        shown = action.default in (None, False, [], argparse.SUPPRESS) or isinstance(
            action.default, bool
        )
        if not shown:
            text = sub.format_help()
            assert "(default:" in text and str(action.default) in text, (command, action.dest)


def test_scan_says_so_when_nothing_was_found(tmp_path: Path) -> None:
    for name in ("a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text("nothing to see here\n")
    result = run_cli("scan", "--no-cache", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "3 file(s) scanned, nothing found" in result.stderr


def test_unknown_scan_engine_names_the_variable_and_choices(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    result = run_cli("scan", str(tmp_path), env={"FTMANIFEST_SCAN_ENGINE": "turbo"})
    assert result.returncode == 2, result.stderr
    assert "FTMANIFEST_SCAN_ENGINE" in result.stderr and "auto | hyperscan | re" in result.stderr


def test_write_failures_are_exit_2_with_the_path(tmp_path: Path) -> None:
    (tmp_path / "clean.txt").write_text("x\n")
    cases = [
        ["init", "/proc/self/new.yaml"],
        ["init", str(tmp_path)],
        ["schema", "--write", str(tmp_path / "no" / "such" / "s.json")],
        ["scan", str(tmp_path / "clean.txt"), "--write-baseline", "/proc/self/b.json"],
        ["scan", str(tmp_path / "clean.txt"), "--redact-to", "/proc/self/r"],
    ]
    for argv in cases:
        result = run_cli(*argv)
        assert result.returncode == 2, (argv, result.stderr)
        target = argv[-1]
        assert f"error: {target}" in result.stderr or "error: /proc/self/r/" in result.stderr
        assert "fix: " in result.stderr and "internal error" not in result.stderr


def test_init_on_a_folder_is_exit_2_with_a_fix(tmp_path: Path) -> None:
    result = run_cli("init", str(tmp_path), "--force")
    assert result.returncode == 2
    assert "is a directory" in result.stderr and f"ftmanifest init {tmp_path}/" in result.stderr


def test_init_template_says_lock_is_available(tmp_path: Path) -> None:
    from ftmanifest.cli.init import render_template

    text = render_template("x", "https://example.org/s.json", tmp_path / "x.yaml")
    assert "once available" not in text
    assert "`ftmanifest lock" in text


@pytest.mark.parametrize("sources", [(), ("--from", "args.json")])
def test_init_in_a_repositorys_subfolder_names_the_lock_file_its_note_makes(
    tmp_path: Path, sources: tuple[str, ...]
) -> None:
    """``init manifests/exp.yaml`` run from the repository's top: the note's ``pip freeze >
    PATH`` (from where the user stands) writes the very file ``environment.lock.path``
    names (relative to the manifest), so ``lock`` finds it."""
    repo = tmp_path / "repo"
    (repo / "manifests").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "args.json").write_text('{"learning_rate": 0.0002, "seed": 7}\n')
    done = run_cli("init", "manifests/exp.yaml", *sources, cwd=repo)
    assert done.returncode == 0, done.stderr
    text = (repo / "manifests" / "exp.yaml").read_text()
    made = re.search(r"pip freeze > (\S+)", text)
    assert made is not None and made.group(1) == "requirements.lock"  # from the top
    named = re.search(r"^\s+path: (\S+)", text.split("lock:", 1)[1], re.M)
    assert named is not None and named.group(1).strip('"') == "../requirements.lock"
    (repo / made.group(1)).write_text("torch==2.13.0\n")
    assert (repo / "manifests" / named.group(1).strip('"')).resolve() == (
        repo / made.group(1)
    ).resolve()


def test_lock_on_the_template_names_the_manifest_and_the_hf_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = tmp_path / "exp.yaml"
    assert run_cli("init", str(manifest)).returncode == 0
    env = {"HF_HUB_CACHE": str(tmp_path / "empty-cache"), "HF_HUB_OFFLINE": "1"}
    result = run_cli("lock", str(manifest), env=env)
    assert result.returncode == 2, result.stderr
    err = result.stderr
    assert f"error: {manifest}:" in err  # the manifest and the line of model.revision
    assert "error: " in err and "revision main of" not in err
    assert "model.revision is empty" in err
    assert "hf download org/model-name --revision main" in err
    observed = next(line for line in err.splitlines() if "observed:" in line)
    assert observed.rstrip().endswith((".", "…")), observed  # never cut mid-word


def test_lock_keeps_null_and_drops_the_fill_notes_it_filled(tmp_path: Path) -> None:
    from ftmanifest.verify.lock import lock_manifest

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    (tmp_path / "train.jsonl").write_text('{"text": "a"}\n')
    manifest = tmp_path / "exp.yaml"
    manifest.write_text(
        "ftmanifest: 1\n"
        "experiment:\n"
        "  id: x\n"
        "  parent: null            # id of the parent experiment\n"
        "model:\n"
        "  path: model\n"
        "  files: []               # FILL: every file with its sha256 digest\n"
        "  tree_digest: null\n"
        "environment:\n"
        "  python: null            # FILL: e.g. 3.11.7\n"
        "  lock: null              # FILL: {path: requirements.lock}\n"
        "data:\n"
        "  - {name: train, role: train, path: train.jsonl, license: t}\n"
    )
    lock_manifest(manifest)
    text = manifest.read_text()
    assert "  parent: null            # id of the parent experiment\n" in text
    assert "FILL: every file" not in text and "FILL: e.g." not in text
    assert "  lock: null              # FILL: {path: requirements.lock}\n" in text  # not filled


def test_every_option_of_every_subcommand_has_help() -> None:
    import argparse

    from ftmanifest.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [
        f"{name} {a.option_strings or a.dest}"
        for name, sp in sub.choices.items()
        for a in sp._actions
        if not isinstance(a, argparse._HelpAction) and not a.help
    ]
    assert missing == []
