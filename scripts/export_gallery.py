"""Export every view of the shipped example at a journal column into docs/figures (the pictures
docs/export.md shows), through the export command itself.

    python scripts/export_gallery.py
"""

from __future__ import annotations

from pathlib import Path

from inspector.cli import main
from inspector.specs.registry import SPECS

ROOT = Path(__file__).resolve().parents[1]


def gallery() -> int:
    out = ROOT / "docs" / "figures"
    out.mkdir(parents=True, exist_ok=True)
    for view in SPECS:
        code = main(["export", str(ROOT / "traces" / "examples" / "example.h5"), "--view", view,
                     "--size", "column", "--dpi", "150", "-o", str(out / f"{view}-column.png")])
        if code:
            return code
    return 0


if __name__ == "__main__":
    raise SystemExit(gallery())
