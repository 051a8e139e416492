"""backup create writes its common tar headers itself: byte for byte tarfile's."""

from __future__ import annotations

import random
import string
import tarfile

from ftmanifest.backup.create import _header, _ustar


def _tarfile(name: str, kind: bytes, mode: int, size: int, mtime: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size, info.mtime = kind, mode, size, mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "strict")


def test_the_fast_header_is_tarfiles() -> None:
    rng = random.Random(28)
    alphabet = string.ascii_letters + string.digits + " ._-/~=+,"
    cases = [("a", tarfile.REGTYPE, 0o644, 0, 0), ("x" * 100, tarfile.REGTYPE, 0o600, 1, 1),
             ("d" * 99, tarfile.DIRTYPE, 0o755, 0, 8**11 - 1),
             ("f", tarfile.REGTYPE, 0o4755, 8**11 - 1, 1_700_000_000)]  # fmt: skip
    for _ in range(500):
        kind = rng.choice([tarfile.REGTYPE, tarfile.DIRTYPE])
        name = "".join(rng.choices(alphabet, k=rng.randint(1, 100)))
        size = 0 if kind == tarfile.DIRTYPE else rng.choice([0, rng.randint(0, 8**11 - 1)])
        cases.append((name, kind, rng.randint(0, 0o7777), size, rng.randint(0, 8**11 - 1)))
    for case in cases:
        want = _tarfile(*case)
        if len(want) == 512:  # no pax record needed: the fast path's case
            assert _ustar(*case) == want, case
        assert _header(case[0], kind=case[1], mode=case[2], size=case[3], mtime=case[4]) == want


def test_what_needs_a_pax_record_goes_to_tarfile() -> None:
    for name, size, mtime in [("x" * 101, 1, 1), ("é.txt", 1, 1), ("a", 8**11, 1),
                              ("a", 1, 8**11), ("d" * 100 + "/", 0, 1)]:  # fmt: skip
        assert _ustar(name, tarfile.REGTYPE, 0o644, size, mtime) is None
        assert _header(name, kind=tarfile.REGTYPE, mode=0o644, size=size, mtime=mtime) == (
            _tarfile(name, tarfile.REGTYPE, 0o644, size, mtime)
        )
    assert _ustar("d" * 100, tarfile.DIRTYPE, 0o755, 0, 1) is None  # 101 with its slash
