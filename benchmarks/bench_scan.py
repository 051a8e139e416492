"""Benchmark: ``ftmanifest scan`` vs detect-secrets on a chat-format JSONL.

Generates a ~100 MB JSONL (``--quick``: ~10 MB) of chat records with UUIDs,
digests, base64 images, code snippets and URLs, with secrets and personal data
planted at known lines; scans it with ftmanifest's engine (both cores) and a
10 MB slice with ``detect-secrets scan``; prints MB/s, the ratio and both
tools' recall on the planted secrets.
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
import tempfile
import time
import uuid
from pathlib import Path

from ftmanifest.scan.engine import ScanOptions, scan_paths
from ftmanifest.scan.text import engine_name

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
                    f" mail me at dev{line}@acme-corp.io or call +49 30 {line % 9000 + 1000} 5678"
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


def recall(planted: list[tuple[int, str]], lines: set[int], upto: int | None = None) -> float:
    items = [ln for ln, _ in planted if upto is None or ln <= upto]
    return sum(1 for ln in items if ln in lines) / max(1, len(items))


def run_ftmanifest(path: Path, jobs: int) -> tuple[float, set[int], int]:
    t0 = time.perf_counter()
    result = scan_paths([path], ScanOptions(jobs=jobs))
    dt = time.perf_counter() - t0
    lines = {f.line for f in result.findings if f.kind == "secret" and f.line}
    return dt, lines, len(result.findings)


def run_detect_secrets(path: Path) -> tuple[float, set[int]]:
    exe = Path(sys.executable).with_name("detect-secrets")
    t0 = time.perf_counter()
    out = subprocess.run(
        [str(exe), "scan", "--all-files", str(path.name)],
        cwd=path.parent, capture_output=True, text=True, check=True,
    )  # fmt: skip
    dt = time.perf_counter() - t0
    results = json.loads(out.stdout)["results"]
    return dt, {h["line_number"] for hits in results.values() for h in hits}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="~10 MB instead of ~100 MB")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--ds-mb", type=float, default=10.0, help="detect-secrets slice size (MB)")
    args = ap.parse_args()
    size = (10 if args.quick else 100) << 20
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp, "chat.jsonl")
        t0 = time.perf_counter()
        planted = generate(big, size, every=400)
        print(f"generated {big.stat().st_size / 1e6:.1f} MB, {len(planted)} planted secrets "
              f"in {time.perf_counter() - t0:.1f}s")  # fmt: skip
        mb = big.stat().st_size / 1e6
        dt, lines, nfind = run_ftmanifest(big, args.jobs)
        ftm_rate = mb / dt
        print(f"ftmanifest [{engine_name()}, {args.jobs} jobs]: {mb:.1f} MB in {dt:.2f}s = "
              f"{ftm_rate:.1f} MB/s, {nfind} findings, recall {recall(planted, lines):.3f}")  # fmt: skip  # noqa: E501
        # detect-secrets on a slice cut at a line boundary
        data = big.read_bytes()[: int(args.ds_mb * 1e6)]
        data = data[: data.rfind(b"\n") + 1]
        sl = Path(tmp, "slice.jsonl")
        sl.write_bytes(data)
        upto = data.count(b"\n")
        ds_dt, ds_lines = run_detect_secrets(sl)
        ds_rate = len(data) / 1e6 / ds_dt
        _, sl_lines, _ = run_ftmanifest(sl, args.jobs)
        print(f"detect-secrets: {len(data) / 1e6:.1f} MB in {ds_dt:.1f}s = {ds_rate:.2f} MB/s, "
              f"recall on slice {recall(planted, ds_lines, upto):.3f} "
              f"(ftmanifest on same slice {recall(planted, sl_lines, upto):.3f})")  # fmt: skip
        print(f"ratio: {ftm_rate / ds_rate:.0f}x")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
