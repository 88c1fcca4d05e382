"""The data behind a figure as CSV: one header row, one row per table row, numbers written so that
they read back to the very values of the trace (shortest round-trip text of their own dtype)."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping

import numpy as np


class TableError(ValueError):
    """Columns that do not make a table (different lengths, not 1-D)."""


def column_text(values: np.ndarray) -> list[str]:
    """Each value as text: booleans `true`/`false`, integers as integers, floats in the shortest
    form that reads back to the same float of their dtype (float32 stays float32), `nan`, `inf`."""
    values = np.asarray(values)
    if values.ndim != 1:
        raise TableError(f"a column must be 1-D, got shape {values.shape}")
    if values.dtype == bool:
        return ["true" if v else "false" for v in values.tolist()]
    if values.dtype.kind in "iu":
        return [str(v) for v in values.tolist()]
    if values.dtype.kind == "f":
        return values.astype(str).tolist()
    if values.dtype.kind == "O":
        return [_object_text(v) for v in values.tolist()]
    return values.astype(str).tolist()


def _object_text(value: object) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)):
        return str(np.asarray(value).astype(str))
    return str(value)


def csv_text(columns: Mapping[str, np.ndarray]) -> str:
    """The table as CSV text (`\\n` line ends, fields quoted only when needed)."""
    names = list(columns)
    texts = [column_text(columns[name]) for name in names]
    lengths = {len(t) for t in texts}
    if len(lengths) > 1:
        raise TableError("columns of different lengths: "
                         + ", ".join(f"{n}={len(t)}" for n, t in zip(names, texts, strict=True)))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(names)
    writer.writerows(zip(*texts, strict=True))
    return out.getvalue()


def write_csv(columns: Mapping[str, np.ndarray], path: str | os.PathLike) -> None:
    """Write the table to `path` as UTF-8 CSV."""
    text = csv_text(columns)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
