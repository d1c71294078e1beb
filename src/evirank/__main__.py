"""``python -m evirank`` runs the command line."""

import sys

from evirank.cli import main

sys.exit(main())
