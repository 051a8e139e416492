"""``python -m ftmanifest``.

Layer: commands.
"""

from ftmanifest.cli import entry

entry()
