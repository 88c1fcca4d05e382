"""The run catalog without Qt: the structural steps it tells its listener rebuild its groups exactly,
batches of runs end in the groups and references a catalog from scratch gives, the marks read from
the run summary table are those the completions give, and each column is one record."""

from dataclasses import replace

import numpy as np
import pytest

from inspector.figure_data.browser import Mark, references, table_summaries
from inspector.figure_data.run_summaries import summarise
from inspector.state.catalog import DAMAGED, PENDING, CatalogListener, RunCatalog
from inspector.state.run_columns import COL, COLUMNS, ORDER, RUN
from traces import open_trace
from traces.synthetic import write_synthetic_trace


class Shadow(CatalogListener):
    """Replays what a catalog tells on a copy of its groups, as a view would: rows are removed and
    inserted where they are said to be, and a regrouping or reset reads the groups anew."""

    def __init__(self) -> None:
        self.catalog: RunCatalog | None = None
        self.groups: list[list] = []     # [key, [names]] per group
        self.pending = None
        self.changed_rows: set[str] = set()

    def reset(self) -> None:
        if self.catalog is not None:   # (the catalog's first reset is made as it is created)
            self.groups = [[g.key, list(g.names)] for g in self.catalog.groups]

    regrouped = reset

    def removing(self, parent, first, last) -> None:
        self.pending = ("remove", parent, first, last)

    def removed(self) -> None:
        _, parent, first, last = self.pending
        target = self.groups if parent is None else self.groups[parent][1]
        del target[first:last + 1]

    def inserting(self, parent, first, last) -> None:
        self.pending = ("insert", parent, first, last)

    def inserted(self) -> None:
        _, parent, first, last = self.pending
        if parent is None:   # a new group: the catalog holds it now
            self.groups[first:first] = [[self.catalog.groups[first].key, []]]
        else:
            self.groups[parent][1][first:first] = self.catalog.groups[parent].names[first:last + 1]

    def changed(self, spans, headings) -> None:
        for g, lo, hi in spans:
            self.changed_rows.update(self.groups[g][1][lo:hi + 1])


@pytest.fixture(scope="module")
def summaries(tmp_path_factory):
    path = tmp_path_factory.mktemp("catalog") / "c.h5"
    write_synthetic_trace(path, 30, L=2, E=4, K=2, V=32, B=2, T=16, R=3, seed=1, capacity_factor=0.5)
    with open_trace(path) as trace:
        return list(trace.run_names), summarise(trace, trace.run_names), table_summaries(trace)


def watched() -> tuple[RunCatalog, Shadow]:
    shadow = Shadow()
    catalog = RunCatalog(shadow)
    shadow.catalog = catalog
    return catalog, shadow


def test_the_listener_rebuilds_the_groups_through_every_batch(summaries):
    names, found, _ = summaries
    # Conditions taking turns, one first met late, and runs arriving out of order.
    found = [(n, replace(info, condition="late" if i >= 20 and i % 2 else f"c{i % 3}"), stats, why)
             for i, (n, info, stats, why) in enumerate(found)]
    catalog, shadow = watched()
    catalog.reset(names, {}, {})
    assert shadow.groups == [[PENDING, names]]
    for lo, hi in ((10, 14), (0, 3), (3, 10), (14, 25), (25, 30)):
        batch = [(info, stats) for _, info, stats, _ in found[lo:hi]]
        shadow.changed_rows = set()
        catalog.add(batch)
        assert shadow.groups == [[g.key, g.names] for g in catalog.groups]
        assert {info.name for info, _ in batch} <= shadow.changed_rows
        assert all(g.names == sorted(g.names) for g in catalog.groups)   # each group in write order
    catalog.regroup()   # groups in the write order of their first runs, as the summary's end does
    assert shadow.groups == [[g.key, g.names] for g in catalog.groups]
    assert [[g.key, g.names] for g in catalog.groups] == [[g.key, g.names] for g in catalog.grouped()]
    assert [g.key for g in catalog.groups] == ["c0", "c1", "c2", "late"]
    assert catalog.refs == references([info for _, info, _, _ in found], None)
    catalog.mark_unusable(names[4], "damaged")
    assert shadow.groups == [[g.key, g.names] for g in catalog.groups]
    assert catalog.groups[-1].key == DAMAGED and catalog.groups[-1].names == [names[4]]
    assert catalog.where(names[4]) == (len(catalog.groups) - 1, 0)


def test_table_marks_are_the_completions_marks(summaries):
    names, found, table = summaries
    infos = {n: t.info for n, t in table.items()}
    stats = {n: t.stats for n, t in table.items()}
    from_table = RunCatalog()
    from_table.reset(names, infos, {}, stats, marks={(n, t.reference): t.mark for n, t in table.items()})
    from_runs = RunCatalog()
    from_runs.reset(names, {}, {}, None)
    from_runs.add([(info, s) for _, info, s, _ in found])
    assert from_table.refs == from_runs.refs
    assert [from_table.mark(n) for n in names] == [from_runs.mark(n) for n in names]
    assert {m.kind for m in map(from_table.mark, names)} == {"ref", "same", "differs"}
    # A chosen reference: marks from the completions, as the table knows only the default ones.
    from_table.set_reference(names[3])
    from_runs.set_reference(names[3])
    assert [from_table.mark(n) for n in names] == [from_runs.mark(n) for n in names]
    assert from_table.mark(names[3]) == Mark("ref")


def test_each_column_is_one_record(summaries):
    names, found, _ = summaries
    catalog = RunCatalog()
    catalog.reset(names, {}, {}, None)
    catalog.add([(info, s) for _, info, s, _ in found])
    row = catalog.row(names[1])
    info, stats = row.info, row.stats
    shown = {c.title: c.value(row) for c in COLUMNS}
    assert shown["run"] == names[1] and shown["#"] == 1 and shown["B"] == 2
    assert shown["drops"] == f"{stats.batch_dropped} ({stats.drop_rate:.1%})"
    assert shown["probe drops"] == stats.focus_dropped and shown["completion"] == stats.preview
    assert shown["vs ref"] == catalog.mark(names[1]).text() and shown["routing"] == info.routing
    assert COLUMNS[COL["drops"]].sort_value(row) == stats.batch_dropped
    assert ORDER.sort_value(row) == 1 and RUN.tooltip(row).startswith(names[1])
    assert COLUMNS[COL["routing"]].tooltip(row) == info.routing_json
    assert {c.title for c in COLUMNS if c.summarised} == {"vs ref", "probe drops", "drops", "completion"}
    assert {c.title for c in COLUMNS if c.align == "right"} == {"#", "B", "probe", "drops", "probe drops"}
    assert all(c.width > 0 and c.tip for c in COLUMNS) and len(set(COL)) == len(COLUMNS)
    differs = next(n for n in names if catalog.mark(n).differs)
    assert COLUMNS[COL["vs ref"]].alert(catalog.row(differs))
    assert catalog.row("not a run") is None
    assert np.array_equal(row.stats.completion, stats.completion)
