"""Divergence analysis of routing traces, in plain numpy: the numbers the GUI, the export and the tests share.

- `rows`: `RunArrays` (a run in memory), `RowTrace` (one row of a run), `LayerArrays` (one layer of
  a run), and the adapters `row_trace(run, b)`, `layer_routing(run, l)` for reader `Run`s.
- `alignment`: which rows of which runs hold a request.
- `divergence`: U(N), mode share, first divergence t*, prefix tree of completions.
- `measures`: KL, logit and router margins, bitwise differences, drops (array functions).
- `curves`: routing differences and the measures per position of two rows.
- `verdict`: `Verdict` (where two runs first differ and why, `Verdict.describe()`), `Difference`;
  `verdict_record` holds their fields, `verdict_text` their words.
- `causes`: the walk that reaches the verdict on two runs (docs/experiments.md).
- `cause_table`: the one table of causes; `reference`: the reference-run rule; `layers`: MoE layer
  to model layer.
- `displacement`: who took the slots ahead of a dropped candidate.
- `request`: all of the above for the runs of one request.
- `summary`, `explain_table`: causes over an experiment, and their storable table.
- `load`: requested vs kept per expert and who took the slots, for one step and layer.
"""

from traces.analysis.alignment import (
    aligned_rows,
    probe_request,
    request_rows,
    requests_with_several_runs,
    runs_of_request,
)
from traces.analysis.causes import explain_pair
from traces.analysis.curves import PairCurves, RoutingDifferences, pair_curves, routing_differences
from traces.analysis.displacement import Candidate, Displacement, displacement
from traces.analysis.divergence import (
    BranchNode,
    BranchPoint,
    Completions,
    branch_points,
    count_completions,
    first_divergence,
    new_tokens,
    prefix_tree,
)
from traces.analysis.explain_table import ExplainRecord, from_columns, table_attrs, table_name, to_columns
from traces.analysis.load import ExpertLoad, drop_rate, expert_load, run_expert_load
from traces.analysis.request import RequestAnalysis, analyse_request
from traces.analysis.rows import LayerArrays, RowTrace, RunArrays, layer_routing, row_trace
from traces.analysis.summary import CauseSummary, summarize
from traces.analysis.verdict import Difference, Verdict

__all__ = [
    "BranchNode", "BranchPoint", "Candidate", "CauseSummary", "Completions", "Difference",
    "Displacement", "ExpertLoad", "ExplainRecord", "LayerArrays", "PairCurves", "RequestAnalysis",
    "RoutingDifferences", "RowTrace", "RunArrays", "Verdict", "aligned_rows", "analyse_request",
    "branch_points", "count_completions", "displacement", "drop_rate", "expert_load", "explain_pair",
    "first_divergence", "from_columns", "layer_routing", "new_tokens", "pair_curves",
    "prefix_tree", "probe_request", "request_rows", "requests_with_several_runs", "row_trace",
    "routing_differences", "run_expert_load", "runs_of_request", "summarize", "table_attrs",
    "table_name", "to_columns",
]
