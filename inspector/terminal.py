"""Text from a trace is text on a terminal: control characters escaped, long strings shortened.

A trace's strings (its producer, a run's name, label or condition, a request's text) come from
whoever wrote the file. Printed raw, an ESC sequence in one of them sets the terminal's title, clears
the screen or hides what follows; a bidirectional override reorders the line; a 1 MB run name
buries the rest. Every line a command prints from a trace goes through `printable`, and every text the
app's run table shows through `printable_line`.
"""

from __future__ import annotations

import re

#: Longest line printed whole; a longer one is cut and says how long it was.
MAX_LINE = 400

# C0 controls but tab, DEL, C1 controls (NEL among them), every Unicode bidirectional mark, embedding,
# override and isolate, and the line and paragraph separators (a line break to some terminals and to Qt).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable_line(line: str, limit: int = MAX_LINE) -> str:
    """One line with its unsafe characters escaped (ESC as `\\x1b`), shortened past `limit` characters."""
    line = _UNSAFE.sub(_escape, line)
    if len(line) <= limit:
        return line
    return f"{line[:limit]}… ({len(line)} characters)"


def printable(text: str, limit: int = MAX_LINE) -> str:
    """`text` line by line through `printable_line` (its line breaks kept)."""
    return "\n".join(printable_line(line, limit) for line in text.split("\n"))
