"""``python -m ftmanifest.cli.reference``: rewrite docs/reference/ (``make docs``).

Layer: commands - the reference generator's entry point; nothing imports it.
"""

import sys

from ftmanifest.cli.reference import main

sys.exit(main())
