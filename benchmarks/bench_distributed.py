"""Hashing split over the ranks of a torchrun job vs one process, and what bounds it.

  .venv/bin/python benchmarks/bench_distributed.py [--quick] [--nproc 2]

1. SHA-256 per core: ``hashlib.sha256`` over a 64 MiB buffer in memory (what
   one rank can hash when the disk is not the limit);
2. ``os.stat`` per file (what a second verify costs per file with the cache);
3. the same files hashed by one process (``hashing.hash_files``, its thread
   pool on every core; and one worker) vs ``torchrun --nproc-per-node N``
   with ``distributed.shard.hash_files``: the hashing time of the slowest
   rank (after joining, so torch's import is not in it), the bytes each rank
   read, and the whole job's wall time (torch imported on every rank);
4. a second run of both with a warm stat cache (the job's ranks share one
   cache folder, as two ranks of one host do);
5. the model of verifying 1 TB (docs/guides/distributed.md, "Parallel hashing and scanning"),
   computed from the numbers measured in 1 and 2.

Every digest the job returns is checked against the single-process result.
Data lives in a temporary folder (page cache warm: the disk is not measured).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _report import installed_env, print_table  # noqa: E402

from ftmanifest.hashing.files import hash_files  # noqa: E402
from ftmanifest.statcache import RACY_NS, StatCache  # noqa: E402

MiB = 1 << 20
GB = 10**9
TORCHRUN = Path(sys.executable).with_name("torchrun")

RANK_SCRIPT = """\
import json, os, sys, time
from pathlib import Path

from ftmanifest.distributed import shard
from ftmanifest.hashing import files as hashing_files
from ftmanifest.distributed.comm import job_from_env, joined
from ftmanifest.statcache import StatCache

files = [Path(p) for p in json.loads(Path(sys.argv[1]).read_text())]
use_cache = sys.argv[2] == "cache"
read = []
plain = hashing_files.hash_files


def spy(paths, **kw):  # the files this rank was given to hash
    paths = list(paths)
    read.extend(paths)
    return plain(paths, **kw)


hashing_files.hash_files = spy  # where shard looks it up
job = job_from_env()
with joined(job, 300) as comm:
    cache = StatCache() if use_cache else None
    comm.all_gather_json(None, "start")
    start = time.perf_counter()
    result = shard.hash_files(comm, files, use_cache=use_cache, cache=cache)
    took = time.perf_counter() - start
    comm.all_gather_json(None, "end")
    if cache is not None:
        cache.close()
out = {
    "rank": job.rank,
    "seconds": took,
    "files_read": len(read),
    "bytes_read": sum(p.stat().st_size for p in read),
    "digests": {str(p): getattr(r, "digest", repr(r)) for p, r in result.items()},
    "cache_hits": cache.hits if cache is not None else None,
}
Path(sys.argv[3], f"rank{job.rank}.json").write_text(json.dumps(out))
"""


def sha256_per_core(buffer: bytes, repeat: int) -> float:
    """Bytes per second one thread hashes from memory (best of ``repeat``)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        hashlib.sha256(buffer).hexdigest()
        best = min(best, time.perf_counter() - start)
    return len(buffer) / best


def stat_per_file(files: list[Path], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for p in files:
            os.stat(p)
        best = min(best, time.perf_counter() - start)
    return best / len(files)


def make_data(folder: Path, n: int, total: int) -> list[Path]:
    """``n`` files of uneven sizes (1 to 8 parts) adding up to about ``total`` bytes."""
    rng = random.Random(18)
    parts = [rng.randint(1, 8) for _ in range(n)]
    unit = total // sum(parts)
    block = rng.randbytes(MiB)
    files = []
    for i, k in enumerate(parts):
        p = folder / f"shard-{i:04}.bin"
        size = k * unit
        with p.open("wb") as f:
            for off in range(0, size, MiB):
                f.write(block[: min(MiB, size - off)])
            f.write(i.to_bytes(4, "big"))  # every file's digest differs
        files.append(p)
    return files


def best_of(repeat: int, fn) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def job(tmp: Path, listing: Path, nproc: int, mode: str, cache: Path) -> tuple[float, list[dict]]:
    """One torchrun job; its wall time and every rank's report."""
    out = tmp / f"out-{mode}-{time.monotonic_ns()}"
    out.mkdir()
    script = tmp / "bench_rank.py"
    script.write_text(RANK_SCRIPT)
    env = {**installed_env(), "FTMANIFEST_CACHE_DIR": str(cache)}
    env.pop("WORLD_SIZE", None)
    cmd = [str(TORCHRUN), "--standalone", f"--nproc-per-node={nproc}", str(script)]
    start = time.perf_counter()
    proc = subprocess.run(
        [*cmd, str(listing), mode, str(out)],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(
            f"torchrun failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        )
    return wall, [json.loads((out / f"rank{r}.json").read_text()) for r in range(nproc)]


def model_rows(core: float, cached_s: float, gathers_s: float) -> list[str]:
    """Time to verify 1 TB as ranks grow, from the measured numbers (a model, not a run).

    Every node hashes every file as it sees it (a node trains on its own view, so
    each view is verified; ranks on different nodes never share a file, even on a
    shared filesystem), split over the node's ranks:

    T = max(node's bytes / min(its bandwidth, its ranks x SHA-256 per core),
            largest file / SHA-256 per core)

    With its own disk a node reads 1 TB from it, so more nodes add nothing; on
    one shared filesystem every node reads the whole 1 TB from it, so the nodes
    divide its bandwidth.  A second verify: every rank checks its own view
    through its own cache (``cached_s`` per file: a stat and an indexed
    lookup), then two gathers.
    """
    tb, files, largest = 1e12, 2000, 20e9  # one 20 GB file among ~490 MB shards
    disk, per_node, shared = 3e9, 8, 20e9  # NVMe per node, ranks per node, shared FS in all
    lines = [
        f"model: 1 TB in {files} files, the largest {largest / GB:.0f} GB; SHA-256"
        f" {core / GB:.2f} GB/s per rank (measured); {per_node} ranks per node, every node"
        f" hashing its whole view: its own NVMe copy at {disk / GB:.0f} GB/s, or one shared"
        f" filesystem of {shared / GB:.0f} GB/s that the nodes divide",
        "ranks nodes | own disks: s  bound          | shared fs: s  bound          |"
        " 2nd verify, cache: per rank (s) + gathers (s)",
    ]

    def one(bandwidth: float, ranks_here: int) -> tuple[float, str]:
        terms = {
            "disk/network": tb / bandwidth,
            "SHA-256/core": tb / (ranks_here * core),
            "largest file": largest / core,
        }
        bound = max(terms, key=lambda k: terms[k])
        return terms[bound], bound

    for ranks in (1, 2, 8, 32, 128, 512):
        nodes = -(-ranks // per_node)
        here = min(ranks, per_node)  # the ranks of one node
        t_own, b_own = one(disk, here)
        t_fs, b_fs = one(shared / nodes, here)
        lines.append(
            f"{ranks:>5} {nodes:>5} | {t_own:>12.0f}  {b_own:<14} | {t_fs:>12.0f}  {b_fs:<14} |"
            f" {files * cached_s:>10.4f} + {gathers_s:.3f}"
        )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="less data, fewer repeats")
    ap.add_argument("--nproc", type=int, default=2, help="ranks of the torchrun job")
    ap.add_argument("--files", type=int, default=None, help="number of files")
    ap.add_argument("--mib", type=int, default=None, help="total MiB of data")
    args = ap.parse_args()
    repeat = 2 if args.quick else 3
    n = args.files or (24 if args.quick else 64)
    n_small = 2000 if args.quick else 20000
    total = (args.mib or (96 if args.quick else 384)) * MiB
    with tempfile.TemporaryDirectory(prefix="ftm-bench-dist-") as name:
        tmp = Path(name)
        (tmp / "data").mkdir()
        files = make_data(tmp / "data", n, total)
        size = sum(p.stat().st_size for p in files)
        listing = tmp / "files.json"
        listing.write_text(json.dumps([str(p) for p in files]))
        core = sha256_per_core(random.Random(1).randbytes(64 * MiB), repeat)
        stat_s = stat_per_file(files, 5)
        hash_files(files, use_cache=False)  # warm the page cache
        one = best_of(repeat, lambda: hash_files(files, use_cache=False))
        single_worker = best_of(repeat, lambda: hash_files(files, use_cache=False, workers=1))
        expected = {str(p): r.digest for p, r in hash_files(files, use_cache=False).items()}  # type: ignore[union-attr]
        runs = [job(tmp, listing, args.nproc, "nocache", tmp / "c0") for _ in range(repeat)]
        wall, ranks = min(runs, key=lambda run: max(r["seconds"] for r in run[1]))
        dist = max(r["seconds"] for r in ranks)
        for r in ranks:
            assert r["digests"] == expected, f"rank {r['rank']}: digests differ"
        # warm cache: files written over RACY_NS ago are cached by the first run
        time.sleep(
            max(0.0, (max(p.stat().st_mtime_ns for p in files) + RACY_NS) / 1e9 - time.time() + 0.1)
        )
        cache = StatCache(tmp / "c1")
        hash_files(files, cache=cache)
        cache.close()
        cached_one = best_of(repeat, lambda: hash_files(files, cache=StatCache(tmp / "c1")))
        job(tmp, listing, args.nproc, "cache", tmp / "c2")  # fills the job's cache
        cwall, cranks = job(tmp, listing, args.nproc, "cache", tmp / "c2")
        cdist = max(r["seconds"] for r in cranks)
        # every rank's cache knew every file: nothing read, nothing sent
        assert all(r["files_read"] == 0 and r["cache_hits"] == n for r in cranks), cranks
        (tmp / "small").mkdir()
        small = []
        for i in range(n_small):
            small.append(tmp / "small" / f"{i:05}.txt")
            small[-1].write_bytes(b"x" * (i % 4096))
        listing2 = tmp / "small.json"
        listing2.write_text(json.dumps([str(p) for p in small]))
        time.sleep(RACY_NS / 1e9 + 0.1)
        cache = StatCache(tmp / "c3")
        hash_files(small, cache=cache)
        cache.close()
        small_one = best_of(repeat, lambda: hash_files(small, cache=StatCache(tmp / "c3")))
        job(tmp, listing2, args.nproc, "cache", tmp / "c4")
        _, sranks = job(tmp, listing2, args.nproc, "cache", tmp / "c4")
        small_dist = max(r["seconds"] for r in sranks)
    mb = size / 1e6
    shares = ", ".join(
        f"rank {r['rank']}: {r['files_read']} files {r['bytes_read'] / 1e6:.0f} MB" for r in ranks
    )
    rows = [
        ("sha256, one core, from memory", f"{core / 1e6:.0f} MB/s", "-", "-", "-", True),
        ("os.stat per file", f"{stat_s * 1e6:.1f} us", "-", "-", "-", True),
        (
            f"hash {n} files {mb:.0f} MB: {args.nproc} ranks vs 1 process (all cores)",
            f"{dist:.2f} s",
            f"{one:.2f} s",
            f"{one / dist:.2f}x",
            "info",
            True,
        ),
        (
            "  ... vs 1 process, one worker",
            f"{dist:.2f} s",
            f"{single_worker:.2f} s",
            f"{single_worker / dist:.2f}x",
            "info",
            True,
        ),
        (
            "  torchrun job wall (torch import, join) vs 1 process",
            f"{wall:.2f} s",
            f"{one:.2f} s",
            f"{one / wall:.2f}x",
            "info",
            True,
        ),
        (
            "2nd run, stat cache: ranks vs 1 process",
            f"{cdist * 1000:.1f} ms",
            f"{cached_one * 1000:.1f} ms",
            f"{cached_one / cdist:.2f}x",
            "info",
            True,
        ),
        (
            f"2nd run, stat cache, {n_small} small files: ranks vs 1 process",
            f"{small_dist * 1000:.0f} ms",
            f"{small_one * 1000:.0f} ms",
            f"{small_one / small_dist:.2f}x",
            "info",
            True,
        ),
        (
            "  2nd run torchrun job wall",
            f"{cwall:.2f} s",
            f"{cached_one * 1000:.1f} ms",
            "-",
            "info",
            True,
        ),
    ]
    code = print_table(rows, f"ranks: {args.nproc}  shares: {shares}")
    print()
    print("\n".join(model_rows(core, small_one / n_small, cdist)))
    return code


if __name__ == "__main__":
    sys.exit(main())
