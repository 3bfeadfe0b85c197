"""``python -m lnn.cli`` runs the command line, as ``python -m lnn`` does."""

import sys

from lnn.cli import main

sys.exit(main())
