"""Names and versions read from the metadata's header block are the ones
``importlib.metadata`` gives, on every installed distribution and on odd files."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

from ftmanifest.probe.packages import name_version


def test_every_installed_distribution_reads_as_importlib_metadata_reads_it() -> None:
    dists = list(metadata.distributions())
    assert len(dists) > 20
    for dist in dists:
        assert name_version(dist) == (dist.metadata["Name"], dist.version), dist._path  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "text",
    [
        "Metadata-Version: 2.1\nName: plain\nVersion: 1.0\n\nName: not-this\n",
        "Metadata-Version: 2.1\r\nName: crlf\r\nVersion: 2.0\r\n\r\nbody\r\n",
        "Name:   spaced  \nVersion:1.0\t\n",
        "Metadata-Version: 2.1\nname: lower\nVERSION: 3\nName: second\n",
        "Metadata-Version: 2.1\nName: folded\n  -name\nVersion: 1\n",
        "Metadata-Version: 2.1\nSummary: a\n  folded summary\nName: after\nVersion: 1\n",
        "Metadata-Version: 2.1\nName: no-version\n\nVersion: 9\n",
        "Metadata-Version: 2.1\n\nName: in-body\nVersion: 1\n",
        "",
    ],
)
def test_odd_header_blocks_read_as_the_email_parser_reads_them(tmp_path: Path, text: str) -> None:
    info = tmp_path / "odd-1.dist-info"
    info.mkdir()
    (info / "METADATA").write_bytes(text.encode())
    dist = metadata.PathDistribution(info)
    assert name_version(dist) == (dist.metadata["Name"], dist.version)
