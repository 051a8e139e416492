"""Benchmark: ``ftmanifest scan`` vs detect-secrets on a chat-format JSONL, in one run.

  .venv/bin/python benchmarks/bench_scan.py [--quick] [--jobs 2] [--ds-mb 10] [--repeat 2]
      [--save-findings FILE | --compare-findings FILE]

Generates a ~100 MB JSONL (``--quick``: ~10 MB) of chat records with UUIDs,
sha256/sha1 digests, base64 images, code snippets, URLs and a private IPv4 per
record, with a secret, an email and a phone number planted every 400 records
(and a grouped card number without a card word, a national-format
phone, a lower-case IBAN in groups of four and a passport number after its keyword)
(kept in ``benchmarks/_data/``, which is git-ignored, and reused).  Scans the
whole file with ftmanifest (secrets + PII, ``--jobs`` processes, best of
``--repeat``) and a ``--ds-mb`` slice with ``detect-secrets scan --all-files``
(the slice split in ``--jobs`` parts scanned by as many processes, so both
tools get the same cores).  Prints MB/s for both, the ratio, both tools'
recall on the planted secrets of the slice, ftmanifest's recall on the whole
file (secrets, emails, phones, the forms people write by hand) and its secret and PII
findings on unplanted lines
(false positives on the hard negatives).  Exits 1 when a target is
missed: >= 50 MB/s, >= 100x detect-secrets, recall >= detect-secrets'.

Each ftmanifest figure is also given in CPU time (MB per CPU second of the scan and
its workers), which a loaded machine disturbs far less than the wall clock.
``--save-findings`` writes the whole file's findings as JSON; ``--compare-findings``
reads such a file, written by another tree, and counts any difference as a missed
target: a change meant to make the scan faster must not change one finding.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import random
import string
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ftmanifest.scan.engine import ScanOptions, scan_paths  # noqa: E402
from ftmanifest.scan.text.matcher import engine_name  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))
from _phones import measure as measure_phones  # noqa: E402
from _secret_families import measure as measure_families  # noqa: E402

DATA = REPO / "benchmarks" / "_data"
GEN_VERSION = 3  # bump when generate() changes

WORDS = (
    "the model should answer in json with the fields name date amount and a short "
    "summary please explain how gradient accumulation interacts with the learning rate "
    "schedule when training a lora adapter on a small dataset of support tickets and "
    "why the validation loss went up after epoch three while the token accuracy kept rising"
).split()
CODE = [
    "def tokenize(batch):\n    return tokenizer(batch['text'], truncation=True, max_length=512)",
    "for step, batch in enumerate(loader):\n    loss = model(**batch).loss\n    loss.backward()",
    "config = {'lr': 2e-4, 'r': 16, 'lora_alpha': 32, 'target_modules': ['q_proj', 'v_proj']}",
    "token = os.environ['HF_TOKEN']  # never hard-code it",
    "api_key = os.getenv('OPENAI_API_KEY')\nclient = OpenAI(api_key=api_key)",
    "pip install torch==2.3.1 transformers==4.44.0 peft==0.12.0",
    "ssh git@github.com && curl -s http://10.0.0.12:8080/health",
]
ALNUM = string.ascii_letters + string.digits


def _s(r: random.Random, n: int, alpha: str = ALNUM) -> str:
    return "".join(r.choice(alpha) for _ in range(n))


def planted_secret(r: random.Random, kind: int) -> str:
    k = kind % 10
    if k == 0:
        return "ghp_" + _s(r, 36)
    if k == 1:
        return "AKIA" + _s(r, 16, string.ascii_uppercase + "234567")
    if k == 2:
        return "hf_" + _s(r, 34, string.ascii_letters)
    if k == 3:
        return "sk-proj-" + _s(r, 48)
    if k == 4:
        return f"xoxb-{_s(r, 12, string.digits)}-{_s(r, 13, string.digits)}-{_s(r, 24)}"
    if k == 5:
        return "sk_live_" + _s(r, 24)
    if k == 6:
        return "glpat-" + _s(r, 20)
    if k == 7:
        return "AIza" + _s(r, 35)
    if k == 8:
        return f"postgres://svc:{_s(r, 18)}@db{r.randrange(99)}.corp.internal:5432/app"
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=").decode()
    body = base64.urlsafe_b64encode(f'{{"sub":"{_s(r, 10)}"}}'.encode()).rstrip(b"=").decode()
    return f"{head}.{body}.{_s(r, 43, ALNUM + '-_')}"


def _luhn_complete(body: str) -> str:
    for d in "0123456789":
        total = 0
        for i, ch in enumerate(reversed(body + d)):
            k = int(ch) * (2 if i % 2 else 1)
            total += k - 9 if k > 9 else k
        if total % 10 == 0:
            return body + d
    raise AssertionError


def planted_pii(r: random.Random, line: int) -> str:
    """PII in the forms people write: a grouped card without a card word, a national-format phone, a
    lower-case grouped IBAN and a passport number behind its keyword."""
    card = _luhn_complete("4" + _s(r, 14, "123456789"))
    card = " ".join(card[i : i + 4] for i in range(0, 16, 4))
    k = line % 4
    phone = (f"({r.choice((505, 212, 617))}) 658-{r.randrange(1000, 9999)}" if k == 0  # US
             else f"020 7946 0{r.randrange(100, 999)}" if k == 1  # GB
             else f"030 12{r.randrange(10000, 99999)}" if k == 2  # DE
             else f"06 12 34 {r.randrange(10, 99)} {r.randrange(10, 99)}")  # FR  # fmt: skip
    bban = _s(r, 18, string.digits)
    check = 98 - int(bban + "131400") % 97
    iban = f"de{check:02d}{bban}"
    iban = " ".join(iban[i : i + 4] for i in range(0, len(iban), 4))
    passport = r.choice("CFGHJK") + _s(r, 8, string.digits)
    return f"paid with {card}. call me at {phone} or wire to {iban}, passport no. {passport}"


def _text(r: random.Random, n: int) -> str:
    return " ".join(r.choice(WORDS) for _ in range(n))


def generate(path: Path, size: int, every: int, seed: int = 7) -> list[tuple[int, str]]:
    """Write the JSONL; return planted (line, secret) pairs."""
    r = random.Random(seed)
    png = "data:image/png;base64," + base64.b64encode(r.randbytes(600)).decode()
    planted: list[tuple[int, str]] = []
    written, line = 0, 0
    with path.open("w", encoding="utf-8") as fh:
        while written < size:
            line += 1
            user = _text(r, r.randrange(20, 80))
            answer = _text(r, r.randrange(30, 120)) + "\n```python\n" + r.choice(CODE) + "\n```"
            if line % every == 0:
                secret = planted_secret(r, line // every)
                planted.append((line, secret))
                answer += f" here is my key {secret} please keep it"
                user += (
                    f" mail me at dev{line}@acme-corp.io or call +49 30 {line % 9000 + 1000} 5678 "
                    + planted_pii(r, line)
                )
            rec = {
                "id": str(uuid.UUID(int=r.getrandbits(128))),
                "messages": [
                    {"role": "system", "content": "You are a helpful assistant."},
                    {"role": "user", "content": user},
                    {"role": "assistant", "content": answer},
                ],
                "meta": {
                    "sha256": hashlib.sha256(line.to_bytes(8, "big")).hexdigest(),
                    "commit": hashlib.sha1(line.to_bytes(8, "big")).hexdigest(),
                    "source": f"https://huggingface.co/datasets/org/chat-{line % 97}",
                    "image": png if line % 50 == 0 else None,
                    "max_tokens": 512,
                    "client_ip": f"192.168.{line % 250}.{line % 200 + 1}",
                },
            }
            text = json.dumps(rec, ensure_ascii=False) + "\n"
            fh.write(text)
            written += len(text.encode())
    return planted


def dataset(size: int) -> tuple[Path, list[tuple[int, str]]]:
    """The generated JSONL and its planted (line, secret) pairs, reused when present."""
    DATA.mkdir(exist_ok=True)
    path = DATA / f"chat-{size >> 20}mb-v{GEN_VERSION}.jsonl"
    meta = path.with_suffix(".planted.json")
    if not (path.exists() and meta.exists()):
        t0 = time.perf_counter()
        tmp = path.with_suffix(".tmp")
        planted = generate(tmp, size, every=400)
        tmp.replace(path)
        meta.write_text(json.dumps(planted))
        print(f"generated {path.name} in {time.perf_counter() - t0:.1f}s")
    return path, [(int(ln), s) for ln, s in json.loads(meta.read_text())]


def recall(planted: list[int], lines: set[int], upto: int | None = None) -> tuple[int, int]:
    items = [ln for ln in planted if upto is None or ln <= upto]
    return sum(1 for ln in items if ln in lines), len(items)


def fmt_recall(hit_total: tuple[int, int]) -> str:
    hit, total = hit_total
    return f"{hit / max(1, total):.3f} ({hit}/{total})"


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have ended (the pool's)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run_ftmanifest(path: Path, jobs: int, repeat: int) -> tuple[float, float, list]:
    """Best wall time, best CPU time and the findings of ``repeat`` scans."""
    best, best_cpu, findings = float("inf"), float("inf"), []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), cpu_seconds()
        findings = scan_paths([path], ScanOptions(jobs=jobs)).findings
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, cpu_seconds() - c0)
    return best, best_cpu, findings


def same_findings(found: list, args: argparse.Namespace) -> bool:
    """Write the findings (``--save-findings``) or compare them with a saved run."""
    rows = [{**f.to_dict(), "path": Path(f.path).name} for f in found]  # any checkout
    if args.save_findings:
        Path(args.save_findings).write_text(json.dumps(rows))
        print(f"  {len(rows)} findings written to {args.save_findings}")
    if not args.compare_findings:
        return True
    saved = json.loads(Path(args.compare_findings).read_text())
    if saved == rows:
        print(f"  findings identical to {args.compare_findings} ({len(rows)})")
        return True
    now_keys = {json.dumps(r, sort_keys=True) for r in rows}
    saved_keys = {json.dumps(r, sort_keys=True) for r in saved}
    gone = [r for r in saved if json.dumps(r, sort_keys=True) not in now_keys]
    new = [r for r in rows if json.dumps(r, sort_keys=True) not in saved_keys]
    print(f"  findings DIFFER from {args.compare_findings}: {len(saved)} saved, {len(rows)} "
          f"now, {len(gone)} gone, {len(new)} new; first: {(gone or new)[:1]}")  # fmt: skip
    return False


def run_detect_secrets(path: Path, parts: int) -> tuple[float, set[int]]:
    """detect-secrets on ``parts`` line-aligned pieces of ``path``, concurrently."""
    data = path.read_bytes()
    pieces, offsets, start = [], [], 0
    for k in range(1, parts + 1):
        end = len(data) if k == parts else data.rfind(b"\n", 0, len(data) * k // parts) + 1
        piece = path.with_name(f"{path.stem}.part{k}.jsonl")
        piece.write_bytes(data[start:end])
        pieces.append(piece)
        offsets.append(data.count(b"\n", 0, start))
        start = end
    exe = Path(sys.executable).with_name("detect-secrets")
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [str(exe), "scan", "--all-files", p.name],
            cwd=p.parent,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for p in pieces
    ]
    outs = [p.communicate()[0] for p in procs]
    dt = time.perf_counter() - t0
    lines: set[int] = set()
    for out, base in zip(outs, offsets, strict=True):
        for hits in json.loads(out)["results"].values():
            lines.update(base + h["line_number"] for h in hits)
    for p in pieces:
        p.unlink()
    return dt, lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="~10 MB instead of ~100 MB")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2, help="ftmanifest runs; the best counts")
    ap.add_argument("--ds-mb", type=float, default=10.0, help="detect-secrets slice size (MB)")
    ap.add_argument("--save-findings", metavar="FILE", help="write the whole file's findings")
    ap.add_argument("--compare-findings", metavar="FILE", help="fail unless they equal FILE's")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores "
          f"(figures are only comparable on an idle machine)")  # fmt: skip
    big, planted = dataset((10 if args.quick else 100) << 20)
    secret_lines = [ln for ln, _ in planted]
    mb = big.stat().st_size / 1e6
    big.read_bytes()  # warm the page cache for both tools

    dt, cpu, found = run_ftmanifest(big, args.jobs, args.repeat)
    ftm_rate = mb / dt
    sec = {f.line for f in found if f.kind == "secret" and f.line}
    email = {f.line for f in found if f.rule == "pii.email" and f.line}
    phone = {f.line for f in found if f.rule == "pii.phone" and f.line}
    fp = len(sec - set(secret_lines))
    forms = {
        name: {f.line for f in found if f.rule == rule and f.line}
        for name, rule in (("grouped cards", "pii.card-number"),
                           ("national phones", "pii.phone-national"),
                           ("lower-case IBANs", "pii.iban"),
                           ("passports", "pii.passport-number"))
    }  # fmt: skip
    pii_fp = sorted({f.rule for f in found if f.kind == "pii" and f.line not in set(secret_lines)})
    print(f"ftmanifest [{engine_name()}, {args.jobs} jobs]: {mb:.1f} MB in {dt:.2f}s = "
          f"{ftm_rate:.1f} MB/s, {len(found)} findings; {cpu:.2f} CPU s = "
          f"{mb / cpu:.1f} MB per CPU second")  # fmt: skip
    same = same_findings(found, args)
    print(f"  recall on {len(planted)} planted secrets {fmt_recall(recall(secret_lines, sec))}, "
          f"emails {fmt_recall(recall(secret_lines, email))}, "
          f"phones {fmt_recall(recall(secret_lines, phone))}; "
          f"secret findings on unplanted lines: {fp}")  # fmt: skip
    print("  hand-written forms: " + ", ".join(
        f"{name} {fmt_recall(recall(secret_lines, lines))}" for name, lines in forms.items()
    ) + f"; PII rules firing on unplanted lines: {pii_fp or 'none'}")  # fmt: skip
    one, one_cpu, _ = run_ftmanifest(big, 1, 1)
    print(f"  same file in-process on one core: {mb / one:.1f} MB/s, "
          f"{mb / one_cpu:.1f} MB per CPU second")  # fmt: skip

    with big.open("rb") as fh:
        data = fh.read(int(args.ds_mb * 1e6))
    sl = DATA / f"slice-{os.getpid()}.jsonl"  # concurrent runs share _data/
    sl.write_bytes(data[: data.rfind(b"\n") + 1])
    upto = sl.read_bytes().count(b"\n")
    ds_dt, ds_lines = run_detect_secrets(sl, args.jobs)
    ds_rate = sl.stat().st_size / 1e6 / ds_dt
    ds_recall = recall(secret_lines, ds_lines, upto)
    ftm_recall = recall(secret_lines, sec, upto)
    ds_fp = len(ds_lines - set(secret_lines))
    print(f"detect-secrets [{args.jobs} processes]: {sl.stat().st_size / 1e6:.1f} MB in "
          f"{ds_dt:.1f}s = {ds_rate:.2f} MB/s, recall on the slice {fmt_recall(ds_recall)} "
          f"(ftmanifest {fmt_recall(ftm_recall)}); findings on unplanted lines: {ds_fp}")  # fmt: skip  # noqa: E501
    sl.unlink()
    ratio = ftm_rate / ds_rate
    print(f"ratio: {ratio:.0f}x")
    per, (flagged, negatives) = measure_families()
    found, planted = sum(h for h, _ in per.values()), sum(n for _, n in per.values())
    print("secret families (documented formats, " + f"{planted} planted): " + ", ".join(
        f"{name} {fmt_recall(hn)}" for name, hn in per.items()
    ) + f"; overall {fmt_recall((found, planted))}, hard negatives flagged "
        f"{flagged}/{negatives}")  # fmt: skip
    regions, (phone_fp, phone_neg) = measure_phones()
    print("phones in labelled sentences: " + ", ".join(
        f"{r} {fmt_recall(hn)}" for r, hn in regions.items()
    ) + f"; ML-log negative lines flagged {phone_fp}/{phone_neg}")  # fmt: skip
    phones_ok = all(h >= 0.8 * n for h, n in regions.values()) and phone_fp <= 0.01 * phone_neg
    ok = (
        same
        and phones_ok
        and ftm_rate >= 50
        and ratio >= 100
        and ftm_recall[0] * ds_recall[1] >= ds_recall[0] * ftm_recall[1]
        and found >= 0.9 * planted
        and flagged <= 0.1 * negatives
    )
    print("targets (>= 50 MB/s, >= 100x, recall >= detect-secrets', families >= 90% with <= 10%"
          " of negatives flagged, phones >= 80% per region with <= 1% of log lines, findings"
          " as saved when compared):",
          "met" if ok else "MISSED")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
