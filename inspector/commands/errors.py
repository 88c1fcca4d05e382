"""The error every command raises for a bad option value.

It lives apart from `inspector.cli` so that the class is one and the same whether the command line
runs as the `moe-inspector` script or as `python -m inspector.cli` (which imports the cli module a
second time, as `__main__`).
"""

from inspector.file_errors import is_open_error, open_error_sentence
from inspector.terminal import MAX_LINE, printable_line


class UsageError(Exception):
    """A bad option value; the command line prints it and exits with status 2."""


def message(exc: Exception) -> str:
    """The one line a command prints for `exc`: a file HDF5 cannot open (truncated, damaged) in the
    sentence the app shows; a trace error about the file as a whole names the file and what is wrong
    with it, without the root group ("/") it gives as where."""
    return printable_line(_message(exc), limit=2 * MAX_LINE)  # a sentence may quote a trace's strings


def _message(exc: Exception) -> str:
    path, where, expected = (getattr(exc, name, None) for name in ("path", "where", "expected"))
    if path and is_open_error(str(exc)):
        return open_error_sentence(str(path), str(exc), name=str(path))
    if where == "/" and path and expected:
        return f"{path}: {expected}"
    return str(exc)
