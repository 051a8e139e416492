"""Golden files for the JSON each command prints, so a change of shape is a visible diff.

Every subcommand with JSON output (``lint``, ``scan``, ``digest``, ``sign``,
``signers``, ``verify``, ``run``; ``schema`` prints JSON always) runs
in-process on a fixed case - a passing one and a refusing one where the
command has both - and its parsed output is compared with
``tests/golden/<command>-<case>.json``.

The comparison serialises both documents with ``json.dumps(indent=2)``
*without* sorting keys and diffs the text: a renamed, added, removed or
reordered field fails with a unified diff.  Only what legitimately varies
between runs and machines is normalised, and always by replacing a *value*
with a ``<PLACEHOLDER>``, never by dropping a key, so the shape stays checked:

- the test's tmp folder -> ``<TMP>`` (inside any string);
- the git commit of the project the test builds (its date is part of it) ->
  ``<COMMIT>``;
- the manifest digest in ``verify``/``run`` reports (key ``digest``, also
  under ``signature``) on a project locked in the test: the lock pins this
  machine's Python, packages, OS and CPU and the commit -> ``<DIGEST>``;
  drift rows keep their data digests, which depend on fixed content only;
- this ftmanifest's own version (SARIF's tool version, bumped by releases)
  -> ``<VERSION>``;
- in those reports, this machine's Python version and platform string, should
  they ever show (``<PYTHON>``, ``<PLATFORM>``);
- timestamps and durations (``started_at``, ``elapsed``, ...: ``VOLATILE_KEYS``).

Exit codes are asserted in each test; the golden file is the stdout alone.

Regenerate after a deliberate change of output, and say why in the commit::

    FTMANIFEST_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/golden_test.py

Without that variable a mismatch (or a missing golden file) fails.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ftmanifest import __version__
from ftmanifest.cli import main
from tests.conftest import CLF, EXTRACT, ROOT

GOLDEN = Path(__file__).with_name("golden")
UPDATE = os.environ.get("FTMANIFEST_UPDATE_GOLDEN", "") not in ("", "0")

# A fixed Ed25519 key: signatures are deterministic (RFC 8032), so are key ids.
KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OTHER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32, 64)))
GHP = "ghp_SulEETldq8b8Vw2zbJYAxyL1aCcTlN99mhWp"  # a well-formed, fake GitHub token
CLF_REL = str(CLF.relative_to(ROOT))
EXTRACT_REL = str(EXTRACT.relative_to(ROOT))
INVALID_REL = "tests/fixtures/manifests/invalid/missing-experiment-id.yaml"

# Keys whose values differ between runs or machines by nature: replaced, kept.
VOLATILE_KEYS = frozenset(
    {
        "started_at",
        "finished_at",
        "timestamp",
        "time",
        "duration",
        "duration_s",
        "elapsed",
        "elapsed_s",
        "seconds",
    }
)


@pytest.fixture(autouse=True)
def _fixed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings a developer or CI may have exported must not change the output."""
    for name in (
        "FTMANIFEST_TRUST_FILE",
        "FTMANIFEST_PHONE_REGIONS",
        "FTMANIFEST_SCAN_ENGINE",
        "FTMANIFEST_DEBUG",
        "FTMANIFEST_GRACE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "100")


# --- running and comparing -------------------------------------------------------


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    """Run ``ftmanifest ARGS`` in-process; its exit code and parsed stdout."""
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr().out
    try:
        return code, json.loads(out)
    except json.JSONDecodeError:
        pytest.fail(f"ftmanifest {' '.join(args)} (exit {code}) printed no JSON:\n{out}")


class Normaliser:
    """Replaces what legitimately varies; keeps every key and list item.

    ``values`` (name -> this run's value) are replaced inside any string by
    ``<NAME>``, as whole tokens only (``3.11.7`` is not replaced in ``3.11.70``).
    """

    def __init__(self, tmp_path: Path, **values: str) -> None:
        subs = {str(tmp_path): "<TMP>", str(tmp_path.resolve()): "<TMP>"}
        subs.update({v: f"<{k.upper()}>" for k, v in values.items() if v})
        # longest first: a resolved tmp path may contain the unresolved one
        self.subs = [
            (re.compile(rf"(?<![\w.]){re.escape(old)}(?!\w)"), new)
            for old, new in sorted(subs.items(), key=lambda kv: -len(kv[0]))
        ]
        self.keys: dict[str, str] = {k: f"<{k.upper()}>" for k in VOLATILE_KEYS}

    def with_key(self, key: str, placeholder: str) -> Normaliser:
        """Also replace the value of every ``key`` (not null) with ``placeholder``."""
        self.keys[key] = placeholder
        return self

    def __call__(self, doc: Any) -> Any:
        if isinstance(doc, dict):
            return {
                k: (self.keys[k] if k in self.keys and v is not None else self(v))
                for k, v in doc.items()
            }
        if isinstance(doc, list):
            return [self(v) for v in doc]
        if isinstance(doc, str):
            if doc == __version__:  # the tool's own version (SARIF), bumped by releases
                return "<VERSION>"
            for pattern, new in self.subs:
                doc = pattern.sub(new, doc)
            return doc
        return doc


def dump(doc: Any) -> str:
    """The compared form: key order kept, so a reordered field is a diff too."""
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def golden_diff(name: str, doc: Any, golden: Any) -> str:
    """A unified diff from ``golden`` to ``doc``; empty when they are the same."""
    return "".join(
        difflib.unified_diff(
            dump(golden).splitlines(keepends=True),
            dump(doc).splitlines(keepends=True),
            fromfile=f"tests/golden/{name}.json (golden)",
            tofile=f"{name} (this run)",
        )
    )


def check(name: str, doc: Any) -> None:
    """Compare ``doc`` with ``tests/golden/<name>.json`` (or rewrite it when updating)."""
    path = GOLDEN / f"{name}.json"
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(dump(doc), encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"{path} is missing; create it with FTMANIFEST_UPDATE_GOLDEN=1")
    diff = golden_diff(name, doc, json.loads(path.read_text(encoding="utf-8")))
    if diff:
        pytest.fail(
            f"the JSON of {name} changed (FTMANIFEST_UPDATE_GOLDEN=1 to accept):\n{diff}",
            pytrace=False,
        )


# --- helpers for the cases ------------------------------------------------------------


def head_commit(repo: Path) -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


def project_normaliser(tmp_path: Path, manifest: Path) -> Normaliser:
    """For reports on a project locked here: its commit and its digest vary."""
    return Normaliser(
        tmp_path,
        commit=head_commit(manifest.parent),
        python=platform.python_version(),
        platform=platform.platform(),
    ).with_key("digest", "<DIGEST>")


def write_key(folder: Path, key: Ed25519PrivateKey = KEY, name: str = "id_ed25519") -> Path:
    path = folder / name
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    return path


def write_trust(folder: Path, key: Ed25519PrivateKey = KEY) -> Path:
    from ftmanifest.signing.keys import public_key_line

    path = folder / "allowed_signers"
    line = public_key_line(key.public_key(), "test key")
    path.write_text(f'alice@example.org namespaces="ftmanifest" {line}\n', encoding="utf-8")
    return path


def drift(project: Path) -> None:
    """Change one training file after the lock: one drift row."""
    data = project.parent / "data" / "eval.jsonl"
    data.write_text('{"text": "e", "label": "billing"}\n')


# --- lint ----------------------------------------------------------------------


@pytest.fixture
def in_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Relative paths into the repository: the same on every machine."""
    monkeypatch.chdir(ROOT)


@pytest.fixture
def unpinned(mutate: Callable[..., Path]) -> Path:
    """The docroute example with its model revision unpinned (one lint problem)."""
    text = CLF.read_text("utf-8")
    revision = re.search(r"^  revision: \S+", text, re.M)
    assert revision is not None
    return mutate(revision.group(0), "  revision: main")


@pytest.mark.usefixtures("in_root")
def test_lint_pass(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, doc = cli_json(capsys, "lint", "--format", "json", CLF_REL, EXTRACT_REL)
    assert code == 0
    check("lint-pass", Normaliser(tmp_path)(doc))


def test_lint_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, unpinned: Path) -> None:
    code, doc = cli_json(capsys, "lint", "--format", "json", str(unpinned))
    assert code == 1
    check("lint-refused", Normaliser(tmp_path)(doc))


@pytest.mark.usefixtures("in_root")
def test_lint_unusable(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, doc = cli_json(capsys, "lint", "--format", "json", INVALID_REL, "no-such.yaml")
    assert code == 2
    check("lint-unusable", Normaliser(tmp_path)(doc))


def test_lint_sarif_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, unpinned: Path
) -> None:
    code, doc = cli_json(capsys, "lint", "--format", "sarif", str(unpinned))
    assert code == 1
    check("lint-sarif-refused", Normaliser(tmp_path)(doc))


# --- digest and schema --------------------------------------------------------------


@pytest.mark.usefixtures("in_root")
def test_digest_pass(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, doc = cli_json(capsys, "digest", "--format", "json", CLF_REL, EXTRACT_REL)
    assert code == 0
    check("digest-pass", Normaliser(tmp_path)(doc))


@pytest.mark.usefixtures("in_root")
def test_digest_unusable(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, doc = cli_json(capsys, "digest", "--format", "json", INVALID_REL)
    assert code == 2
    check("digest-unusable", Normaliser(tmp_path)(doc))


def test_schema(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, doc = cli_json(capsys, "schema")
    assert code == 0
    check("schema-default", Normaliser(tmp_path)(doc))


# --- scan ------------------------------------------------------------------------


@pytest.fixture
def scan_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "clean.jsonl").write_text('{"text": "nothing to see"}\n')
    return folder


def test_scan_clean(capsys: pytest.CaptureFixture[str], tmp_path: Path, scan_folder: Path) -> None:
    code, doc = cli_json(capsys, "scan", "--format", "json", "--jobs", "1", str(scan_folder))
    assert code == 0
    check("scan-clean", Normaliser(tmp_path)(doc))


@pytest.mark.parametrize(
    ("fmt", "name"), [("json", "scan-findings"), ("sarif", "scan-sarif-findings")]
)
def test_scan_findings(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, scan_folder: Path, fmt: str, name: str
) -> None:
    (scan_folder / "leak.jsonl").write_text(
        f'{{"text": "token {GHP}"}}\n{{"text": "mail jane.doe@example.com"}}\n'
    )
    (scan_folder / "blob.dat").write_bytes(bytes(range(256)))
    code, doc = cli_json(capsys, "scan", "--format", fmt, "--jobs", "1", str(scan_folder))
    assert code == 1
    check(name, Normaliser(tmp_path)(doc))


def test_scan_unusable(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, doc = cli_json(capsys, "scan", "--format", "json", "--phone-regions", "XX", str(tmp_path))
    assert code == 2
    check("scan-unusable", Normaliser(tmp_path)(doc))


# --- verify and run ------------------------------------------------------------------


def test_verify_pass(capsys: pytest.CaptureFixture[str], tmp_path: Path, project: Path) -> None:
    code, doc = cli_json(capsys, "verify", "--format", "json", "--no-signature", str(project))
    assert code == 0
    check("verify-pass", project_normaliser(tmp_path, project)(doc))


def test_verify_drift(capsys: pytest.CaptureFixture[str], tmp_path: Path, project: Path) -> None:
    drift(project)
    code, doc = cli_json(capsys, "verify", "--format", "json", "--no-signature", str(project))
    assert code == 1
    check("verify-drift", project_normaliser(tmp_path, project)(doc))


def test_verify_accepted(capsys: pytest.CaptureFixture[str], tmp_path: Path, project: Path) -> None:
    drift(project)
    code, doc = cli_json(
        capsys,
        "verify",
        "--format",
        "json",
        "--no-signature",
        str(project),
        "--accept",
        "data[1].digest",
        "--reason",
        "relabelled on purpose",
    )
    assert code == 0
    check("verify-accepted", project_normaliser(tmp_path, project)(doc))


def test_verify_signed(capsys: pytest.CaptureFixture[str], tmp_path: Path, project: Path) -> None:
    key = write_key(tmp_path)
    trust = write_trust(tmp_path)
    assert cli_json(capsys, "sign", "--format", "json", str(project), "--key", str(key))[0] == 0
    args = ("verify", "--format", "json", "--trust", str(trust), str(project))
    code, doc = cli_json(capsys, *args)
    assert code == 0
    check("verify-signed", project_normaliser(tmp_path, project)(doc))


def test_verify_unusable(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    code, doc = cli_json(capsys, "verify", "--format", "json", "--no-signature", str(missing))
    assert code == 2
    check("verify-unusable", Normaliser(tmp_path)(doc))


def test_verify_hub(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, hub: tuple[Path, dict[str, str]]
) -> None:
    manifest, commits = hub
    assert main(["lock", str(manifest)]) == 0
    code, doc = cli_json(capsys, "verify", "--format", "json", "--no-signature", str(manifest))
    assert code == 0
    normalise = Normaliser(tmp_path, python=platform.python_version(), platform=platform.platform())
    check("verify-hub-pass", normalise.with_key("digest", "<DIGEST>")(doc))


# a Python command: run probes its interpreter (a bare `true` is refused unless --guarded)
PASS_CMD = (sys.executable, "-c", "pass")


def test_run_pass(capsys: pytest.CaptureFixture[str], tmp_path: Path, project: Path) -> None:
    args = ("run", "--format", "json", "--no-signature", str(project), "--", *PASS_CMD)
    code, doc = cli_json(capsys, *args)
    assert code == 0
    check("run-pass", project_normaliser(tmp_path, project)(doc))


def test_run_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, project: Path) -> None:
    drift(project)
    args = ("run", "--format", "json", "--no-signature", str(project), "--", "true")
    code, doc = cli_json(capsys, *args)
    assert code == 1
    check("run-refused", project_normaliser(tmp_path, project)(doc))


# --- sign and signers ----------------------------------------------------------------


@pytest.fixture
def manifest_copy(tmp_path: Path) -> Path:
    """The docroute example, unchanged, where its envelope may be written."""
    path = tmp_path / "exp.yaml"
    path.write_text(CLF.read_text("utf-8"), "utf-8")
    return path


def test_sign_created_then_appended(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, manifest_copy: Path
) -> None:
    key = write_key(tmp_path)
    other = write_key(tmp_path, OTHER_KEY, "other")
    code, doc = cli_json(capsys, "sign", "--format", "json", str(manifest_copy), "--key", str(key))
    assert code == 0
    check("sign-created", Normaliser(tmp_path)(doc))
    code, doc = cli_json(
        capsys, "sign", "--format", "json", str(manifest_copy), "--key", str(other)
    )
    assert code == 0
    check("sign-appended", Normaliser(tmp_path)(doc))


def test_sign_unusable(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, manifest_copy: Path
) -> None:
    missing = tmp_path / "no-such-key"
    code, doc = cli_json(
        capsys, "sign", "--format", "json", str(manifest_copy), "--key", str(missing)
    )
    assert code == 2
    check("sign-unusable", Normaliser(tmp_path)(doc))


def test_signers_trusted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, manifest_copy: Path
) -> None:
    key = write_key(tmp_path)
    trust = write_trust(tmp_path)
    assert (
        cli_json(capsys, "sign", "--format", "json", str(manifest_copy), "--key", str(key))[0] == 0
    )
    args = ("signers", "--format", "json", "--trust", str(trust), str(manifest_copy))
    code, doc = cli_json(capsys, *args)
    assert code == 0
    check("signers-trusted", Normaliser(tmp_path)(doc))


def test_signers_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, manifest_copy: Path
) -> None:
    key = write_key(tmp_path, OTHER_KEY)
    trust = write_trust(tmp_path)  # trusts KEY, not the key that signed
    assert (
        cli_json(capsys, "sign", "--format", "json", str(manifest_copy), "--key", str(key))[0] == 0
    )
    args = ("signers", "--format", "json", "--trust", str(trust), str(manifest_copy))
    code, doc = cli_json(capsys, *args)
    assert code == 1
    check("signers-refused", Normaliser(tmp_path)(doc))


# --- the comparison itself ---------------------------------------------------------------


def test_every_golden_file_has_a_test() -> None:
    """A golden file no test writes is stale, not a check."""
    names = {p.stem for p in GOLDEN.glob("*.json")}
    source = Path(__file__).read_text("utf-8")
    unused = {n for n in names if f'"{n}"' not in source}
    assert not unused, unused


def test_a_changed_value_fails_with_a_diff() -> None:
    golden = json.loads((GOLDEN / "lint-refused.json").read_text("utf-8"))
    mutated = copy.deepcopy(golden)
    mutated["findings"][0]["severity"] = "warning"
    diff = golden_diff("lint-refused", mutated, golden)
    assert '-      "severity": "error",' in diff
    assert '+      "severity": "warning",' in diff
    assert golden_diff("lint-refused", copy.deepcopy(golden), golden) == ""


def test_a_reordered_added_or_dropped_key_fails() -> None:
    golden = json.loads((GOLDEN / "verify-drift.json").read_text("utf-8"))
    reordered = dict(reversed(list(golden.items())))
    assert reordered == golden  # equal as dicts: only the order differs
    assert golden_diff("verify-drift", reordered, golden)
    assert golden_diff("verify-drift", {**golden, "new": 1}, golden)
    dropped = {k: v for k, v in golden.items() if k != "warnings"}
    assert '-  "warnings": [' in golden_diff("verify-drift", dropped, golden)


def test_check_fails_on_a_mutated_golden_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``check`` itself: a golden file edited by hand is detected, with a diff."""
    monkeypatch.setattr(f"{__name__}.UPDATE", False)
    monkeypatch.setattr(f"{__name__}.GOLDEN", tmp_path)
    doc = {"files": 1, "unusable": 0, "findings": []}
    (tmp_path / "x-case.json").write_text(dump({"files": 1, "findings": [], "unusable": 0}))
    with pytest.raises(pytest.fail.Exception, match=r'(?s)-  "findings": \[\],.*\+  "unusable": 0'):
        check("x-case", doc)
    (tmp_path / "x-case.json").write_text(dump(doc))
    check("x-case", doc)
    with pytest.raises(pytest.fail.Exception, match="missing"):
        check("y-case", doc)


def test_normalising_keeps_every_key(tmp_path: Path) -> None:
    doc = {
        "path": f"{tmp_path}/exp.yaml",
        "started_at": "2026-01-01T00:00:00Z",
        "version": __version__,
        "nested": [{"elapsed": 1.5, "finished_at": None}],
    }
    assert Normaliser(tmp_path)(doc) == {
        "path": "<TMP>/exp.yaml",
        "started_at": "<STARTED_AT>",
        "version": "<VERSION>",
        "nested": [{"elapsed": "<ELAPSED>", "finished_at": None}],
    }


def test_no_machine_specific_value_in_the_goldens() -> None:
    """No user, host, home, tmp folder, checkout or Python version of this machine."""
    import getpass
    import socket
    import tempfile

    text = "\n".join(p.read_text("utf-8") for p in sorted(GOLDEN.glob("*.json")))
    user = re.escape(getpass.getuser())
    patterns = {
        "user": rf"/{user}(/|\b)|\b{user}@|pytest-of-{user}",
        "host": rf"\b{re.escape(socket.gethostname())}\b(?![\"_-])",
        "home": re.escape(str(Path.home())) + r"/",
        "tmp": re.escape(tempfile.gettempdir().rstrip("/")) + r"/",
        "checkout": re.escape(str(ROOT)),
        "python": rf"(?<![\d.]){re.escape(platform.python_version())}(?![\d.])",
        "platform": re.escape(platform.platform()),
    }
    found = {k: m.group(0) for k, p in patterns.items() if (m := re.search(p, text))}
    assert not found, f"machine-specific values in tests/golden: {found}"
