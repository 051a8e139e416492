"""``python -m ftmanifest.cli.reference``: rewrite docs/reference/ (``make docs``)."""

import sys

from ftmanifest.cli.reference import main

sys.exit(main())
