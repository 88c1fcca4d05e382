"""Short names for runs that share most of their names (the runs of one condition: "c01-gshard-cf1.0-
batch-native", "c02-gshard-cf1.0-batch-native"...): the part that differs, and a key saying what the
rest is. No Qt here."""

from __future__ import annotations

import re
from collections.abc import Sequence

_PART = re.compile(r"[-_.]")


def _parts(name: str) -> list[str]:
    """`name` cut after each separator, keeping it: 'c01-gshard' -> ['c01-', 'gshard']."""
    out, start = [], 0
    for m in _PART.finditer(name):
        out.append(name[start:m.end()])
        start = m.end()
    out.append(name[start:])
    return [p for p in out if p]


def short_names(names: Sequence[str]) -> tuple[list[str], tuple[str, str] | None]:
    """(short names, key): each name without the leading and trailing parts every name shares, and
    the key (short, full name) of the first run (None, with the names unchanged, when nothing is
    shared or the short names would not tell the runs apart)."""
    names = list(names)
    if len(names) < 2:
        return names, None
    split = [_parts(n) for n in names]
    head = 0
    while all(len(p) > head + 1 for p in split) and len({p[head] for p in split}) == 1:
        head += 1
    tail = 0
    while all(len(p) > head + tail + 1 for p in split) and len({p[-1 - tail] for p in split}) == 1:
        tail += 1
    if head == 0 and tail == 0:
        return names, None
    shorts = ["".join(p[head:len(p) - tail]).strip("-_.") for p in split]
    if len(set(shorts)) < len(shorts) or not all(shorts):
        return names, None
    return shorts, (shorts[0], names[0])
