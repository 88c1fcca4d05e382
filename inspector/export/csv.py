"""The data behind a figure as CSV: one header row naming the view's declared columns
(`inspector.figure_data.table`), one row per table row, every field written as its column's type says:

- integer: digits (`4`, never `4.0`);
- number: the shortest text that reads back to the very value of its own dtype (float32 stays
  float32), never `nan` or `inf`;
- boolean: `true` or `false`;
- text: as it is (quoted when it holds a comma, quote or line break); rows end in `\r\n` (RFC 4180).

A missing value is an empty field, and only in a column that says when it is empty; a value of the
wrong type, or a NaN not marked missing, is a `TableError`, not a file. `columns_markdown` writes the
same declarations as docs/export.md lists them.
"""

from __future__ import annotations

import csv
import io
import os

import numpy as np

from inspector.figure_data.table import BOOLEAN, INTEGER, NUMBER, TEXT, Column, Table, TableError

__all__ = ["TableError", "column_text", "columns_markdown", "csv_text", "write_csv"]


def column_text(column: Column, values) -> list[str]:
    """Each value of `column` as its field's text ('' where missing); TableError for a value that is
    not of the column's type, or empty in a column that is never empty."""
    values = np.ma.asarray(values)
    if values.ndim != 1:
        raise TableError(f"column {column.name} must be 1-D, got shape {values.shape}")
    empty = np.ma.getmaskarray(values)
    data = np.ma.getdata(values)
    texts = _TEXTS[column.type](column, data, empty)
    blank = [e or t == "" for e, t in zip(empty.tolist(), texts, strict=True)]
    if any(blank) and not column.empty:
        raise TableError(f"column {column.name} has an empty field but is declared never empty")
    return ["" if b else t for b, t in zip(blank, texts, strict=True)]


def _wrong(column: Column, value: object) -> TableError:
    return TableError(f"column {column.name} ({column.type}) holds {value!r}")


def _integers(column: Column, data: np.ndarray, empty: np.ndarray) -> list[str]:
    if data.dtype.kind in "iu":
        return [str(v) for v in data.tolist()]
    out = []
    for value, gone in zip(data.tolist(), empty.tolist(), strict=True):
        ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
        if not (gone or ok):
            raise _wrong(column, value)
        out.append("" if gone else str(int(value)))
    return out


def _numbers(column: Column, data: np.ndarray, empty: np.ndarray) -> list[str]:
    if data.dtype.kind != "f":
        if data.size and not empty.all():
            raise _wrong(column, data[~empty][0])
        return [""] * data.size
    bad = ~np.isfinite(data) & ~empty
    if bad.any():
        raise TableError(f"column {column.name} holds {data[bad][0]} where a missing value must be empty")
    return data.astype(str).tolist()


def _booleans(column: Column, data: np.ndarray, empty: np.ndarray) -> list[str]:
    out = []
    for value, gone in zip(data.tolist(), empty.tolist(), strict=True):
        if not (gone or isinstance(value, (bool, np.bool_))):
            raise _wrong(column, value)
        out.append("" if gone else ("true" if value else "false"))
    return out


def _texts(column: Column, data: np.ndarray, empty: np.ndarray) -> list[str]:
    out = []
    for value, gone in zip(data.tolist(), empty.tolist(), strict=True):
        if not (gone or isinstance(value, str)):
            raise _wrong(column, value)
        out.append("" if gone else value)
    return out


_TEXTS = {INTEGER: _integers, NUMBER: _numbers, BOOLEAN: _booleans, TEXT: _texts}


def csv_text(table: Table) -> str:
    """The table as CSV text (RFC 4180: `\\r\\n` line ends, fields quoted only when needed). A line
    end of `\\r\\n` makes the writer quote a lone `\\r` too, which a reader would otherwise take for
    the end of the row."""
    if not isinstance(table, Table):
        raise TableError("only a declared table (inspector.figure_data.table.Table) is written as CSV")
    texts = [column_text(c, table[c.name]) for c in table.columns]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([c.name for c in table.columns])
    writer.writerows(zip(*texts, strict=True))
    return out.getvalue()


def write_csv(columns: Table, path: str | os.PathLike) -> None:
    """Write the table to `path` as UTF-8 CSV."""
    text = csv_text(columns)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def columns_markdown(specs) -> str:
    """The CSV columns of every view of `specs` (name -> ViewSpec) as docs/export.md lists them: a
    heading per view, what one row is, and a table of column, type, unit, meaning and when it is empty."""
    parts = []
    for name, spec in specs.items():
        table = spec.columns
        lines = [f"### `--view {name}`", "", f"{table.rows[:1].upper()}{table.rows[1:]}.", "",
                 "| column | type | unit | meaning | empty when |", "|---|---|---|---|---|"]
        for c in table.columns:
            cells = (f"`{c.name}`", c.type, c.unit, c.meaning, c.empty or "never")
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


#: The lines around the generated column lists in docs/export.md.
DOC_MARKERS = ("<!-- CSV columns: written by scripts/csv_columns.py from the views' declarations -->",
               "<!-- end of the CSV columns -->")


def doc_columns(doc: str) -> str:
    """The column lists between `DOC_MARKERS` in a docs/export.md text ('' when it has none)."""
    start, end = DOC_MARKERS
    if start not in doc or end not in doc:
        return ""
    return doc.split(start, 1)[1].split(end, 1)[0].strip("\n") + "\n"
