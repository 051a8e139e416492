"""``python -m ftmanifest``."""

from ftmanifest.cli import entry

entry()
