"""The run browser's columns, each declared once: its title, header tip, width, what a cell shows,
how it sorts, its tooltip and alignment. No Qt: the app's table model reads these records."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from inspector.figure_data.browser import Mark, RunInfo, RunStats


@dataclass(frozen=True)
class Row:
    """What a column reads of one run: its attributes, its summary (None until read), its mark and
    reference, and its place in the listing."""

    info: RunInfo
    stats: RunStats | None
    mark: Mark
    reference: str
    order: int


def _none(row: Row) -> None:
    return None


@dataclass(frozen=True)
class Column:
    """One column of the run browser."""

    title: str
    tip: str                                    # the header's tooltip
    width: int                                  # pixels at first show
    value: Callable[[Row], object]              # what the cell shows
    sort_key: Callable[[Row], object] | None = None   # how it sorts (default: `value`)
    tooltip: Callable[[Row], str | None] = _none
    align: str = "left"                         # "left" or "right"
    summarised: bool = False   # needs the run's summary: shows '…' (sorts first) until it is read
    alert: Callable[[Row], bool] | None = None   # when the cell is drawn in the alert colour

    def sort_value(self, row: Row):
        return (self.sort_key or self.value)(row)


def _run_tip(row: Row) -> str:
    info = row.info
    return f"{info.name}\n{info.label}\ncondition: {info.condition or '(none)'}"


def _reference_tip(row: Row) -> str:
    info = row.info
    if row.reference == info.name:
        return (f"the reference of request {info.focus_request} in condition "
                f"{info.condition or '(none)'}: its other runs are compared with this one")
    return f"reference: {row.reference} (the first run of request {info.focus_request} in this condition)"


def _drops(row: Row) -> str:
    return f"{row.stats.batch_dropped} ({row.stats.drop_rate:.1%})"


# The columns a user compares runs by come first; the composition details follow. The condition
# is each group's heading.
RUN = Column("run", "run name (hover for the whole name and its label)", 190, lambda r: r.info.name,
             tooltip=_run_tip)
ORDER = Column("#", "write order of the run in the file", 36, lambda r: r.info.index,
               # By the listing's write order, known before the run is read: a summary arriving then
               # never moves a row (a moved row makes the view lay out every row again).
               sort_key=lambda r: r.order, align="right")
COLUMNS: tuple[Column, ...] = (
    RUN,
    Column("vs ref", "completion against the reference run of its request and condition: ref = that "
                     "reference, = same, ≠ @p first differs at position p", 50, lambda r: r.mark.text(),
           sort_key=lambda r: r.mark.sort_key(), tooltip=_reference_tip, summarised=True,
           alert=lambda r: r.mark.differs),
    Column("probe drops", "dropped candidates of the probe row (row 0 without a probe)", 84,
           lambda r: r.stats.focus_dropped, align="right", summarised=True),
    Column("drops", "dropped candidates of the whole batch (share of all candidates)", 104, _drops,
           sort_key=lambda r: r.stats.batch_dropped, align="right", summarised=True),
    Column("completion", "generated text of the probe row", 240, lambda r: r.stats.preview,
           tooltip=lambda r: r.stats.preview if r.stats is not None else None, summarised=True),
    Column("label", "human label of the batch composition", 150, lambda r: r.info.label,
           tooltip=lambda r: r.info.label or None),
    ORDER,
    Column("B", "batch size", 32, lambda r: r.info.batch_size, align="right"),
    Column("requests", "request id in each row", 110, lambda r: r.info.requests_text,
           tooltip=lambda r: ", ".join(str(i) for i in r.info.request_ids)),
    Column("probe", "row of the probe request (-: none)", 44,
           lambda r: r.info.probe_row if r.info.probe_row >= 0 else "-", sort_key=lambda r: r.info.probe_row,
           align="right"),
    Column("routing", "resolved routing knobs (hover for all)", 260, lambda r: r.info.routing,
           tooltip=lambda r: r.info.routing_json or None),
    Column("kernels", "kernel mode", 90, lambda r: r.info.kernel_mode),
)
#: Column position by title.
COL: dict[str, int] = {c.title: i for i, c in enumerate(COLUMNS)}
