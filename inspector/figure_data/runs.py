"""Data of the runs view (N runs tab) of one request: U(N), the prefix tree of completions, runs x
positions coloured by completion cluster, and the table of causes.

The measures are `traces.analysis.analyse_request`'s (U(N), t* and causes: docs/experiments.md); this
module lays them out for drawing. Where an explanation table confirms a run's cause by
counterfactual reruns, the confirmed cause replaces the guess and is counted as confirmed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from inspector.figure_data.cause_columns import COLUMNS as CAUSE_COLUMNS
from inspector.figure_data.cause_columns import CauseEvent, cause_fields
from inspector.figure_data.divergence_source import RunChoice, find_record
from inspector.figure_data.table import INTEGER, RUN, TEXT, Column, column_values, missing
from inspector.figure_data.tokens import display_token, token_text
from inspector.figure_data.words import causes_line
from traces.analysis import BranchNode, ExplainRecord, RequestAnalysis, analyse_request
from traces.analysis.cause_table import colour, meaning, settles
from traces.analysis.divergence import leaves
from traces.analysis.explain_table import summarize_causes
from traces.schema import MISSING


@dataclass(frozen=True)
class TreeRow:
    """One node of the prefix tree, flattened in display order (parents before children)."""

    depth: int
    parent: int              # index of the parent row, -1 for the root
    count: int               # runs through this node
    start: int               # new-token index from which its runs are followed
    split: int               # new-token index where they split (n_new for a leaf)
    token: str               # the token at start - 1 that made this branch ('' at the root)
    text: str                # the new tokens start..split-1 its runs share
    runs: tuple[str, ...]
    completion: int          # completion id of a leaf (0 = most common), -1 for inner nodes


@dataclass(frozen=True)
class CauseRow:
    """One line of the table of causes over the divergent runs."""

    cause: str
    count: int
    share: float             # of the divergent runs
    confirmed: int           # of `count`, how many a counterfactual rerun confirmed
    proven: int = 0          # of `count`, how many have a proven event or minimal set of events
    colour: str = ""         # '#rrggbb' of the cause (traces.analysis.cause_table)


@dataclass(frozen=True)
class RunsData:
    """What the runs view draws for one request (optionally one condition)."""

    request: int
    condition: str                 # '' when every condition is shown
    choices: tuple[RunChoice, ...]  # [N] the runs, in run order
    reference: int                 # index into `choices`
    prompt_len: int
    n_new: int                     # new tokens compared
    cropped: bool                  # some completion is longer than n_new (compared over the shortest)
    n_unique: int                  # U(N)
    mode_count: int
    mode_share: float
    headline: str                  # 'U(30) = 3 distinct completions of 128 new tokens; ...'
    first_split: str               # 'identical for the first 102 new tokens, split 28/2 at ...'
    labels: np.ndarray             # [N] completion id per run (0 = most common)
    order: np.ndarray              # [N] run indices in display order (completions grouped, tree order)
    clusters: np.ndarray           # [N, n_new] per displayed run: completion id of the largest group
                                   # still sharing its prefix through each new token
    t_star: np.ndarray             # [N] absolute first divergence against the reference, -1 none
    tree: tuple[TreeRow, ...]
    split_points: tuple[tuple[int, tuple[int, ...]], ...]  # (absolute position, run counts) per split
    causes: tuple[CauseRow, ...]
    causes_line: str               # '2 of 4 runs diverge: capacity 1 (50%), ...; unexplained 0%.'
    run_causes: tuple[str, ...]    # [N] cause shown per run ('identical' for runs that agree)
    run_confirmed: tuple[bool, ...]  # [N]
    n_divergent: int
    run_events: tuple[CauseEvent | None, ...] = ()  # [N] the event each run's cause points at (None
                                                    # for runs that agree)

    @property
    def n_runs(self) -> int:
        return len(self.choices)

    @property
    def reference_run(self) -> str:
        return self.choices[self.reference].run

    def position(self, index: int) -> int:
        """Absolute position of new-token index `index`."""
        return self.prompt_len + index

    def describe_cell(self, t: int, y: int) -> str | None:
        """Hover text of (absolute position t, displayed run y) in the cluster map."""
        i = t - self.prompt_len
        if not (0 <= i < self.n_new and 0 <= y < self.n_runs):
            return None
        r = int(self.order[y])
        c = self.choices[r]
        lines = [f"{c.text()}", f"position {t} (new token {i}): cluster of completion "
                                f"#{int(self.clusters[y, i])}; final completion #{int(self.labels[r])}"]
        if r == self.reference:
            lines.append("the reference run")
        elif self.t_star[r] >= 0:
            confirmed = " (confirmed by counterfactual)" if self.run_confirmed[r] else ""
            event = f", {self.run_events[r].describe()}" if self.run_events and self.run_events[r] else ""
            lines.append(f"first differs from the reference at position {int(self.t_star[r])}; cause "
                         f"{self.run_causes[r]}{confirmed}{event}")
        else:
            lines.append("same completion as the reference")
        splits = ["/".join(str(n) for n in counts) for position, counts in self.split_points if position == t]
        if splits:  # also named above the map, where there is room
            lines.append(f"runs split here: {'; '.join(splits)}")
        return "\n".join(lines)

    def to_columns(self) -> dict[str, np.ndarray]:
        """One row per run: the values of `COLUMNS`."""
        events = self.run_events or (None,) * self.n_runs
        fields = [cause_fields(bool(t >= 0), c, k, e) for t, c, k, e in
                  zip(self.t_star, self.run_causes, self.run_confirmed, events, strict=True)]
        fields = [{**f, "cause_meaning": meaning(f["cause"]) if f["cause"] else None} for f in fields]
        return {
            "run": np.array([c.run for c in self.choices], dtype=object),
            "row": np.array([c.row for c in self.choices], dtype=np.int64),
            "condition": missing(np.array([c.condition for c in self.choices], dtype=object),
                                 [not c.condition for c in self.choices]),
            "completion": np.asarray(self.labels, dtype=np.int64),
            "t_star": missing(self.t_star, self.t_star < 0),
            **{c.name: column_values([f[c.name] for f in fields], c) for c in _CAUSE_COLUMNS},
        }


#: The cause's columns of the runs table: the cause, its meaning, then where its event is.
_CAUSE_COLUMNS = (CAUSE_COLUMNS[0],
                  Column("cause_meaning", TEXT, "what the cause means, in the words of the table of causes",
                         empty="the run does not diverge"),
                  *CAUSE_COLUMNS[1:])

#: The runs table's columns after its context: one row per run.
COLUMNS = (
    RUN,
    Column("row", INTEGER, "batch row of the run holding the request"),
    Column("condition", TEXT, "the run's condition (what was varied)", empty="the run has no condition"),
    Column("completion", INTEGER, "id of the run's completion among the distinct ones (0 = the most "
                                  "common)"),
    Column("t_star", INTEGER, "t*: first position where the run's tokens leave the reference's",
           empty="the run gives the reference's tokens"),
    *_CAUSE_COLUMNS,
)


def completion_clusters(tree: BranchNode, labels: np.ndarray, n_new: int) -> tuple[np.ndarray, np.ndarray]:
    """(order [N], clusters [N, n_new]): runs in tree order, and per run and new-token index the
    completion id of the largest group of runs still sharing its prefix through that index.

    A group's colour is that of the completion its majority path leads to (always the first child,
    which holds the most runs), so the most common completion keeps one colour from start to end and
    a run changes colour exactly where it leaves a larger group.
    """
    N = labels.shape[0]
    order = np.array([r for leaf in leaves(tree) for r in leaf.runs], dtype=np.int64)
    by_run = np.zeros((N, n_new), dtype=np.int64)
    stack: list[BranchNode] = [tree]
    while stack:
        node = stack.pop()
        major = node
        while major.children:
            major = major.children[0]
        first = 0 if node.token == MISSING else node.start - 1
        by_run[np.asarray(node.runs)[:, None], np.arange(first, min(node.split, n_new))[None, :]] = \
            labels[major.runs[0]]
        stack.extend(node.children)
    return order, by_run[order]


def tree_rows(tree: BranchNode, new: np.ndarray, labels: np.ndarray, names: Sequence[str],
              vocab: Sequence[str], max_chars: int = 60) -> tuple[TreeRow, ...]:
    """The prefix tree flattened depth-first (most runs first at every split)."""
    n_new = new.shape[1]
    out: list[TreeRow] = []
    stack: list[tuple[BranchNode, int, int]] = [(tree, 0, -1)]
    while stack:
        node, depth, parent = stack.pop()
        r0 = node.runs[0]
        shared = "".join(token_text(vocab, int(x)) for x in new[r0, node.start: min(node.split, n_new)])
        text = display_token(shared) if shared else ""
        if len(text) > max_chars:
            text = text[: max_chars - 1] + "…"
        token = "" if node.token == MISSING else display_token(token_text(vocab, node.token))
        out.append(TreeRow(depth=depth, parent=parent, count=node.count, start=node.start, split=node.split,
                           token=token, text=text, runs=tuple(names[r] for r in node.runs),
                           completion=-1 if node.children else int(labels[r0])))
        here = len(out) - 1
        stack.extend((child, depth + 1, here) for child in reversed(node.children))
    return tuple(out)


def first_split_text(analysis: RequestAnalysis) -> str:
    """How the runs first split, in the words of the Thinking Machines measurement."""
    N = len(analysis.rows)
    points = analysis.branch_points
    n = analysis.completions.n_new_tokens
    if not points:
        return f"all {N} runs give the same {n} new tokens"
    p = points[0]
    counts = "/".join(str(c) for c in p.counts)
    if p.index == 0:
        return (f"the {p.count} runs split {counts} at the first new token "
                f"(position {analysis.prompt_len})")
    first = "new token" if p.index == 1 else f"{p.index} new tokens"
    return (f"all {p.count} runs identical for the first {first}, split {counts} at new token "
            f"{p.index} (position {analysis.prompt_len + p.index})")


def cause_table(analysis: RequestAnalysis, records: Sequence[ExplainRecord], choices: Sequence[RunChoice],
                ) -> tuple[tuple[CauseRow, ...], tuple[str, ...], tuple[bool, ...], str,
                           tuple[CauseEvent | None, ...]]:
    """Rows of the cause table, the cause and confirmation shown per run, the summary line, and per
    run the event its cause points at (the proof's, else the first difference; None: no divergence).

    A run's record must compare it with the same reference run; its confirmed cause replaces the guess.
    """
    ref = choices[analysis.reference]
    causes, confirmed, proven, events = [], [], [], []
    for v, c in zip(analysis.verdicts, choices, strict=True):
        record = find_record(records, c.run, c.row, ref.run, ref.row) if c.key != ref.key else None
        settled = record is not None and bool(record.confirmed_cause)
        causes.append(record.confirmed_cause if settled else v.cause)
        confirmed.append(settled and v.diverged and settles(record.confirmed_cause))
        proven.append(bool(confirmed[-1] and record.proven))
        if not v.diverged:
            events.append(None)
        elif proven[-1]:
            events.append(CauseEvent(record.proof_position, record.proof_layer, record.proof_size))
        else:
            events.append(CauseEvent(v.position, v.layer))
    diverged = [v.diverged for v in analysis.verdicts]
    summary = summarize_causes(causes, diverged)

    def count(flags: list[bool], cause: str) -> int:
        return sum(1 for c, k, d in zip(causes, flags, diverged, strict=True) if d and k and c == cause)

    rows = tuple(CauseRow(cause=cause, count=n, share=share, confirmed=count(confirmed, cause),
                          proven=count(proven, cause), colour=colour(cause))
                 for cause, n, share in summary.rows())
    return rows, tuple(causes), tuple(confirmed), causes_line(summary), tuple(events)


def runs_figure_data(rows, choices: Sequence[RunChoice], reference: int, *, vocab: Sequence[str],
                         records: Sequence[ExplainRecord] = (), condition: str = "",
                         n_new: int | None = None) -> RunsData:
    """The runs view's data of the runs `rows` (`RowTrace`s of one request, one per `choices` entry) against
    run `reference` (an index). Raises ValueError for no runs or runs of different requests/prompts."""
    if len(rows) != len(choices):
        raise ValueError(f"{len(rows)} rows but {len(choices)} run choices")
    analysis = analyse_request(rows, reference=reference, n_new=n_new)
    comp = analysis.completions
    labels = np.asarray(comp.labels)
    order, clusters = completion_clusters(analysis.tree, labels, comp.n_new_tokens)
    causes, run_causes, run_confirmed, line, run_events = cause_table(analysis, records, choices)
    splits = tuple((analysis.prompt_len + p.index, p.counts) for p in analysis.branch_points)
    return RunsData(
        request=analysis.request, condition=condition, choices=tuple(choices), reference=reference,
        prompt_len=analysis.prompt_len, n_new=comp.n_new_tokens,
        cropped=bool(np.any(analysis.lengths - analysis.prompt_len > comp.n_new_tokens)),
        n_unique=comp.n_unique,
        mode_count=comp.mode_count, mode_share=comp.mode_share, headline=comp.describe(),
        first_split=first_split_text(analysis), labels=labels, order=order, clusters=clusters,
        t_star=np.asarray(analysis.t_star),
        tree=tree_rows(analysis.tree, analysis.new, labels, [c.run for c in choices], vocab),
        split_points=splits, causes=causes, causes_line=line, run_causes=run_causes,
        run_confirmed=run_confirmed, n_divergent=sum(1 for v in analysis.verdicts if v.diverged),
        run_events=run_events,
    )
