"""Benchmark ``ftmanifest data check`` (split leakage) against a plain exact-hash pass.

  .venv/bin/python benchmarks/bench_data.py [--quick] [--records N] [--jobs N]

Generates N chat training records (default 1,000,000; ``--quick`` 100,000) of
80 words each and N/10 eval records, of which 1 % repeat a training record
(half of them with case and whitespace changed) and 1 % are near duplicates of
one (one word or two adjacent words of 80 changed: Jaccard of 3-word
shingles >= 0.9, checked as generated), plus a small
sealed test split.  Then, each in a fresh process so peak memory
(``ru_maxrss``) is its own: the floor, one pass over every split that
normalises each record's text and looks its hash up (exact duplicates only),
and the whole leakage check (``ftmanifest.data.leakage.check_leakage`` with
``--jobs`` signing processes, default every core).  Peak memory is of the whole
process tree (the check and its workers: the largest sum of their proportional set
sizes, which count a page shared by the parent and its forked workers once, sampled
every 0.1 s from /proc, and never below the check's own ``ru_maxrss``; the sum of
resident sets, which counts it in every process, is printed beside it).  Recall and
precision are of the planted near duplicates, by training record.  Targets: the whole
check under 10 minutes and the whole command under 60 s on two cores, recall >= 0.95
at Jaccard >= 0.9 with precision >= 0.95, memory under 4 GiB.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _report import print_table  # noqa: E402

WORDS = 80


def _vocabulary(rng: random.Random, n: int = 20000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(n)]


def _line(words: list[str]) -> str:
    half = WORDS // 2
    user, answer = " ".join(words[:half]), " ".join(words[half:])
    messages = [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    return json.dumps({"messages": messages}) + "\n"


def generate(folder: Path, n: int, seed: int = 17) -> dict[str, list[int]]:
    """Write train/eval/test JSONL; return the planted training record numbers."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng)
    n_eval = n // 10
    planted_exact = sorted(rng.sample(range(1, n + 1), n_eval // 100))
    rest = sorted(set(range(1, n + 1)) - set(planted_exact))
    planted_near = sorted(rng.sample(rest, n_eval // 100))
    wanted = set(planted_exact) | set(planted_near)
    kept: dict[int, list[str]] = {}
    with open(folder / "train.jsonl", "w", encoding="utf-8") as f:
        for number in range(1, n + 1):
            words = rng.choices(vocab, k=WORDS)
            if number in wanted:
                kept[number] = words
            f.write(_line(words))
    lines = []
    for i, number in enumerate(planted_exact):
        words = kept[number]
        lines.append(_line([w.upper() for w in words] if i % 2 else words).replace(" ", "  "))
    similarity = []
    for i, number in enumerate(planted_near):
        words = list(kept[number])
        at = rng.randrange(1, WORDS - 2)
        for j in range(at, at + 1 + i % 2):  # one word, or two adjacent ones, of 80
            words[j] = "changed" + str(j)
        lines.append(_line(words))
        similarity.append(_jaccard(kept[number], words))
    while len(lines) < n_eval:
        lines.append(_line(rng.choices(vocab, k=WORDS)))
    rng.shuffle(lines)
    (folder / "eval.jsonl").write_text("".join(lines), encoding="utf-8")
    test = "".join(_line(rng.choices(vocab, k=WORDS)) for _ in range(1000))
    (folder / "test.jsonl").write_text(test, encoding="utf-8")
    assert min(similarity) >= 0.9, min(similarity)
    return {"exact": planted_exact, "near": planted_near, "similarity": [min(similarity)]}


def _jaccard(a: list[str], b: list[str]) -> float:
    from ftmanifest.data.text import jaccard, normalise, shingles

    text = [normalise(" ".join(w)) for w in (a, b)]
    return jaccard(shingles(text[0]), shingles(text[1]))


MANIFEST = """\
ftmanifest: 1
experiment: {id: bench-data}
model: {path: model}
data:
  - {name: train, role: train, path: train.jsonl}
  - {name: eval, role: eval, path: eval.jsonl}
  - {name: test, role: test, path: test.jsonl, sealed: true}
"""


def _splits(folder: Path) -> list:  # type: ignore[type-arg]
    from ftmanifest.data.leak_report import Split

    return [
        Split("train", "train", folder / "train.jsonl"),
        Split("eval", "eval", folder / "eval.jsonl"),
        Split("test", "test", folder / "test.jsonl", sealed=True),
    ]


def child(mode: str, folder: Path, jobs: int) -> None:
    t0 = time.perf_counter()
    out: dict[str, object] = {}
    if mode == "command":  # the whole command, as a user runs it
        import contextlib
        import io

        from ftmanifest.cli import main as cli

        (folder / "exp.yaml").write_text(MANIFEST, encoding="utf-8")
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            code = cli(["data", "check", str(folder / "exp.yaml"), "--format", "json",
                        "--jobs", str(jobs)])  # fmt: skip
        report = json.loads(printed.getvalue())
        out["code"] = code
        out["records"] = report["records"]
    elif mode == "floor":
        import hashlib

        from ftmanifest.data.text import normalise, record_text
        from ftmanifest.recordio import iter_records

        seen: dict[str, set[bytes]] = {}
        hits = 0
        for split in reversed(_splits(folder)):
            hashes = set()
            for rec in iter_records(split.path):
                text = normalise(record_text(rec.value)).encode()
                h = hashlib.blake2b(text, digest_size=16).digest()
                hits += any(h in other for other in seen.values())
                hashes.add(h)
            seen[split.name] = hashes
        out["exact"] = hits
    else:
        from ftmanifest.data.leakage import check_leakage

        report = check_leakage(_splits(folder), jobs=jobs)
        out["leaking"] = sorted(report.leaking["train"])
        out["pairs"] = {f"{p.b}/{p.a}": [p.exact, p.near] for p in report.pairs}
    out["seconds"] = time.perf_counter() - t0
    out["maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out["worker_maxrss_kib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    cpu = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    out["cpu_seconds"] = sum(r.ru_utime + r.ru_stime for r in cpu)
    print(json.dumps(out))


def _tree_kib(root: int) -> tuple[int, int]:
    """(resident, proportional) KiB of ``root`` and its descendants now (Linux /proc; 0
    elsewhere).  Forked workers share the pages their parent held when they forked, and
    each one's resident set counts them again; the proportional set size (PSS) divides a
    shared page among the processes that map it, so its sum counts each page once."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                parents[int(entry)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo.extend(p for p, parent in parents.items() if parent == pid and p not in tree)
    rss = pss = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith(("Rss:", "Pss:")):
                        kib = int(line.split()[1])
                        rss, pss = (rss + kib, pss) if line[0:3] == "Rss" else (rss, pss + kib)
        except (OSError, IndexError, ValueError):
            continue
    return rss, pss


def _run(mode: str, folder: Path, jobs: int) -> dict:  # type: ignore[type-arg]
    argv = [sys.executable, __file__, "--child", mode, str(folder), "--jobs", str(jobs)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0, 0]  # resident, proportional

    def sample() -> None:
        while proc.poll() is None:
            rss, pss = _tree_kib(proc.pid)
            peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = proc.communicate()
    sampler.join()
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{stdout}\n{stderr}")
    out = json.loads(stdout.strip().splitlines()[-1])
    out["tree_kib"] = max(peak[1], out["maxrss_kib"])
    out["tree_rss_kib"] = max(peak[0], out["maxrss_kib"])
    return out  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="100,000 training records")
    parser.add_argument("--records", type=int, help="training records (default 1,000,000)")
    parser.add_argument("--jobs", type=int, help="signing processes (default: every core)")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    from ftmanifest.data.parallel import cores

    jobs = args.jobs or cores()
    if args.child:
        child(args.child[0], Path(args.child[1]), jobs)
        return 0
    n = args.records or (100_000 if args.quick else 1_000_000)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="ftm-bench-data-") as tmp:
        t0 = time.perf_counter()
        planted = generate(Path(tmp), n)
        made = time.perf_counter() - t0
        floor = _run("floor", Path(tmp), 1)
        full = _run("check", Path(tmp), jobs)
        command = _run("command", Path(tmp), jobs)
    near, exact = set(planted["near"]), set(planted["exact"])
    found_near = set(full["leaking"]) - exact
    recall = len(found_near & near) / len(near)
    precision = len(found_near & near) / max(1, len(found_near))
    gib = full["tree_kib"] / 2**20
    secs = full["seconds"]
    rows = [
        (f"leakage check, {n:,} train x {n // 10:,} eval", f"{secs:.1f} s",
         f"{floor['seconds']:.1f} s exact-hash pass", f"{secs / floor['seconds']:.1f}x",
         "< 600 s", secs < 600),
        (f"whole `data check --format json`, {jobs} jobs", f"{command['seconds']:.1f} s",
         f"{floor['seconds']:.1f} s exact-hash pass",
         f"{command['seconds'] / floor['seconds']:.1f}x",
         "< 60 s", command["seconds"] < 60),
        ("recall, planted near duplicates (J >= 0.9)", f"{recall:.3f}", f"{len(near):,} planted",
         "", ">= 0.95", recall >= 0.95),
        ("precision, near duplicates", f"{precision:.3f}", f"{len(found_near):,} found", "",
         ">= 0.95", precision >= 0.95),
        (f"peak memory, process tree ({jobs} workers)", f"{gib:.2f} GiB",
         f"{floor['tree_kib'] / 2**20:.2f} GiB exact-hash pass",
         f"{full['tree_kib'] / floor['tree_kib']:.1f}x", "< 4 GiB", gib < 4),
    ]  # fmt: skip
    counts = ", ".join(f"{k}: {v[0]} exact {v[1]} near" for k, v in full["pairs"].items())
    print(f"generated in {made:.1f} s; planted {len(exact):,} exact, {len(near):,} near; {counts}")
    print(f"check: {jobs} signing processes, {full['cpu_seconds']:.0f} CPU s in "
          f"{secs:.0f} s; parent {full['maxrss_kib'] / 2**20:.2f} GiB, largest worker "
          f"{full['worker_maxrss_kib'] / 2**20:.2f} GiB; whole command "
          f"{command['cpu_seconds']:.0f} CPU s ({command['cpu_seconds'] / n * 1e6:.0f} µs "
          f"a training record, parent and workers), {command['tree_kib'] / 2**20:.2f} GiB; "
          f"summed resident sets {full['tree_rss_kib'] / 2**20:.2f} GiB (check), "
          f"{command['tree_rss_kib'] / 2**20:.2f} GiB (command); "
          f"load average at start {load:.1f}, "
          f"at end {os.getloadavg()[0]:.1f} (other work on the same cores)")  # fmt: skip
    return print_table(rows, "two splits + a 1,000-record sealed test split, fresh processes")


if __name__ == "__main__":
    sys.exit(main())
