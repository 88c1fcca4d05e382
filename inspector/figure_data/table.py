"""The table behind a figure, declared once: each column's name, type, meaning, unit and when its
field is empty, and the values of one export held against that declaration.

A CSV export (`inspector.export.csv`) writes only declared tables, checks every field against its
column's type, and leaves a missing value as an empty field, never a sentinel; docs/export.md lists
the same declarations (written by `scripts/csv_columns.py`, compared by the tests). A value is
missing where its array is masked (`numpy.ma`): `missing` and `finite` make such arrays. No Qt here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Column types: whole numbers, floats (shortest text that reads back to their own dtype),
#: `true`/`false`, and text.
INTEGER, NUMBER, BOOLEAN, TEXT = "integer", "number", "boolean", "text"
TYPES = (INTEGER, NUMBER, BOOLEAN, TEXT)


class TableError(ValueError):
    """Values that do not make the declared table (other columns, lengths, types or empty fields)."""


@dataclass(frozen=True)
class Column:
    """One column of a table: what a reader of the CSV needs to know about it."""

    name: str
    type: str          # one of TYPES
    meaning: str
    unit: str = ""     # '' for none (counts, ids, probabilities, words)
    empty: str = ""    # when the field is empty ('' : never)

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"column {self.name}: type {self.type!r} is not one of {', '.join(TYPES)}")


def missing(values, where) -> np.ma.MaskedArray:
    """`values` with the fields where `where` holds left empty."""
    return np.ma.masked_array(np.asarray(values), mask=np.asarray(where, dtype=bool))


def finite(values) -> np.ma.MaskedArray:
    """Float `values` with every NaN or infinity left empty."""
    values = np.asarray(values)
    return missing(values, ~np.isfinite(values))


@dataclass(frozen=True, eq=False)
class Table(Mapping):
    """The declared `columns` and one array of values per column, in the declared order."""

    columns: tuple[Column, ...]
    values: dict[str, np.ndarray]

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        if list(self.values) != names:
            extra = [n for n in self.values if n not in names]
            absent = [n for n in names if n not in self.values]
            raise TableError("the values do not match the declared columns"
                             + (f"; undeclared: {', '.join(extra)}" if extra else "")
                             + (f"; not given: {', '.join(absent)}" if absent else "")
                             + ("; out of order" if not extra and not absent else ""))
        lengths = {name: np.shape(v) for name, v in self.values.items()}
        if any(len(shape) != 1 for shape in lengths.values()) or len({s for s in lengths.values()}) > 1:
            raise TableError("columns must be 1-D of one length: "
                             + ", ".join(f"{n} {s}" for n, s in lengths.items()))

    def __getitem__(self, name: str) -> np.ndarray:
        return self.values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    @property
    def n_rows(self) -> int:
        return len(next(iter(self.values.values()))) if self.values else 0


@dataclass(frozen=True)
class TableSpec:
    """A view's table: its declared columns (context first), what one row is, and the function that
    gives their values from the view's figure data and selection."""

    columns: tuple[Column, ...]
    rows: str                                      # 'one row per (position, expert)'
    values: Callable[[Any, Any], dict[str, np.ndarray]]

    def __call__(self, data, sel) -> Table:
        return Table(self.columns, self.values(data, sel))


# -- columns several tables share ---------------------------------------------------------------------

RUN = Column("run", TEXT, "name of the run")
REQUEST = Column("request", INTEGER, "request id (its prompt: /requests in the trace)")
ROW = Column("row", INTEGER, "batch row of the run holding the request")
LAYER = Column("layer", INTEGER, "MoE layer index (0 = the model's first MoE layer)")
MODEL_LAYER = Column("model_layer", INTEGER, "the model's own number of that MoE layer")
POSITION = Column("position", INTEGER, "position in the sequence (0 = the first prompt token)")
GENERATED = Column("generated", BOOLEAN, "the token was generated (false: a prompt token)")
TOKEN_ID = Column("token_id", INTEGER, "token id at the position (the trace's tokens)")
TOKEN = Column("token", TEXT, "display text of the token: line breaks, tabs and control characters "
                              "as visible signs, an empty token as ∅, an id outside the vocabulary in "
                              "angle brackets (token_id is the exact token)")
#: A position of one row: where it is, whether it was generated, its token.
POSITION_COLUMNS = (POSITION, GENERATED, TOKEN_ID, TOKEN)
NOT_RECORDED = Column("not_recorded", TEXT,
                      "the trace data behind this row's empty fields that the run does not hold, space "
                      "separated: routing/router_logits, routing/gate, routing/slot (datasets a serving "
                      "engine leaves out: the run's not_recorded attribute), logits (the next-token "
                      "logits at this position)", empty="every field of the row was recorded")


def not_recorded(flags: Mapping[str, np.ndarray]) -> np.ndarray:
    """[n] the values of `NOT_RECORDED`: per row, the names (keys of `flags`) whose [n] flag holds,
    space separated ('' none)."""
    names = list(flags)
    stacked = np.stack([np.asarray(flags[n], dtype=bool) for n in names], axis=-1)  # [n, names]
    combos, inverse = np.unique(stacked, axis=0, return_inverse=True)
    words = np.array([" ".join(n for n, f in zip(names, c, strict=True) if f) for c in combos], dtype=object)
    return words[inverse.reshape(-1)]


_DTYPES = {INTEGER: np.int64, NUMBER: np.float64, BOOLEAN: bool, TEXT: object}
_BLANK = {INTEGER: 0, NUMBER: 0.0, BOOLEAN: False, TEXT: ""}


def column_values(values: Sequence[object], column: Column) -> np.ma.MaskedArray:
    """Python values (None: empty) as an array of `column`'s type."""
    data = np.array([_BLANK[column.type] if v is None else v for v in values], dtype=_DTYPES[column.type])
    return missing(data, [v is None for v in values])
