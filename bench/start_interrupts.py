"""Ctrl-C (or SIGTERM) at a random moment from the start of `moe-inspector`: how many of N tries print
a traceback, print more than one line, or end with another status than 0 (finished first) or 130/143.
Each try starts the installed command line script in a child process and sends the signal after a
delay drawn uniformly from 0 (or --after) to MAX_DELAY_S (or --within): Python's start-up, the imports,
the command itself. A signal during Python's own start-up (its `site` module, the installed script's
import line) comes before the program's first line and takes Python's default action.

    PYTHONPATH=$PWD .venv/bin/python bench/start_interrupts.py [--tries 20] [--signal TERM] [ARGS...]
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "traces" / "examples" / "example.h5"
#: Latest moment a signal is sent, in seconds from the start (`info` of the example takes about one).
MAX_DELAY_S = 1.2


def one(argv: list[str], signum: int, delay: float) -> str:
    """What one interrupted run gave: "finished", "stopped", or what went wrong."""
    script = Path(sys.executable).parent / "moe-inspector"
    proc = subprocess.Popen([str(script), *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    time.sleep(delay)
    proc.send_signal(signum)
    err = proc.communicate(timeout=120)[1]
    if "Traceback" in err:
        print(f"after {delay:.3f} s:\n{err}", file=sys.stderr)
        return "traceback"
    if proc.returncode == 0:
        return "finished"
    if proc.returncode != 128 + signum:
        print(f"after {delay:.3f} s: status {proc.returncode}: {err}", file=sys.stderr)
        return f"status {proc.returncode}"
    return "stopped" if err.strip().count("\n") == 0 else "more than one line"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--signal", default="INT", choices=["INT", "TERM"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--after", type=float, default=0.0, help="earliest moment, in seconds (default 0)")
    parser.add_argument("--within", type=float, default=MAX_DELAY_S, help=f"latest moment (default "
                        f"{MAX_DELAY_S})")
    parser.add_argument("argv", nargs="*", default=["info", str(EXAMPLE)])
    args = parser.parse_args()
    signum = getattr(signal, f"SIG{args.signal}")
    rng = random.Random(args.seed)
    delays = [rng.uniform(args.after, args.within) for _ in range(args.tries)]
    found = collections.Counter(one(args.argv, signum, delay) for delay in delays)
    bad = sum(n for what, n in found.items() if what not in ("finished", "stopped"))
    print(f"{args.tries} SIG{args.signal} {args.after}-{args.within} s after the start of moe-inspector "
          f"{' '.join(args.argv[:1])}: {dict(found)}; {bad} bad (traceback, extra lines or another status)")


if __name__ == "__main__":
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    main()
