"""Export every view of the shipped example at a journal column into docs/figures (the pictures
docs/export.md shows), through the export command itself, with nothing else chosen: the commands
are `commands()`, the list docs/export.md prints (tests/test_inspector_gallery.py holds them equal).

    python scripts/export_gallery.py
"""

from __future__ import annotations

import os
from pathlib import Path

from inspector.cli import main
from inspector.specs.registry import SPECS

ROOT = Path(__file__).resolve().parents[1]
#: The trace and the folder, relative to the repository's root (as docs/export.md writes them).
TRACE = "traces/examples/example.h5"
FOLDER = "docs/figures"


def commands() -> list[list[str]]:
    """The `moe-inspector` arguments of each picture, in the registry's order of views."""
    return [["export", TRACE, "--view", view, "--size", "column", "-o", f"{FOLDER}/{view}-column.png"]
            for view in SPECS]


def gallery() -> int:
    os.chdir(ROOT)
    (ROOT / FOLDER).mkdir(parents=True, exist_ok=True)
    for argv in commands():
        code = main(argv)
        if code:
            return code
    return 0


if __name__ == "__main__":
    raise SystemExit(gallery())
