"""``ftmanifest.hashing.digests``: the tree digest's documented encoding (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ftmanifest.errors import InputError
from ftmanifest.hashing.digests import (
    tree_digest,
)
from tests.hashing.conftest import EMPTY_SHA256, sha


def test_tree_digest_follows_the_documented_encoding() -> None:
    files = {"b.txt": sha(b"b"), "a/x.bin": sha(b"x"), "a-b": sha(b"")}
    # '-' (0x2d) sorts before '/' (0x2f): flat byte order, not per-folder order.
    want = b"".join(f"{k}\0{files[k]}\n".encode() for k in ["a-b", "a/x.bin", "b.txt"])
    assert tree_digest(files) == sha(want)
    assert tree_digest({}) == EMPTY_SHA256


def test_tree_digest_sorts_by_utf8_bytes() -> None:
    files = {"\uff41": sha(b"1"), "\U0001f600": sha(b"2"), "z": sha(b"3")}
    order = sorted(files, key=lambda k: k.encode("utf-8"))
    want = b"".join(k.encode() + b"\0" + files[k].encode() + b"\n" for k in order)
    assert tree_digest(files) == sha(want)


@pytest.mark.parametrize("rel", ["", "/abs", "a//b", "a/", "./a", "a/../b", "nul\0"])
def test_tree_digest_refuses_bad_paths(rel: str) -> None:
    with pytest.raises(InputError):
        tree_digest({rel: EMPTY_SHA256})


@pytest.mark.parametrize("digest", ["", "e3b0", "sha256:XYZ", "sha256:ab\n", "SHA256:ab"])
def test_tree_digest_refuses_bad_digests(digest: str) -> None:
    with pytest.raises(InputError):
        tree_digest({"a": digest})


_names = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0"), min_size=1
)
_rel = st.lists(_names.filter(lambda s: s not in (".", "..")), min_size=1, max_size=3).map("/".join)
_dig = st.binary(max_size=8).map(sha)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(_rel, _dig, min_size=1, max_size=8), st.randoms())
def test_tree_digest_properties(files: dict[str, str], rnd) -> None:  # type: ignore[no-untyped-def]
    items = list(files.items())
    rnd.shuffle(items)
    base = tree_digest(files)
    assert tree_digest(dict(items)) == base  # insertion order does not matter
    key = items[0][0]
    assert tree_digest({**files, key: sha(files[key].encode())}) != base  # content counts
    renamed = {(k + "_" if k == key else k): v for k, v in files.items()}
    if len(renamed) == len(files):
        assert tree_digest(renamed) != base  # names count
