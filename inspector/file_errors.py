"""The sentence about a trace file that cannot be opened, shared by the app's dialog and the command line.

The reader's message names the path, HDF5's object path ("/: ") and h5py's raw wording; a user gets
one sentence about the file instead. No Qt here: `info` prints the same sentence the app shows.
"""

from __future__ import annotations

import os
import re

_TRUNCATED = re.compile(r"truncated file: eof = (\d+).*stored_eof = (\d+)")
_H5PY_OPEN = re.compile(r"found OSError: Unable to (?:synchronously )?open file \((.*)\)")


def is_open_error(message: str) -> bool:
    """Whether `message` is HDF5's refusal to open a file (truncated, damaged), not a trace problem."""
    return bool(_TRUNCATED.search(message) or _H5PY_OPEN.search(message))


def open_error_sentence(path: str, message: str, name: str | None = None) -> str:
    """The reader's `message` on `path` as one sentence about the file, called `name` (default: its
    base name): without the repeated path and root group, h5py's wording turned into plain words."""
    name = name or os.path.basename(path.rstrip("/")) or path
    text = message.strip()
    for prefix in (f"{path}: ", "/: "):
        text = text.removeprefix(prefix)
    truncated = _TRUNCATED.search(text)
    if truncated:
        have, want = (int(g) for g in truncated.groups())
        return (f"{name} is truncated: it holds {have:,} bytes of the {want:,} its header announces "
                f"(a copy or a recording that did not finish). Copy the whole file again.")
    text = _H5PY_OPEN.sub(lambda m: f"found a damaged HDF5 file ({m.group(1)})", text)
    return f"{name} cannot be opened: {text.rstrip('.')}."
