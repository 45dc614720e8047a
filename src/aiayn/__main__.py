"""`python -m aiayn <command>`: see `aiayn.cli`."""

import sys

from aiayn.cli import main

sys.exit(main(process=True))
