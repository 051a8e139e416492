"""Labelled sentences with phone numbers, per region, and hard negatives from ML logs.

Numbers are drawn valid for their region (``phonenumbers.is_valid_number``)
from its fixed-line and mobile examples with the last digits changed, and
written the ways people write them: the library's international and national
forms, dashes, dots, no separators after a phone word, a ``(0)`` trunk after
the country code, and extensions.  The negatives are the digit runs ML logs
are full of.  ``measure()`` returns recall per region and how many negative
lines were flagged.
"""

from __future__ import annotations

import random
import re

REGIONS = ("US", "IN", "BR", "FR", "GB", "DE")
TEMPLATES = (
    "You can reach me at {p} after 6pm.",
    "Call {p} to reschedule the delivery.",
    "My number is {p}, text me when you arrive.",
    "Contact the clinic on {p} for results.",
    "phone: {p}",
    "Please ring {p} if the parcel is damaged.",
)
NEGATIVES = (
    "step 120000 | loss 0.23451 | lr 2.0e-04 | grad_norm 1.2345",
    "epoch 3/10 - 12345/98765 [====>....] eta 0:12:34",
    "2026-11-30 12:34:56,789 INFO trainer: saving checkpoint-12000",
    "torch==2.13.0 transformers==4.57.1 peft==0.21.2 numpy==2.3.4",
    "seed 1234567890 data_seed 9876543210 world_size 8",
    "sha256:3f786850e387550fdab836ed7e6dc881de23001b1c9a6b1e",
    "tokens 4096 8192 16384 32768 65536 131072",
    "run id 20261130-123456-7890, job 4412345678",
    "throughput 12345.67 tokens/s, 1234567 samples, 98.76% util",
    "port 8080 pid 123456 uid 1000 gid 1000 inode 1234567890",
    "batch [0, 1, 2, 3] labels [101, 2023, 2003, 1037, 3231, 102]",
    "eval/f1 0.8765 eval/precision 0.9012 eval/recall 0.8543 at 12000",
    '{"text": "2015550123", "label": 3}',
    "ring buffer 2015550123 entries, text 4155550199 bytes",
    "number of rows 2015550123, call_count 4155550199",
    "0009 ; [*0201.0020.0002]",
)


def _numbers(rng: random.Random, region: str, n: int) -> list[object]:
    import phonenumbers as pn

    out: list[object] = []
    kinds = (pn.PhoneNumberType.MOBILE, pn.PhoneNumberType.FIXED_LINE)
    while len(out) < n:
        base = pn.example_number_for_type(region, rng.choice(kinds))
        digits = str(base.national_number)
        tail = "".join(rng.choice("0123456789") for _ in range(3))
        candidate = pn.parse(digits[:-3] + tail, region)
        if pn.is_valid_number(candidate):
            out.append(candidate)
    return out


def _spellings(rng: random.Random, number: object) -> list[str]:
    import phonenumbers as pn

    intl = pn.format_number(number, pn.PhoneNumberFormat.INTERNATIONAL)
    national = pn.format_number(number, pn.PhoneNumberFormat.NATIONAL)
    e164 = pn.format_number(number, pn.PhoneNumberFormat.E164)
    code = str(number.country_code)  # type: ignore[attr-defined]
    rest = intl.split(" ", 1)[1]
    trunk = "(0)" + rest if code in ("33", "44", "49") else rest
    return [
        intl,
        national,
        e164,
        intl.replace(" ", "-"),
        re.sub(r"[\s\-]+", ".", national.replace("(", "").replace(") ", ".")),
        re.sub(r"\D", "", national),
        f"+{code} {trunk}",
        f"{national} x{rng.randint(10, 999)}",
    ]


def corpus(per_region: int = 10, seed: int = 5) -> dict[str, list[str]]:
    rng = random.Random(seed)
    out: dict[str, list[str]] = {}
    for region in REGIONS:
        lines = []
        for number in _numbers(rng, region, per_region):
            for spelling in _spellings(rng, number):
                lines.append(rng.choice(TEMPLATES).format(p=spelling))
        out[region] = lines
    return out


def measure(per_region: int = 10) -> tuple[dict[str, tuple[int, int]], tuple[int, int]]:
    """(region -> (found, lines)), (negative lines flagged, negative lines)."""
    from ftmanifest.scan.text.text import scan_text

    def phone(text: str) -> bool:
        return any(f.rule.startswith("pii.phone") for f in scan_text(text, path="c", secrets=False))

    per = {r: (sum(phone(t) for t in lines), len(lines)) for r, lines in corpus(per_region).items()}
    return per, (sum(phone(t) for t in NEGATIVES), len(NEGATIVES))
