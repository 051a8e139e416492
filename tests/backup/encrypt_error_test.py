"""An age failure while encrypting is unusable input with its fields, not a bug (exit 2)."""

from __future__ import annotations

import os
from typing import IO

import pytest

from ftmanifest.backup.create import _encrypt
from ftmanifest.backup.errors import BackupInputError, EncryptFailedError
from ftmanifest.errors import EXIT_INPUT


def test_a_recipient_age_refuses_is_an_encrypt_failed_error(tmp_path) -> None:
    def produce(out: IO[bytes]) -> None:
        out.write(b"x" * 1024)

    fd = os.open(tmp_path / "out.age", os.O_RDWR | os.O_CREAT, 0o600)
    with pytest.raises(EncryptFailedError) as caught:
        _encrypt(produce, ["age1-not-a-recipient"], fd)
    os.close(fd)
    exc = caught.value
    assert isinstance(exc, BackupInputError) and isinstance(exc, RuntimeError)
    assert exc.exit_code == EXIT_INPUT and exc.reason == "encrypt-failed"
    assert exc.field == "-r" and exc.expected and exc.observed and exc.hint
    assert exc.to_dict()["reason"] == "encrypt-failed"
