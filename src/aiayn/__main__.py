"""`python -m aiayn <command>`: see `aiayn.cli`."""

import signal
import sys

from aiayn.errors import stop_signal

for _sig in (signal.SIGTERM, signal.SIGHUP):  # from the start: a stop before the command begins is noted
    signal.signal(_sig, stop_signal)

from aiayn.cli import main  # noqa: E402

sys.exit(main(process=True))
