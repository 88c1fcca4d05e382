"""What a headless export shows when its options name nothing: the probe request's first run
that diverges from the reference, that run's row and its cause layer, so that a figure exported
with no options shows the most telling data, not the first run (often the one that drops nothing).
No Qt here."""

from __future__ import annotations

from dataclasses import dataclass, replace

from inspector.figure_data.divergence_source import (
    ONCE_ROW_MEMO,
    DivergenceSource,
    find_record,
    table_reference,
)
from inspector.specs.selection import Selection
from traces.analysis.reference import reference_index
from traces.analysis.request import analyse_request
from traces.schema import DROPLESS_CAPACITY

#: The options that, when any is given, say what to show (no default is picked then).
CHOOSING = ("run", "request", "row", "layer", "pair", "condition")
#: Runs (in write order) searched for the first divergent one, as the app opens on one
#: (`first_divergent_run`): a trace of thousands of runs is not analysed whole.
SCAN_LIMIT = 64


class _FirstRuns:
    """The open trace as far as its first `limit` runs: what the bounded search reads."""

    def __init__(self, trace, limit: int) -> None:
        self._trace = trace
        self.run_names = list(trace.run_names[:limit])

    def __getattr__(self, name: str):
        return getattr(self._trace, name)


@dataclass(frozen=True)
class Divergent:
    """The probe request's first divergent run against its reference, and the MoE layer of its proven
    cause (without a proof, of its first difference)."""

    request: int
    run: str
    row: int
    reference: str
    condition: str
    layer: int
    t_star: int
    step: int = 0          # the forward step that routed the cause's token in `run` (0 = prefill)
    group: int | None = None  # that token's group at `layer` in that step

    def describe(self, step: bool = False) -> str:
        """What was picked; `step`: also the cause's step (for a view that shows one step)."""
        prefill = " (prefill)" if self.step == 0 else ""
        at = f"; step {self.step}{prefill}, the cause's" if step else ""
        return (f"request {self.request}: run {self.run} row {self.row}, the first to diverge from "
                f"{self.reference} (at position {self.t_star}); MoE layer {self.layer}, the cause's{at}")


def first_divergent(trace) -> Divergent | None:
    """The probe request's first divergent run with a capacity (else its first divergent run) among
    the trace's first SCAN_LIMIT runs; reference: the explanation table's, else the request's first
    run, as the pair view's. None when none of them diverges."""
    source = DivergenceSource(_FirstRuns(trace, SCAN_LIMIT), ONCE_ROW_MEMO)
    request = source.default_request()
    if request is None:
        return None
    choices = source.choices(request)
    if len(choices) < 2:
        return None
    rows = source.rows(choices)
    names = [c.run for c in choices]
    reference = reference_index(names, table_reference(source.records(), choices))
    analysis = analyse_request(rows, reference)
    diverged = [(c, v) for c, v in zip(choices, analysis.verdicts, strict=True) if v.diverged]
    if not diverged:
        return None
    # A run with a capacity shows its drops; a dropless one (often the first, alone) shows none.
    limited = [(c, v) for c, v in diverged
               if (source.capacity(c.run, max(v.layer, 0)) != DROPLESS_CAPACITY).any()]
    choice, verdict = (limited or diverged)[0]
    ref = choices[reference]
    record = find_record(source.records(), choice.run, choice.row, ref.run, ref.row)
    proven = record is not None and record.proven
    layer = max(int(record.proof_layer if proven else verdict.layer), 0)
    position = record.proof_position if proven else verdict.position
    row = rows[choices.index(choice)]
    step, group = 0, None
    if 0 <= position < row.length and row.step[position] >= 0:  # the step and group of the cause's token
        step = int(record.proof_step) if proven and record.proof_step >= 0 else int(row.step[position])
        group = int(row.group[layer, position]) if row.group[layer, position] >= 0 else None
    return Divergent(request=int(request), run=choice.run, row=choice.row, reference=names[reference],
                     condition=choice.condition, layer=layer, t_star=int(verdict.t_star), step=step,
                     group=group)


def informative(trace, spec, sel: Selection) -> tuple[Selection, str]:
    """`sel` (whose options named none of `CHOOSING`) with the first divergent run filled in for the
    view `spec` (a `ViewSpec`), and a line saying what was picked ('' when nothing was: no run
    diverges). A view comparing runs gets the pair and its condition, a single-run view the run."""
    pick = first_divergent(trace)
    if pick is None:
        return sel, ""
    if spec.compares:
        changes = {"request": pick.request, "condition": pick.condition,
                   "pair": (pick.reference, pick.run), "layer": pick.layer}
    else:
        changes = {"run": pick.run, "row": pick.row, "request": pick.request, "layer": pick.layer,
                   "step": pick.step, "group": pick.group}
    changes = {k: v for k, v in changes.items() if k in spec.options}
    return replace(sel, **changes), f"picked {pick.describe(step='step' in spec.options)}"
