"""Scanning data and artifacts for secrets, personal data and unsafe pickles.

Layer: judging rooms (the first, after signing).  ``scan_paths`` walks files and returns findings;
``scan_cached`` does the same but skips files whose digest was already
scanned with the same scanner and options (``verify``/``audit`` use it);
``scan_text`` scans one string (used by the pickle and safetensors scanners).
"""

from __future__ import annotations

from ftmanifest.scan.cache import scan_cached
from ftmanifest.scan.engine import ScanOptions, ScanResult, scan_paths
from ftmanifest.scan.text.text import scan_text

__all__ = ["ScanOptions", "ScanResult", "scan_cached", "scan_paths", "scan_text"]
