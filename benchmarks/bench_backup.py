"""Benchmark ``ftmanifest backup`` / ``restore`` against ``tar | age`` and pyrage alone.

  .venv/bin/python benchmarks/bench_backup.py [--size-mib 1024] [--repeat 1] [--keep]

Generates a folder of ``--size-mib`` MiB (default 1 GiB): one file of
``os.urandom`` bytes (256 MiB, or a quarter of the size when smaller), three
large files cut from a repeated random 1 MiB block (age does not compress, so
this costs nothing in realism and keeps generation fast) and 1,000 small
files (0.5-32 KiB) in ten folders.  It then times, in one run, each tool as a
separate process (peak RSS of that process alone, from ``/usr/bin/time`` when
present, else from ``os.wait4`` in a small launcher), in rounds: each round
runs every tool once, ours and the references in turn, so load from
elsewhere falls on all of them alike; per tool the best of ``--repeat``
rounds counts:

1. ``ftmanifest backup create`` (the walk builds the signed index from stat
   alone; each file is read once, hashed while it is archived; its digests
   follow the files, signed through the metadata);
2. the reference ``tar -cf - DIR | age -r RECIPIENT > OUT.age`` when ``age``
   is installed, and always ``tar -cf - DIR | python -c pyrage.encrypt_io``;
3. ``ftmanifest restore`` of that backup (the signed age header checked, age
   authenticating the rest, each file's sha256 against the signed digests,
   every file fsynced) vs ``age -d | tar -xf -`` and
   ``python -c pyrage.decrypt_io | tar -xf -``.

Throughput is plaintext bytes (the folder's file sizes) per wall-clock second,
in MB/s (10^6 bytes).  ftmanifest fsyncs the archive (backup) and every
restored file (restore) before it says done; the references fsync nothing, so
the ratio includes that wait.  Targets: ftmanifest >= 0.8 of the reference
(``age`` when installed, else pyrage alone), peak RSS < 200 MB.  The page
cache cannot be dropped without root, so the data is read once before the
runs and every tool sees a warm cache.  Everything lives in a temporary
folder (private stat cache and trust file there), deleted unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _report import installed_env, print_table  # noqa: E402

MiB = 1 << 20
MB = 1_000_000
BIN = Path(sys.executable).parent
FTM = str(BIN / "ftmanifest") if (BIN / "ftmanifest").exists() else None
GNU_TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None

# Runs argv[2:], writes the child's own peak RSS (KiB) to argv[1]: wait4 reports
# the rusage of that child (and of what it waited for), not of this launcher.
_LAUNCHER = """
import os, sys
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
open(sys.argv[1], "w").write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""

ENCRYPT = """
import sys, pyrage
r = pyrage.x25519.Recipient.from_str(sys.argv[2])
with open(sys.argv[1], "wb") as out:
    pyrage.encrypt_io(sys.stdin.buffer, out, [r])
"""

DECRYPT = """
import sys, pyrage
line = [s for s in open(sys.argv[2]).read().split() if s.startswith("AGE-SECRET-KEY-")][0]
with open(sys.argv[1], "rb") as src:
    pyrage.decrypt_io(src, sys.stdout.buffer, [pyrage.x25519.Identity.from_str(line)])
sys.stdout.buffer.flush()
"""


def q(s: str | Path) -> str:
    return "'" + str(s).replace("'", "'\\''") + "'"


def measured(argv: list[str], rss_file: Path) -> str:
    """A shell word list that runs ``argv`` and writes its peak RSS (KiB) to ``rss_file``."""
    if GNU_TIME:
        pre = [GNU_TIME, "-f", "%M", "-o", str(rss_file)]
    else:
        pre = [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(rss_file)]
    return " ".join(q(a) for a in pre + argv)


def run(cmd: str, cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    """Run a shell command line; (wall seconds, stdout)."""
    t = time.perf_counter()
    p = subprocess.run(["sh", "-c", "set -e; " + cmd], cwd=cwd, env=env,
                       capture_output=True, text=True)  # fmt: skip
    wall = time.perf_counter() - t
    if p.returncode:
        raise SystemExit(f"failed ({p.returncode}): {cmd}\n{p.stderr[-2000:]}")
    return wall, p.stdout


Tool = str | Callable[[], None]  # a shell line, or a function that runs one


def rounds(
    tools: dict[str, Tool],
    repeat: int,
    cwd: Path,
    env: dict[str, str],
    rss: Path,
    before: dict[str, Tool] | None = None,
) -> dict[str, tuple[float, float]]:
    """Run each tool once per round, in turn (its ``before`` line untimed
    ahead of it); per tool (best wall s, peak RSS MB)."""
    best: dict[str, tuple[float, float]] = {}
    for _ in range(repeat):
        for name, tool in tools.items():
            ahead = (before or {}).get(name)
            if callable(ahead):
                ahead()
            elif ahead:
                run(ahead, cwd, env)
            # Untimed: the references fsync nothing, so without this their
            # dirty pages would be written back during the next tool's run.
            os.sync()
            t = time.perf_counter()
            if callable(tool):
                tool()
            else:
                run(tool, cwd, env)
            wall = time.perf_counter() - t
            old = best.get(name, (float("inf"), 0.0))
            best[name] = (min(old[0], wall), max(old[1], rss_mb(rss)))
    return best


def rss_mb(path: Path) -> float:
    return int(path.read_text().split()[-1]) * 1024 / MB


def make_data(root: Path, total: int) -> tuple[int, int]:
    """The folder to back up; (bytes, files)."""
    root.mkdir()
    rnd = random.Random(1)
    block = os.urandom(MiB)
    small_dir_count, small_count = 10, 1000
    sizes = [rnd.randint(512, 32 * 1024) for _ in range(small_count)]
    small = sum(sizes)
    unique = min(256 * MiB, total // 4)
    rest = max(0, total - unique - small)
    with (root / "random.bin").open("wb") as fh:
        left = unique
        while left:
            fh.write(os.urandom(min(left, 16 * MiB)))
            left -= min(left, 16 * MiB)
    for i in range(3):
        size = rest // 3 + (rest % 3 if i == 2 else 0)
        with (root / f"large-{i}.bin").open("wb") as fh:
            left = size
            while left:
                part = block[: min(left, MiB)]
                fh.write(part)
                left -= len(part)
    for i, size in enumerate(sizes):
        folder = root / f"small-{i % small_dir_count:02d}"
        folder.mkdir(exist_ok=True)
        start = rnd.randrange(MiB - size)
        (folder / f"f{i:04d}.txt").write_bytes(block[start : start + size])
    return unique + rest + small, small_count + 4


def tree_size(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def warm(root: Path) -> None:
    buf = bytearray(4 * MiB)
    for p in sorted(root.rglob("*")):
        if p.is_file():
            with p.open("rb", buffering=0) as fh:
                while fh.readinto(buf):
                    pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="data size (64: quick try)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per tool; best counts")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    if FTM is None:
        print("the ftmanifest console script is not installed beside this python", file=sys.stderr)
        return 2
    if shutil.which("tar") is None:
        print("tar not found", file=sys.stderr)
        return 2
    age = shutil.which("age")

    tmp = Path(tempfile.mkdtemp(prefix="ftm-bench-backup-"))
    env = {**installed_env(), "FTMANIFEST_CACHE_DIR": str(tmp / "cache")}
    rows: list[tuple[str, str, str, str, str, bool]] = []
    notes: list[str] = []
    try:
        t = time.perf_counter()
        size, nfiles = make_data(tmp / "data", args.size_mib * MiB)
        notes.append(f"generated {size / MiB:.0f} MiB in {nfiles} files "
                     f"({time.perf_counter() - t:.1f} s)")  # fmt: skip
        mb = size / MB

        # Keys: a signing key the trust file names, an age identity and its recipient.
        run(f"{q(FTM)} keygen -f K --no-passphrase", tmp, env)
        (tmp / "trust").write_text(f'me namespaces="ftmanifest" {(tmp / "K.pub").read_text()}')
        env["FTMANIFEST_TRUST_FILE"] = str(tmp / "trust")
        if shutil.which("age-keygen"):
            run("age-keygen -o id.txt 2>/dev/null", tmp, env)
            recipient = run("age-keygen -y id.txt", tmp, env)[1].strip()
        else:
            import pyrage

            ident = pyrage.x25519.Identity.generate()
            (tmp / "id.txt").write_text(f"{ident}\n")
            recipient = str(ident.to_public())
        os.chmod(tmp / "id.txt", 0o600)
        rss = tmp / "rss"
        py = [sys.executable, "-c"]

        warm(tmp / "data")

        backup = [FTM, "backup", "create", "data", "--to", "out", "--key", "K", "-r", recipient,
                  "--format", "json"]  # fmt: skip
        archive = ""

        def ours() -> None:
            nonlocal archive
            made = run(measured(backup, rss), tmp, env)[1]
            archive = json.loads(made)["archive"]

        # Each round runs every tool once, ours and the references in turn, so a
        # burst of load from elsewhere falls on all of them; the best round counts.
        enc_tools: dict[str, Tool] = {"ours": ours}
        if age:
            age_cmd = measured([age, "-r", recipient, "-o", "ref.age"], rss)
            enc_tools["age"] = f"tar -cf - data | {age_cmd}"
            # the same pipeline made as durable as ours: coreutils `sync FILE` fsyncs it
            enc_tools["age+fsync"] = f"tar -cf - data | {age_cmd} && sync ref.age"
        py_cmd = measured([*py, ENCRYPT, "py.age", recipient], rss)
        enc_tools["pyrage"] = f"tar -cf - data | {py_cmd}"
        # Every tool writes a new file, as ours does: overwriting last round's
        # archive would charge the reference with freeing 1 GiB of blocks.
        enc = rounds(enc_tools, args.repeat, tmp, env, rss,
                     before={"ours": "rm -rf out", "age": "rm -f ref.age",
                             "age+fsync": "rm -f ref.age", "pyrage": "rm -f py.age"})  # fmt: skip

        rm_dest = "rm -rf dest dest-age dest-py dest-sync"
        dec_tools: dict[str, Tool] = {
            "ours": measured([FTM, "restore", archive, "-i", "id.txt", "--to", "dest"], rss),
        }
        if age:
            dec_tools["age"] = ("mkdir dest-age && "
                                f"{measured([age, '-d', '-i', 'id.txt', 'ref.age'], rss)} "
                                "| tar -xf - -C dest-age")  # fmt: skip
            sync_all = " && find dest-sync -type f -exec sync -- {} +"
            dec_tools["age+fsync"] = dec_tools["age"].replace("dest-age", "dest-sync") + sync_all
        py_cmd = measured([*py, DECRYPT, "py.age", "id.txt"], rss)
        dec_tools["pyrage"] = f"mkdir dest-py && {py_cmd} | tar -xf - -C dest-py"
        folders = {"ours": "dest", "age": "dest-age", "pyrage": "dest-py", "age+fsync": "dest-sync"}
        dec = rounds(
            dec_tools,
            args.repeat,
            tmp,
            env,
            rss,
            before={name: f"rm -rf {folder}" for name, folder in folders.items()},
        )

        for name, folder in folders.items():
            if name in dec and tree_size(tmp / folder / "data") != (size, nfiles):
                raise SystemExit(f"{name} restore: the restored tree differs from the data")
        run(rm_dest, tmp, env)
        t_backup, rss_backup = enc["ours"]
        t_restore, rss_restore = dec["ours"]
        py_enc, py_dec = enc["pyrage"], dec["pyrage"]
        age_enc, age_dec = enc.get("age"), dec.get("age")

        def speed(wall: float) -> str:
            return f"{mb / wall:.0f} MB/s"

        ref_enc, ref_dec = (age_enc, age_dec) if age else (py_enc, py_dec)
        ref_name = "tar | age" if age else "tar | pyrage"
        dec_name = "age -d | tar -x" if age else "pyrage | tar -x"
        assert ref_enc is not None and ref_dec is not None

        def ratio_row(name: str, ours: float, ref: float, ref_label: str, target: bool):
            r = ref / ours
            rows.append((name, speed(ours), f"{speed(ref)} ({ref_label})", f"{r:.2f}",
                         ">= 0.8" if target else "-", r >= 0.8 or not target))  # fmt: skip

        ratio_row("backup (reads each file once)", t_backup, ref_enc[0], ref_name, True)
        if age:
            synced = enc["age+fsync"][0]
            ratio_row("backup vs a reference that fsyncs", t_backup, synced,
                      "tar | age; sync", False)  # fmt: skip
            ratio_row("backup vs pyrage alone", t_backup, py_enc[0], "tar | pyrage", False)
        ratio_row("restore (header, decrypt, files' sha256)", t_restore, ref_dec[0], dec_name,
                  True)  # fmt: skip
        if age:
            ratio_row("restore vs a reference that fsyncs", t_restore, dec["age+fsync"][0],
                      "age -d | tar -x; sync", False)  # fmt: skip
            ratio_row("restore vs pyrage alone", t_restore, py_dec[0], "pyrage | tar -x", False)
        enc_rss, dec_rss = ref_enc[1], ref_dec[1]
        ref_tool = "age" if age else "pyrage"
        for name, value, ref in (
            ("peak RSS, backup", rss_backup, enc_rss),
            ("peak RSS, restore", rss_restore, dec_rss),
        ):
            rows.append((name, f"{value:.1f} MB", f"{ref:.1f} MB ({ref_tool})",
                         f"{value / ref:.1f}x", "< 200 MB", value < 200))  # fmt: skip
        rows.append(("peak RSS, pyrage alone (enc / dec)", "-",
                     f"{py_enc[1]:.1f} / {py_dec[1]:.1f} MB", "-", "-", True))  # fmt: skip
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    for n in notes:
        print(n)
    print("page cache: not dropped (needs root); the data was read once before the runs, "
          "so every tool saw a warm cache")  # fmt: skip
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rss_how = "/usr/bin/time %M" if GNU_TIME else "os.wait4 in a launcher"
    return print_table(rows, f"data: {size / MiB:.0f} MiB, {nfiles} files; best of "
                       f"{args.repeat}; load avg {load:.2f}; peak RSS via {rss_how}; "
                       f"age: {age or 'not installed'}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
