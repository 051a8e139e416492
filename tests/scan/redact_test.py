from __future__ import annotations

from ftmanifest.scan.redact import excerpt, fingerprint, redact_bytes


def test_fingerprint_keyed_and_rule_bound() -> None:
    import hashlib

    v = b"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"
    assert len(fingerprint("a", v)) == 32
    assert fingerprint("a", v) != fingerprint("b", v)
    assert fingerprint("a", v) not in hashlib.sha256(v).hexdigest()


def test_excerpt_short_values_keep_less() -> None:
    assert excerpt(b"abcdefgh") == "ab****…(8 chars)"


def test_redact_bytes_skips_overlaps() -> None:
    out = redact_bytes(b"0123456789", [(2, 5, "r"), (3, 6, "r")])
    assert out.startswith(b"01[REDACTED:r:") and out.endswith(b"]56789")
