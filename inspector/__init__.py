"""The desktop app, the figure export and the `moe-inspector` command line.

Run as the installed `moe-inspector` script, the package notes Ctrl-C and SIGTERM on its first line,
before its command line module is even found (`inspector.cli` takes over from there).
"""

import os as _os
import signal as _signal
import sys as _sys


def stop_at_once(signum, frame) -> None:
    """Ctrl-C or SIGTERM before a command runs (Python starting, the imports, the options read):
    nothing is under way yet, so one line and the signal's exit status, never a traceback."""
    _os.write(2, b"moe-inspector: interrupted\n")
    _os._exit(128 + signum)


if _os.path.basename(_sys.argv[0] if _sys.argv else "") == "moe-inspector":
    for _number in (_signal.SIGINT, _signal.SIGTERM):
        _signal.signal(_number, stop_at_once)
