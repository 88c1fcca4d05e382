"""The one error type for trace files that cannot be used."""

from __future__ import annotations

import os


class TraceError(Exception):
    """A trace file is unusable: the message names the file, the path inside it and what was expected.

    `str(err)` reads like `"trace.h5: /runs/r3/routing/kept: expected dataset of dtype bool, found
    float32"`; `where` is `"/"` for problems with the file as a whole.
    """

    def __init__(self, path: str | os.PathLike, where: str, expected: str) -> None:
        self.path = os.fspath(path)
        self.where = where or "/"
        self.expected = expected
        super().__init__(f"{self.path}: {self.where}: {self.expected}")

    def __reduce__(self):
        # Keep the three fields when the error crosses a process boundary.
        return (type(self), (self.path, self.where, self.expected))


class RecordError(TraceError, ValueError):
    """What a producer gave the writer breaks a record's rule (`traces/records.py`): the message is the
    validator's for the same attributes in a file. A `ValueError` too, as every other bad argument of
    the writer is."""
