"""`python -m gnnforge` runs the `gnnforge` command."""

import sys

from gnnforge.cli import main

sys.exit(main())
