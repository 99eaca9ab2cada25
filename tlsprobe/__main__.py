"""`python -m tlsprobe` runs the command line."""

import sys

from tlsprobe.cli import main

sys.exit(main())
