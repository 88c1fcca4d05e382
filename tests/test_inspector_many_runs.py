"""Traces of many runs: a trace with the run summary table is listed from it at once; without the
table the summary of a large trace runs in worker processes and gives what the in-thread one gives,
the browser adds summaries in batches and ends in the same groups as a grouping from scratch, and a
reload while recording reads only the new runs."""

from dataclasses import replace

import pytest
from linked_runs import linked_trace
from old_format import without_run_summaries

from inspector.app.browser import COL, NAME_ROLE, SORT_ROLE, RunBrowser, RunTableModel
from inspector.app.loader import OpenJob
from inspector.app.main_window import MainWindow
from inspector.app.settings import Settings
from inspector.figure_data.browser import references
from inspector.figure_data.run_summaries import Workers, summaries_in_workers, summarise
from inspector.qt import QtCore
from inspector.state.catalog import PENDING
from traces import open_trace
from traces.synthetic import write_synthetic_trace
from traces.validate import check_run


@pytest.fixture(scope="module")
def many_runs_path(tmp_path_factory):
    """40 runs without the run summary table (a trace written before it): summarised run by run."""
    path = tmp_path_factory.mktemp("many") / "many.h5"
    write_synthetic_trace(path, 40, L=2, E=4, K=2, V=32, B=2, T=10, R=3, seed=4)
    return without_run_summaries(path)


@pytest.fixture(scope="module")
def thousand(tmp_path_factory):
    """1,000 runs with their run summary table."""
    return linked_trace(tmp_path_factory.mktemp("thousand") / "thousand.h5", 1000, L=2, E=4, K=2, V=32, B=2,
                        T=10, R=3, seed=4)


def test_a_thousand_runs_are_listed_from_the_table_opening_one_run(qtbot, thousand, make_window,
                                                                     monkeypatch):
    """With the run summary table the window lists every run, its drops, completion and mark, at
    once: it checks and reads only the run it shows, and starts no summary job nor worker."""
    checked, workers = [], []
    monkeypatch.setattr("traces.reader.check_run", counting(check_run, checked))
    monkeypatch.setattr("inspector.app.loader.Workers", lambda *args: workers.append(args))
    w = make_window(thousand)
    model = w.browser.model
    assert w._summary_job is None and workers == [] and not w.progress.isVisible()
    assert len(model.names) == len(model.stats) == 1000 and not model.unusable
    assert [model.mark(n).kind for n in model.names[:3]] == ["ref", "same", "same"]
    assert w.browser.count.text() == "1000 runs"
    assert {args[1] for args, _ in checked} == {w.state.run.name} == {"r0000"}
    assert w.state.run.tokens.shape[0] == 2   # the run shown is read as before
    w.browser.select("r0500")                 # another run is checked when shown
    assert {args[1] for args, _ in checked} == {"r0000", "r0500"}


def counting(function, calls: list):
    def counted(*args, **kwargs):
        calls.append((args, kwargs))
        return function(*args, **kwargs)
    return counted


def test_worker_processes_summarise_as_the_thread_does(many_runs_path):
    with open_trace(many_runs_path) as trace:
        names = list(trace.run_names)
        here = summarise(trace, names)
    there = list(summaries_in_workers(str(many_runs_path), names, lambda: False, n_workers=2))
    assert [s[0] for s in there] == names  # write order
    for (name, info, stats, why), (_, info2, stats2, why2) in zip(here, there, strict=True):
        assert why is None and why2 is None and info == info2, name
        assert stats.preview == stats2.preview and (stats.completion == stats2.completion).all()
        assert (stats.batch_dropped, stats.focus_dropped) == (stats2.batch_dropped, stats2.focus_dropped)


def test_browser_batches_end_in_the_groups_a_regrouping_from_scratch_gives(qtbot, many_runs_path):
    model = RunTableModel()
    proxy = QtCore.QSortFilterProxyModel()
    proxy.setSourceModel(model)
    proxy.setRecursiveFilteringEnabled(True)
    with open_trace(many_runs_path) as trace:
        names = list(trace.run_names)
        summaries = summarise(trace, names)
    # Three conditions taking turns, and a fourth that first appears late.
    summaries = [(n, replace(info, condition="late" if i >= 30 and i % 2 else f"c{i % 3}"), stats, why)
                 for i, (n, info, stats, why) in enumerate(summaries)]
    model.set_runs(names, {}, {})
    assert [g.key for g in model.groups] == [PENDING]
    for start in (0, 3, 4, 17, 30):  # uneven batches, as the summary's timer cuts them
        stop = {0: 3, 3: 4, 4: 17, 17: 30, 30: 40}[start]
        model.add_runs([(info, stats) for _, info, stats, _ in summaries[start:stop]])
        assert sum(len(g.names) for g in model.groups) == len(names)
        assert [(g.key, g.names) for g in model.groups] == [(g.key, g.names) for g in model.catalog.grouped()]
        for name in names:  # every row findable where it is
            g, r = model.catalog.where(name)
            assert model.groups[g].names[r] == name
    assert [g.key for g in model.groups] == ["c0", "c1", "c2", "late"]
    assert sum(proxy.rowCount(proxy.index(g, 0)) for g in range(proxy.rowCount())) == len(names)


@pytest.mark.parametrize("early", [False, True])  # workers started once listed, or as the open begins
def test_large_trace_is_summarised_in_workers_by_the_window(qtbot, many_runs_path, tmp_path, monkeypatch,
                                                           early):
    monkeypatch.setattr("inspector.app.loader.IN_THREAD_MAX", 5)  # 40 runs: the worker processes
    if early:
        monkeypatch.setattr("inspector.app.loader.EARLY_START_BYTES", 0)
    settings = Settings(QtCore.QSettings(str(tmp_path / "s.ini"), QtCore.QSettings.Format.IniFormat))
    w = MainWindow(settings)
    qtbot.addWidget(w)
    w.show()
    with qtbot.waitSignal(w.open_finished, timeout=20000):
        w.open_path(str(many_runs_path))
    qtbot.waitUntil(lambda: w._summary_job is None and len(w.browser.model.stats) == 40, timeout=60000)
    assert w.browser.count.text().startswith("40 runs")
    w.close()
    w.wait_for_jobs()


def test_workers_started_as_the_open_begins_end_when_the_trace_has_few_runs(qtbot, many_runs_path,
                                                                           monkeypatch):
    monkeypatch.setattr("inspector.app.loader.EARLY_START_BYTES", 0)  # 40 runs: a thread's work
    procs = []

    def workers(path):
        started = Workers(path, 2)
        procs.extend(started._procs)
        return started

    monkeypatch.setattr("inspector.app.loader.Workers", workers)
    job = OpenJob(str(many_runs_path))
    job.setAutoDelete(False)
    opened = []
    job.signals.opened.connect(opened.append)
    job.run()
    assert len(opened) == 1 and opened[0].workers is None and opened[0].first is not None
    opened[0].trace.close()
    assert len(procs) == 2 and all(p.returncode is not None for p in procs)


def test_listed_conditions_are_the_checked_ones(many_runs_path):
    with open_trace(many_runs_path) as trace:
        infos = [info for _, info, _, _ in summarise(trace, trace.run_names)]
        assert trace.run_conditions == {info.name: info.condition for info in infos}


def test_summaries_fill_cells_without_moving_a_row(qtbot, many_runs_path):
    """Rows start in their listed groups, sorted by write order: batches of summaries change cells
    only (a moved row makes the view lay out every row again), and end as a regrouping from scratch
    with the references computed from scratch."""
    with open_trace(many_runs_path) as trace:
        names, conditions = list(trace.run_names), dict(trace.run_conditions)
        summaries = summarise(trace, names)
    # Two conditions, as listed, and requests repeating so that later runs take earlier references.
    conditions = {n: f"c{i % 2}" for i, n in enumerate(names)}
    summaries = [(n, replace(info, condition=conditions[n], compared_in=conditions[n],
                             request_ids=(i % 3,) + info.request_ids[1:]), stats, why)
                 for i, (n, info, stats, why) in enumerate(summaries)]
    model = RunTableModel()
    proxy = QtCore.QSortFilterProxyModel()
    proxy.setSourceModel(model)
    proxy.setSortRole(SORT_ROLE)
    proxy.setRecursiveFilteringEnabled(True)
    proxy.sort(COL["#"], QtCore.Qt.SortOrder.AscendingOrder)
    model.set_runs(names, {}, {}, None, conditions)
    moves = []
    for signal in (proxy.rowsInserted, proxy.rowsRemoved, proxy.layoutChanged, proxy.rowsMoved):
        signal.connect(lambda *args, s=signal: moves.append(s))
    for start, stop in ((0, 3), (3, 4), (4, 17), (17, 40)):
        model.add_runs([(info, stats) for _, info, stats, _ in summaries[start:stop]])
    assert moves == []
    assert [(g.key, g.names) for g in model.groups] == [(g.key, g.names) for g in model.catalog.grouped()]
    assert [g.key for g in model.groups] == ["c0", "c1"]
    assert model.refs == references([info for _, info, _, _ in summaries], None)
    first = proxy.index(0, 0)
    shown = [proxy.index(r, 0, first).data(NAME_ROLE) for r in range(proxy.rowCount(first))]
    assert shown == [n for n in names if conditions[n] == "c0"]  # write order


def test_references_added_late_or_out_of_order_are_the_ones_from_scratch(qtbot, many_runs_path):
    with open_trace(many_runs_path) as trace:
        names = list(trace.run_names)
        summaries = summarise(trace, names)
    summaries = [(n, replace(info, request_ids=(i % 4,) + info.request_ids[1:]), stats, why)
                 for i, (n, info, stats, why) in enumerate(summaries)]
    infos = [info for _, info, _, _ in summaries]
    model = RunTableModel()
    model.set_runs(names, {}, {})
    model.add_runs([(info, None) for info in infos[10:20]])
    model.add_runs([(info, None) for info in infos[20:30]])   # after every run known
    model.add_runs([(info, None) for info in infos[0:10]])    # before them: references change
    assert model.refs == references(infos[:30], None)
    model.set_reference(names[5])
    model.add_runs([(info, None) for info in infos[30:]])
    assert model.refs == references(infos, names[5])


def test_workers_started_ahead_summarise_as_the_thread_does_or_end_unused(many_runs_path):
    with open_trace(many_runs_path) as trace:
        names = list(trace.run_names)
        here = summarise(trace, names)
    with Workers(str(many_runs_path), 3) as workers:
        there = list(workers.summaries(names[:7], lambda: False))  # one chunk: two workers idle
    assert [(s[0], s[1]) for s in there] == [(s[0], s[1]) for s in here[:7]]
    unused = Workers(str(many_runs_path), 2)
    procs = list(unused._procs)
    unused.close()
    assert all(p.returncode is not None for p in procs)


def test_workers_handed_runs_early_answer_any_subset_in_order(many_runs_path):
    """The open hands the workers every run as soon as they are listed; the summary then asks for
    those still unknown (a few were read, or found damaged, meanwhile): it gets exactly those."""
    with open_trace(many_runs_path) as trace:
        names = list(trace.run_names)
        here = {s[0]: s for s in summarise(trace, names)}
    wanted = [n for i, n in enumerate(names) if i % 3 and i != 38]
    with Workers(str(many_runs_path), 2) as workers:
        workers.submit(names)
        assert workers.covers(wanted) and not workers.covers([*wanted, "run_missing"])
        with pytest.raises(RuntimeError):
            workers.submit(names)
        there = list(workers.summaries(wanted, lambda: False))
    assert [s[0] for s in there] == wanted
    assert [s[1] for s in there] == [here[n][1] for n in wanted]
    with Workers(str(many_runs_path), 2) as workers:
        workers.submit(names[:5])
        with pytest.raises(ValueError):
            next(workers.summaries(names[:6], lambda: False))


def test_browser_shows_write_order_unsorted_and_sorts_by_the_header(qtbot, many_runs_path):
    """By write order, ascending (the default), the proxy leaves the rows as the model holds them
    (sorting thousands of rows through Python callbacks took seconds); a header click sorts."""
    with open_trace(many_runs_path) as trace:
        names = list(trace.run_names)
        summaries = summarise(trace, names)
    browser = RunBrowser()
    qtbot.addWidget(browser)
    browser.set_runs(names, {}, {}, None, {n: "c" for n in names})
    browser.model.add_runs([(info, stats) for _, info, stats, _ in summaries])
    assert browser.proxy.sortColumn() == -1 and browser.shown_names() == names
    browser.table.header().setSortIndicator(COL["#"], QtCore.Qt.SortOrder.DescendingOrder)
    assert browser.shown_names() == names[::-1]
    browser.table.header().setSortIndicator(COL["#"], QtCore.Qt.SortOrder.AscendingOrder)
    assert browser.proxy.sortColumn() == -1 and browser.shown_names() == names
