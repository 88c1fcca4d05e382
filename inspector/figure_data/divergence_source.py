"""Where the divergence views get their rows: the runs of each request in an open trace, read on
demand and memoised, and the explanation tables the `explain` command stored.

No Qt here. One `DivergenceSource` belongs to one open trace: the app's `Document` makes it on
first use and drops it when the trace changes, and both divergence views read it. Rows are
`traces.analysis.RowTrace`s (with their next-token logits), so every pair and the runs view of a
request share the same rows and their cached log-probabilities.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from inspector.figure_data.browser import RunInfo, run_info, table_summaries
from inspector.figure_data.memo import Memo
from inspector.figure_data.pair import PairData, compare_rows, pair_figure_data
from traces import TraceError
from traces.analysis import ExplainRecord, RowTrace, from_columns, row_trace
from traces.analysis.alignment import probe_request, requests_with_several_runs, runs_of_request
from traces.analysis.explain_table import TABLE_KIND, TABLE_PREFIX, evidence_rank
from traces.analysis.layers import model_layer

log = logging.getLogger(__name__)

#: Rows kept in memory per trace (a 512-position row with 256 logits holds about 3 MB with its caches).
ROW_MEMO = 64
#: Rows kept by a source made for one export or one pick: it goes through a request's runs once, in order,
#: against one reference (kept as the most recently used), so a few suffice (`export --view runs` of
#: 2,000 runs: 295 MB at its peak as PDF, against 306 MB with the app's ROW_MEMO).
ONCE_ROW_MEMO = 8


@dataclass(frozen=True)
class RunChoice:
    """One run holding a request: the row it sits in and what the run browser says of the run."""

    run: str
    row: int
    condition: str
    label: str
    is_probe: bool

    @property
    def key(self) -> tuple[str, int]:
        return self.run, self.row

    def text(self) -> str:
        """'r003 · row 2 (probe) · batch cf=1.0 native'."""
        probe = " (probe)" if self.is_probe else ""
        condition = f" · {self.condition}" if self.condition else ""
        return f"{self.run} · row {self.row}{probe}{condition}"


class DivergenceSource:
    """The runs of each request of `trace` (an open `traces.Trace`), their rows and explanations, the
    last `row_memo` rows read kept in memory."""

    def __init__(self, trace, row_memo: int = ROW_MEMO) -> None:
        self.trace = trace
        self.vocab: list[str] = list(trace.vocab)
        self.moe_layers: list[int] = [int(m) for m in trace.moe_layers]
        self.unusable: dict[str, str] = {}   # run name -> why it is left out
        self._runs: list[tuple[str, np.ndarray, int]] = []
        self._infos: dict[str, RunInfo] = {}
        known = self._table(trace)
        for name in trace.run_names:
            if name in known:  # the run summary table's: the run is checked when its rows are read
                info = known[name].info
                self._runs.append((name, np.asarray(info.request_ids), info.probe_row))
                self._infos[name] = info
                continue
            try:
                run = trace.run(name)
                if not run.complete:
                    self.unusable[name] = "incomplete"
                    continue
                self._runs.append((name, np.asarray(run.request_ids), int(run.probe_row)))
                self._infos[name] = run_info(run)
            except TraceError as exc:
                log.warning("divergence: run %s left out: %s", name, exc)
                self.unusable[name] = str(exc)
        self._rows = Memo(row_memo)
        self._small = Memo(256)
        self._records: list[ExplainRecord] | None = None
        self.table_problems: list[str] = []

    @staticmethod
    def _table(trace) -> dict:
        """The run summary table's runs (`table_summaries`); none without one, or when it cannot be read
        (every run is then checked here)."""
        try:
            return table_summaries(trace) or {}
        except TraceError as exc:
            log.warning("divergence: the run summary table is left out: %s", exc)
            return {}

    # -- requests and runs ------------------------------------------------------------------------

    def requests(self) -> list[int]:
        """Requests held by more than one usable run (the ones that can be compared), ascending."""
        return requests_with_several_runs(self._runs)

    def request_text(self, request: int, max_chars: int = 40) -> str:
        texts = self.trace.requests.text
        text = texts[request] if 0 <= request < len(texts) else ""
        text = " ".join(text.split())
        return text if len(text) <= max_chars else text[: max_chars - 1] + "…"

    def default_request(self, run: str | None = None, row: int | None = None) -> int | None:
        """The request in (run, row) when several runs hold it, else the probe request, else the first."""
        requests = self.requests()
        if not requests:
            return None
        ids = next((ids for name, ids, _ in self._runs if name == run), None)
        if ids is not None and row is not None and 0 <= row < len(ids) and int(ids[row]) in requests:
            return int(ids[row])
        probe = probe_request(self._runs)
        return probe if probe in requests else requests[0]

    def choices(self, request: int) -> list[RunChoice]:
        """One `RunChoice` per usable run holding `request` (its probe row when it holds it), in run order."""
        out = []
        for name, row in runs_of_request(self._runs, request):
            info = self._infos[name]
            out.append(RunChoice(run=name, row=row, condition=info.condition, label=info.label,
                                 is_probe=row == info.probe_row))
        return out

    def conditions(self, request: int) -> list[str]:
        """Distinct conditions among the runs holding `request`, in run order."""
        return list(dict.fromkeys(c.condition for c in self.choices(request)))

    def request_ids(self, run: str) -> np.ndarray:
        return next(ids for name, ids, _ in self._runs if name == run)

    # -- arrays -------------------------------------------------------------------------------------

    def row(self, run: str, row: int) -> RowTrace:
        """Row `row` of run `run` with its next-token logits (read once, then memoised)."""
        return self._rows.get((run, row), lambda: row_trace(self.trace.run(run), row))

    def rows(self, choices: Sequence[RunChoice]) -> Rows:
        """The rows of `choices`, each read when asked for (`Rows`)."""
        return Rows(self, choices)

    def capacity(self, run: str, layer: int) -> np.ndarray:
        """[S, G] capacity of each group of each step of `run` at MoE layer `layer`."""
        return self._small.get(("capacity", run, layer),
                               lambda: np.asarray(self.trace.run(run).capacity[:, layer, :]))

    def model_layer(self, layer: int) -> int:
        return model_layer(self.moe_layers, layer)

    # -- pairs ------------------------------------------------------------------------------------

    def pair(self, a: RunChoice, b: RunChoice, layer: int) -> PairData:
        """The side-by-side data of run `b` against the reference `a` at MoE layer `layer`. The pair's
        verdict, differences and curves are computed once and kept, so switching layers redraws
        without comparing the rows again. Raises ValueError as `pair_figure_data` does."""
        row_a, row_b = self.row(a.run, a.row), self.row(b.run, b.row)
        comparison = self._small.get(("pair", a.key, b.key), lambda: compare_rows(row_a, row_b))
        return pair_figure_data(
            row_a, row_b, layer, vocab=self.vocab, capacity_a=self.capacity(a.run, layer),
            capacity_b=self.capacity(b.run, layer), moe_layers=self.moe_layers,
            record=find_record(self.records(), b.run, b.row, a.run, a.row),
            request_ids={a.run: self.request_ids(a.run), b.run: self.request_ids(b.run)},
            comparison=comparison)

    # -- explanation tables -----------------------------------------------------------------------

    def records(self) -> list[ExplainRecord]:
        """Every record of every explanation table (`explain_*`); unreadable tables are listed in
        `table_problems` and left out."""
        if self._records is None:
            self._records = []
            self.table_problems = []
            try:
                names = [n for n in self.trace.table_names if n.startswith(TABLE_PREFIX)]
            except TraceError as exc:
                self.table_problems.append(str(exc))
                names = []
            for name in names:
                try:
                    columns, attrs = self.trace.read_table(name)
                    if attrs.get("kind", TABLE_KIND) != TABLE_KIND:
                        continue
                    self._records.extend(from_columns(columns))
                except (TraceError, ValueError) as exc:
                    log.warning("explanation table %s left out: %s", name, exc)
                    self.table_problems.append(f"table {name}: {exc}")
        return self._records


class Rows(Sequence):
    """The rows of some run choices, read when indexed through their source's memo, so that going
    through thousands of them holds only the last ROW_MEMO (each row keeps its run's open datasets)."""

    def __init__(self, source: DivergenceSource, choices: Sequence[RunChoice]) -> None:
        self._source, self._choices = source, list(choices)

    def __len__(self) -> int:
        return len(self._choices)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(len(self))[i]]
        choice = self._choices[i]
        return self._source.row(choice.run, choice.row)


def find_record(records: Sequence[ExplainRecord], run: str, row: int, ref_run: str,
                ref_row: int) -> ExplainRecord | None:
    """The record of (run, row) against (ref_run, ref_row) in either direction; the one with the
    strongest confirmation wins (`evidence_rank`), the first of equals."""
    found = [r for r in records
             if ((r.run, r.row, r.ref_run, r.ref_row) == (run, row, ref_run, ref_row)
                 or (r.run, r.row, r.ref_run, r.ref_row) == (ref_run, ref_row, run, row))]
    ranked = sorted(found, key=evidence_rank, reverse=True)
    return ranked[0] if ranked else None


def table_reference(records: Sequence[ExplainRecord], choices: Sequence[RunChoice]) -> str | None:
    """The reference run the explanation tables used for these runs (the most common), if any."""
    keys = {c.key for c in choices}
    refs = [r.ref_run for r in records if (r.run, r.row) in keys and (r.ref_run, r.ref_row) in keys]
    if not refs:
        return None
    values, counts = np.unique(np.asarray(refs), return_counts=True)
    return str(values[int(np.argmax(counts))])
