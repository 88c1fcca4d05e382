"""Counterfactual reruns that confirm the cause of each divergence of a trace (docs/experiments.md).

- `pairs`: which rows are compared (each request's runs under one condition, against the first).
- `reruns`: a recorded batch rerun as recorded (checked bit for bit), dropless, with batch-invariant
  kernels, or with one row forced to replay another run's recorded routing.
- `decide`: the decision table from the analysis' guess and the reruns to a confirmed cause.
- `source`: the checkpoint that reruns a trace, checked against the trace's model configuration.
- `explain`: the driver (`explain`, `explain_trace`); `store`: the table of verdicts in the trace;
  `report`: the text the command line prints.
"""

from lab.counterfactual.decide import NOT_REPRODUCED, Decision, Evidence, decide
from lab.counterfactual.explain import ExplainResult, explain, explain_trace
from lab.counterfactual.source import ExplainError
from lab.counterfactual.store import TABLE

__all__ = ["NOT_REPRODUCED", "TABLE", "Decision", "Evidence", "ExplainError", "ExplainResult", "decide",
           "explain", "explain_trace"]
