"""Trust-file parsing: the same verdict as OpenSSH on the same file.

A differential test: each line of a table goes into an allowed_signers file,
then the real ``ssh-keygen -Y verify`` (namespace ``ftmanifest``, principal
alice@example.org) and ftmanifest judge a signature by the same key.  Times
near year 9999 and local times are parsed in subprocesses under several TZ
values.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ftmanifest.signing import errors as E
from ftmanifest.signing._sshtime import FAR_FUTURE, parse_ssh_time
from ftmanifest.signing.trust import parse_trust

SSH_KEYGEN = shutil.which("ssh-keygen")
needs_ssh = pytest.mark.skipif(
    SSH_KEYGEN is None,
    reason="ssh-keygen (package openssh-client) is not installed: differential test skipped",
)
PRINCIPAL = "alice@example.org"
NS = 'namespaces="ftmanifest"'

# (line template, where KEY is the public key; whether ftmanifest deliberately differs)
TABLE: list[tuple[str, bool]] = [
    (f"{PRINCIPAL} {NS} KEY", False),
    (f"{PRINCIPAL} {NS} KEY laptop key", False),
    (f'{PRINCIPAL} {NS} KEY comment with a " quote', False),
    (f'"{PRINCIPAL},bob@x" {NS} KEY', False),
    (f'"bob smith@x,{PRINCIPAL}" {NS} KEY', False),
    (f"alice@* {NS} KEY", False),
    (f"alice@[e]xample.org {NS} KEY", False),  # '[' is literal in ssh patterns
    (f"alice@?xample.org {NS} KEY", False),
    (f"*,!{PRINCIPAL} {NS} KEY", False),
    (f"bob@x {NS} KEY", False),
    (f'{PRINCIPAL} NAMESPACES="ftmanifest" KEY', False),
    (f'{PRINCIPAL} namespaces="git" KEY', False),
    (f'{PRINCIPAL} namespaces="ft*" KEY', False),
    (f'{PRINCIPAL} namespaces="*,!ftmanifest" KEY', False),
    (f'{PRINCIPAL} namespaces="git,ftmanifest" KEY', False),
    (f"{PRINCIPAL} namespaces=ftmanifest KEY", False),  # unquoted: ssh rejects
    (f'{PRINCIPAL} namespaces="ftmanifest",namespaces="ftmanifest" KEY', False),
    (f'{PRINCIPAL} namespaces="git",namespaces="ftmanifest" KEY', False),
    (f'{PRINCIPAL} namespaces="ftmanifest", KEY', False),
    (f"{PRINCIPAL} ,{NS} KEY", False),  # an empty option is allowed by ssh
    (f'{PRINCIPAL} {NS},,valid-after="20200101Z" KEY', False),
    (f'{PRINCIPAL} namespaces="ftmanifest" valid-after="20200101" KEY', False),
    (f'{PRINCIPAL} namespaces="ftm\\"anifest" KEY', False),
    (f'{PRINCIPAL} {NS},valid-after="20200101Z" KEY', False),
    (f'{PRINCIPAL} {NS},valid-after="20200101utc" KEY', False),
    (f'{PRINCIPAL} {NS},valid-after="202001011200" KEY', False),
    (f'{PRINCIPAL} {NS},valid-after="20200101120000z" KEY', False),
    (f'{PRINCIPAL} {NS},valid-before="20200101" KEY', False),
    (f'{PRINCIPAL} {NS},valid-before="99991231235959" KEY', False),
    (f'{PRINCIPAL} {NS},valid-before="99991231235959Z" KEY', False),
    (f'{PRINCIPAL} {NS},valid-after="29990101" KEY', False),
    (f'{PRINCIPAL} {NS},valid-after="20300101",valid-before="20200101" KEY', False),
    (f'{PRINCIPAL} {NS},valid-after="2020" KEY', False),
    (f'{PRINCIPAL} {NS},valid-after="20201301" KEY', False),
    (f"{PRINCIPAL} {NS},valid-after=20200101 KEY", False),
    (f'{PRINCIPAL} {NS},valid-after="19700101Z" KEY', False),
    (f'{PRINCIPAL} {NS},valid-after="19600101Z" KEY', False),
    (f'{PRINCIPAL} {NS},valid-after="20200101",valid-after="20200102" KEY', False),
    (f'{PRINCIPAL} {NS},bogus="1" KEY', False),
    (f"{PRINCIPAL} cert-authority,{NS} KEY", False),
    (f"{PRINCIPAL} KEY", True),  # no namespaces: ssh allows all, ftmanifest refuses
]


@pytest.fixture(scope="module")
def ssh_world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A real ssh key and a message signed with it for namespace ftmanifest."""
    assert SSH_KEYGEN is not None
    folder = tmp_path_factory.mktemp("ssh")
    key = folder / "id"
    subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(key)],
        check=True,
        timeout=30,
    )
    (folder / "msg").write_bytes(b"hello\n")
    subprocess.run(
        [SSH_KEYGEN, "-q", "-Y", "sign", "-n", "ftmanifest", "-f", str(key), str(folder / "msg")],
        check=True,
        timeout=30,
        capture_output=True,
    )
    pub = " ".join((folder / "id.pub").read_text().split()[:2])
    return folder, pub


def ssh_accepts(folder: Path, text: str) -> bool:
    assert SSH_KEYGEN is not None
    allowed = folder / "allowed_signers"
    allowed.write_text(text)
    with (folder / "msg").open("rb") as message:
        proc = subprocess.run(
            [
                SSH_KEYGEN,
                "-Y",
                "verify",
                "-f",
                str(allowed),
                "-I",
                PRINCIPAL,
                "-n",
                "ftmanifest",
                "-s",
                str(folder / "msg.sig"),
            ],
            stdin=message,
            capture_output=True,
            timeout=30,
            check=False,
        )
    return proc.returncode == 0


def ours_accepts(text: str) -> bool:
    try:
        store = parse_trust(text, Path("allowed_signers"))
    except E.MalformedTrustFileError:
        return False
    now = datetime.now(timezone.utc)
    return any(k.matches_principal(PRINCIPAL) and k.status(now) == "valid" for k in store.keys)


@needs_ssh
@pytest.mark.parametrize(("template", "differs"), TABLE, ids=[t for t, _ in TABLE])
def test_same_verdict_as_ssh_keygen(ssh_world, template: str, differs: bool) -> None:
    folder, pub = ssh_world
    text = template.replace("KEY", pub) + "\n"
    ssh, ours = ssh_accepts(folder, text), ours_accepts(text)
    if differs:
        assert ssh and not ours
    else:
        assert ours == ssh, f"ssh-keygen {'accepts' if ssh else 'refuses'} {template!r}"


_OPTION = st.sampled_from(
    [
        NS,
        'namespaces="git"',
        "namespaces=ftmanifest",
        'valid-after="20200101"',
        'valid-before="20200101Z"',
        'valid-before="99991231"',
        'valid-after="2020010112"',
        "cert-authority",
        'NAMESPACES="ft*"',
        'namespaces="a\\"b"',
        '"',
        "",
    ]
)
_PRINCIPALS = st.sampled_from(
    [PRINCIPAL, f'"{PRINCIPAL}"', "alice@*", "*,!alice@*", '"a b,alice@example.org"', "x[a]"]
)


@needs_ssh
@settings(
    max_examples=int(os.environ.get("FTM_SSH_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    principals=_PRINCIPALS,
    options=st.lists(_OPTION, min_size=1, max_size=3),
    comment=st.sampled_from(["", ' x"y', " #c", ' "']),
)
def test_hypothesis_lines_match_ssh_keygen(ssh_world, principals, options, comment) -> None:
    folder, pub = ssh_world
    opts = ",".join(options)
    if NS not in options and "NAMESPACES" not in opts and "namespaces=" not in opts:
        opts = f"{NS},{opts}" if opts else NS  # lines without namespaces differ on purpose
    text = f"{principals} {opts} {pub}{comment}\n"
    assert ours_accepts(text) == ssh_accepts(folder, text), text


# --- validity dates under several time zones, in subprocesses -----------------

ZONES = ["UTC", "America/Los_Angeles", "Pacific/Kiritimati", "Etc/GMT+12", "Asia/Kolkata"]
_SCRIPT = """
import sys
from pathlib import Path
from datetime import datetime, timezone
from ftmanifest.signing.trust import parse_trust
key = sys.argv[1]
for when in ("99991231235959", "99991231", "99991231235959Z", "20250101", "20250101Z"):
    (k,) = parse_trust(f'a@x namespaces="ftmanifest",valid-before="{when}" {key}', Path("s")).keys
    print(when, k.valid_before, k.status(datetime(2024, 6, 1, tzinfo=timezone.utc)))
"""


@pytest.mark.parametrize("zone", ZONES)
def test_far_future_and_local_dates_never_crash(zone: str) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from signing_helpers import trust_line

    key = " ".join(trust_line(Ed25519PrivateKey.generate(), options="").split()[1:3])
    env = {**os.environ, "TZ": zone}
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, key], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    rows = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert rows["99991231235959Z"] == f"{FAR_FUTURE} valid"
    assert rows["99991231235959"].endswith(" valid") and rows["99991231"].endswith(" valid")
    assert int(rows["99991231235959"].split()[0]) <= FAR_FUTURE
    assert rows["20250101Z"] == "1735689600 valid"
    offset = int(rows["20250101"].split()[0]) - 1735689600  # local midnight vs UTC midnight
    assert abs(offset) <= 14 * 3600


def test_time_forms() -> None:
    assert parse_ssh_time("20250101Z") == parse_ssh_time("20250101UTC") == 1735689600
    assert parse_ssh_time("202501010130z") == 1735689600 + 5400
    for bad in ("2025", "2025010", "20250101T", "2025-1-01", "19691231Z", "２０２５０１０１"):
        with pytest.raises(ValueError):
            parse_ssh_time(bad)
