"""Plain-text result tables in Markdown pipe syntax, readable in a terminal and in the README alike."""

from __future__ import annotations

from collections.abc import Sequence


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A pipe table; cells are `str()`-ed, columns padded to their widest cell."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    n = len(header)
    bad = [i for i, row in enumerate(cells) if len(row) != n]
    if bad:
        raise ValueError(f"table row {bad[0] - 1} has {len(cells[bad[0]])} cells, the header {n}")
    widths = [max(len(row[j]) for row in cells) for j in range(n)]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def percent(x: float, digits: int = 1) -> str:
    return f"{100 * x:.{digits}f}%"


def ranges(values: Sequence[int]) -> str:
    """`[1, 2, 3, 5, 8, 9]` -> `1-3, 5, 8-9`."""
    vals = sorted(set(int(v) for v in values))
    parts: list[str] = []
    i = 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        parts.append(str(vals[i]) if i == j else f"{vals[i]}-{vals[j]}")
        i = j + 1
    return ", ".join(parts)
