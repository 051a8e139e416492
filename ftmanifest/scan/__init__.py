"""Scanning data and artifacts for secrets, personal data and unsafe pickles.

Layer: core API.  ``scan_paths`` walks files and returns findings;
``scan_text`` scans one string (used by the pickle and safetensors scanners).
"""

from __future__ import annotations

from ftmanifest.scan.engine import ScanOptions, ScanResult, scan_paths
from ftmanifest.scan.text import scan_text

__all__ = ["ScanOptions", "ScanResult", "scan_paths", "scan_text"]
