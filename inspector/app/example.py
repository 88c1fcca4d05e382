"""Where the example trace that ships with the package lives."""

from __future__ import annotations

from pathlib import Path

import traces


def example_path() -> Path:
    """`traces/examples/example.h5` inside the installed `traces` package."""
    return Path(traces.__file__).parent / "examples" / "example.h5"


def example_note(path: Path) -> str | None:
    """Why the window is empty when the example is missing (None when it exists)."""
    if path.exists():
        return None
    return (f"The example trace is not installed yet (expected at {path}). Record one with "
            "`moe-inspector record`, or open any trace file.")
