"""The example traces that ship with the package, and where they live."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import traces


@dataclass(frozen=True)
class Example:
    """One shipped trace: its menu title, its file name under `traces/examples/` and what it shows."""

    title: str
    filename: str
    about: str

    @property
    def path(self) -> Path:
        return examples_dir() / self.filename


#: The shipped examples, the first being the one the app opens on first launch.
EXAMPLES = (
    Example("Byte-level model: capacity divergences", "example.h5",
            "The shipped 3.4 M-parameter byte-level model in float32: one probe in 30 batch "
            "compositions; its completions differ through capacity drops."),
    Example("Tiny Mixtral in bfloat16: capacity and numerics", "tiny-mixtral-bf16.h5",
            "A random-initialised Mixtral-shaped Hugging Face model in bfloat16, with subword tokens: "
            "the probe diverges through capacity drops and, dropless, through kernel rounding "
            "between batch shapes."),
)


def examples_dir() -> Path:
    """`traces/examples/` inside the installed `traces` package."""
    return Path(traces.__file__).parent / "examples"


def example_path() -> Path:
    """The trace the app opens on first launch."""
    return EXAMPLES[0].path


def example_note(path: Path) -> str | None:
    """Why the window is empty when the example is missing (None when it exists)."""
    if path.exists():
        return None
    return (f"The example trace is not installed yet (expected at {path}). Record one with "
            "`moe-inspector record`, or open any trace file.")
