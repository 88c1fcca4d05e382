"""`moe-inspector info FILE`: print a summary of a trace (no Qt, no torch)."""

from __future__ import annotations

import argparse
import sys

from inspector.commands.errors import message
from inspector.terminal import printable
from traces import TraceError, open_trace, validate
from traces.summary import describe


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="trace file (.h5) to describe")
    parser.add_argument("--check", action="store_true",
                        help="also read every dataset of every run and list every problem found")


def run(args: argparse.Namespace) -> int:
    """Print the summary; exit status 2 with a one-line message when the file is unusable."""
    try:
        with open_trace(args.file) as trace:
            trace.check_contained()  # info vouches for the whole file, every run included
            print(printable(describe(trace)))
    except TraceError as exc:
        print(f"moe-inspector info: error: {message(exc)}", file=sys.stderr)
        return 2
    if args.check:
        problems = validate(args.file, read_data=True)
        for problem in problems:
            print(printable(str(problem)))
        errors = sum(p.severity == "error" for p in problems)
        print(f"check: {errors} errors, {len(problems) - errors} warnings")
        return 2 if errors else 0
    return 0
