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


def test_redacted_copy_goes_through_the_one_atomic_writer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from ftmanifest.errors import RefusedError
    from ftmanifest.fsutil import WriteError
    from ftmanifest.scan.redact import write_copy

    dest = tmp_path / "deep" / "copy.txt"
    write_copy(dest, b"redacted\n")
    assert dest.read_bytes() == b"redacted\n" and dest.stat().st_mode & 0o777 == 0o600
    with pytest.raises(RefusedError):
        write_copy(dest, b"again\n")
    with pytest.raises(WriteError) as err:  # a /proc folder takes no new files: exit 2
        write_copy(__import__("pathlib").Path("/proc/self/ftm-test/copy.txt"), b"x")
    assert err.value.exit_code == 2 and err.value.path == "/proc/self/ftm-test/copy.txt"
    assert err.value.hint and "choose another path" in err.value.hint
