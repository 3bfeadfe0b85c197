"""``python -m lnn`` runs the command line."""

import sys

from lnn.cli import main

sys.exit(main())
