"""Phone regions are a scan option: on the command line, in the cache key, checked early."""

from __future__ import annotations

from pathlib import Path

from ftmanifest.scan.cache import scan_cached
from ftmanifest.scan.engine import ScanOptions
from tests.conftest import run_cli

UK = "call me on 020 7946 0958 tomorrow\n"


def test_the_regions_decide_and_the_cache_keeps_them_apart(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text(UK)
    cache = tmp_path / "cache"
    gb = scan_cached([path], ScanOptions(jobs=1, phone_regions=("GB",)), cache_dir=cache)
    us = scan_cached([path], ScanOptions(jobs=1, phone_regions=("US",)), cache_dir=cache)
    again = scan_cached([path], ScanOptions(jobs=1, phone_regions=("GB",)), cache_dir=cache)
    assert [f.rule for f in gb.findings] == ["pii.phone-national"]
    assert us.findings == []  # not GB's cached answer
    assert [f.rule for f in again.findings] == ["pii.phone-national"]


def test_cli_flag_and_a_bad_region(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text(UK)
    assert run_cli("scan", str(path), "--phone-regions", "US").returncode == 0
    assert run_cli("scan", str(path), "--phone-regions", "GB,US").returncode == 1
    bad = run_cli("scan", str(path), "--phone-regions", "XX")
    assert bad.returncode == 2 and "unknown phone region" in bad.stderr
    env_bad = run_cli("scan", str(path), env={"FTMANIFEST_PHONE_REGIONS": "ZZ"})
    assert env_bad.returncode == 2 and "FTMANIFEST_PHONE_REGIONS" in env_bad.stderr
    assert "Traceback" not in bad.stderr + env_bad.stderr


def test_a_scan_with_regions_leaves_the_process_default_alone(tmp_path: Path) -> None:
    from ftmanifest.scan.text import phones

    before = phones.regions()
    path = tmp_path / "notes.txt"
    path.write_text(UK)
    scan_cached([path], ScanOptions(jobs=1, phone_regions=("FR",)), use_cache=False)
    assert phones.regions() == before
