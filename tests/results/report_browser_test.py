"""The handoff page in a real headless browser: Debian's Chromium.

Renders the report, screenshots it and dumps its DOM, with Chromium's console
forwarded to stderr; a console message (a script error, a resource the CSP
blocked) fails the test.  A deliberately broken page proves the detector
sees such messages.  Chromium is installed by ``.ci/run``; here the test tries
``apt-get install -y chromium`` once, and skips, saying so, when it cannot.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import subprocess
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from ftmanifest.results.report import write_report
from tests.results.report_test import full_data, hostile_data

CHROMIUM = Path("/usr/bin/chromium")
WIDTH, HEIGHT = 1280, 2000
# Chromium's stderr lines for page console output and uncaught errors
_TRIED: list[bool] = []
_CONSOLE_MARKERS = ("CONSOLE", "Uncaught", "Content Security Policy")


def _chromium() -> Path:
    if CHROMIUM.exists():
        return CHROMIUM
    apt = shutil.which("apt-get")
    if apt and os.geteuid() == 0 and not _TRIED:
        _TRIED.append(True)  # once per test process
        # another worker may already be installing it: wait for that first
        for _ in range(36):
            if CHROMIUM.exists() or not _apt_busy():
                break
            time.sleep(5)
        if not CHROMIUM.exists():
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                subprocess.run(
                    [apt, "install", "-y", "chromium"],
                    capture_output=True,
                    timeout=180,
                    env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
                )
    if not CHROMIUM.exists():
        pytest.skip(
            "headless browser test needs Debian's chromium (/usr/bin/chromium); "
            "`apt-get install -y chromium` did not provide it here. "
            ".ci/run installs it in CI."
        )
    return CHROMIUM


def _apt_busy() -> bool:
    return any(
        Path(p).exists() and _locked(Path(p))
        for p in ("/var/lib/dpkg/lock-frontend", "/var/lib/apt/lists/lock")
    )


def _locked(path: Path) -> bool:
    import fcntl

    try:
        with path.open("rb") as fh:
            fcntl.lockf(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    return False


def _browse(page: Path, *mode: str, profile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(_chromium()),
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-sync",
            "--disable-component-update",
            f"--user-data-dir={profile}",
            f"--window-size={WIDTH},{HEIGHT}",
            "--enable-logging=stderr",
            "--v=0",
            "--log-level=0",
            *mode,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=20,
        cwd=page.parent,
    )


def _console_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if any(m in line for m in _CONSOLE_MARKERS)]


def _png_size_and_colours(png: Path) -> tuple[int, int, int]:
    """Width, height (from IHDR) and how many distinct bytes the image data has."""
    raw = png.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", raw[16:24])
    data, pos = b"", 8
    while pos < len(raw):
        (length,) = struct.unpack(">I", raw[pos : pos + 4])
        kind = raw[pos + 4 : pos + 8]
        if kind == b"IDAT":
            data += raw[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(data)))


@pytest.fixture
def profile() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="ftm-chromium-") as folder:
        yield Path(folder)


@pytest.mark.parametrize("data", [full_data(), hostile_data()], ids=["full", "hostile"])
def test_report_renders_in_headless_chromium(
    tmp_path: Path, profile: Path, data: dict[str, object]
) -> None:
    paths = write_report(data, tmp_path / "report")
    shot = tmp_path / "shot.png"
    done = _browse(paths.html, f"--screenshot={shot}", profile=profile)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _console_errors(done.stderr) == []
    width, height, values = _png_size_and_colours(shot)
    assert (width, height) == (WIDTH, HEIGHT)
    assert shot.stat().st_size > 20_000 and values > 16, "the screenshot looks blank"

    dom = _browse(paths.html, "--dump-dom", profile=profile)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert _console_errors(dom.stderr) == []
    for part in (
        '<section id="comparison">',
        '<svg class="chart"',
        'class="bar candidate',
        'class="tolerance"',
        '<section id="limits">',
        "</html>",
    ):
        assert part in dom.stdout, part
    assert "<script" not in dom.stdout


def test_the_detector_sees_console_errors(tmp_path: Path, profile: Path) -> None:
    """A control: a page that fails the way a broken report would is caught."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta http-equiv='Content-Security-Policy' "
        "content=\"default-src 'none'\"></head><body><p>x</p>"
        "<img src='missing.png'><script>throw new Error('kaput')</script></body></html>"
    )
    done = _browse(page, f"--screenshot={tmp_path / 'bad.png'}", profile=profile)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _console_errors(done.stderr), "Chromium's console output was not seen"
