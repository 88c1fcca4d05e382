"""The one declaration of each view: the app, the export dialog, the `export` command and these
tests read the same entries."""

import dataclasses

import numpy as np
import pytest

from inspector.cli import _parser
from inspector.export import SPECS, Selection, ViewSpec, read_export
from inspector.figure_data.table import INTEGER, POSITION, Column, TableSpec
from inspector.specs.registry import spec_of, view_names
from inspector.specs.selection import pick_row, pick_run
from inspector.views import VIEWS, WIDGETS, widget_class
from inspector.views.base import View
from traces import open_trace
from traces.analysis.measures import drops
from traces.analysis.rows import row_trace


def test_every_view_is_one_entry_with_one_widget():
    assert list(SPECS) == ["routing", "layers", "load", "pair", "runs", "compare", "causal_map", "text"]
    assert [cls.name for cls in VIEWS] == list(SPECS) and set(WIDGETS) == set(SPECS)
    fields = {f.name for f in dataclasses.fields(Selection)}
    for name, spec in SPECS.items():
        cls = WIDGETS[name]
        assert (cls.title, cls.shortcut, cls.area) == (spec.title, spec.key, spec.area)
        assert set(spec.options) <= fields, name
        assert callable(spec.builder()), name
        assert spec.area in ("tab", "bottom")
    assert len({s.title for s in SPECS.values()}) == len(SPECS)


def test_command_accepts_the_names_and_their_aliases():
    sub = next(a for a in _parser()._actions if a.dest == "command")
    view = next(a for a in sub.choices["export"]._actions if a.dest == "view")
    assert list(view.choices) == list(view_names())
    assert spec_of("overview").name == "layers" and spec_of("divergence").name == "pair"
    assert all(spec_of(n) is s for n, s in SPECS.items())


# -- a view added by one entry ------------------------------------------------------------------------
# Its own figure data, table, file stem and figure builder: what a new view brings with it.

@dataclasses.dataclass(frozen=True)
class DropsData:
    run: str
    row: int
    dropped: np.ndarray   # [T] dropped candidates over all layers


def read_drops(trace, sel: Selection) -> DropsData:
    run = pick_run(trace, sel)
    row = row_trace(run, pick_row(run, sel), logits=False)
    return DropsData(run.name, row.row, drops(row.expert, row.kept).sum(axis=0))


def drops_values(data: DropsData, sel: Selection) -> dict[str, np.ndarray]:
    return {"position": np.arange(data.dropped.size), "dropped": data.dropped}


drops_columns = TableSpec((POSITION, Column("dropped", INTEGER, "dropped candidates over all layers")),
                          "one row per position", drops_values)


def drops_stem(data: DropsData) -> list[object]:
    return [data.run, f"row{data.row}"]


def draw_drops(layout, style, data: DropsData, sel: Selection, fit: int = 0):
    from inspector.qt import pg

    plot = layout.addPlot(row=0, col=0, title="dropped candidates")
    plot.addItem(pg.BarGraphItem(x=np.arange(data.dropped.size), height=data.dropped, width=0.8))
    return plot


class DropsView(View):
    """The new view's widget: reads the state, draws nothing of interest here."""

    name = "drops"

    def redraw(self) -> None:
        self.data = self.export_state().data

    def export_state(self):
        state = self.state
        return read_export(state.trace, "drops", Selection(run=state.run.name, row=state.row))


@pytest.fixture
def drops_view(monkeypatch):
    """The registry with a "drops" view declared in it (and only there)."""
    spec = ViewSpec("drops", "Drops", "Ctrl+7", read_drops, f"{__name__}:draw_drops", drops_columns,
                    drops_stem, ("run", "request", "row"), widget=f"{__name__}:DropsView")
    monkeypatch.setitem(SPECS, "drops", spec)
    return spec


def test_a_view_added_by_one_entry_reaches_the_command_and_the_csv(drops_view, trace_path, tmp_path, capsys):
    from inspector.cli import main

    sub = next(a for a in _parser()._actions if a.dest == "command")
    view = next(a for a in sub.choices["export"]._actions if a.dest == "view")
    assert "drops" in view.choices
    out = tmp_path / "drops.csv"
    assert main(["export", str(trace_path), "--view", "drops", "--row", "1", "-o", str(out)]) == 0
    header, *lines = out.read_text().splitlines()
    with open_trace(trace_path) as trace:
        data = read_export(trace, "drops", Selection(row=1))
        assert data.stem() == f"drops-{data.data.run}-row1"
    assert header == "position,dropped"
    assert [int(line.split(",")[-1]) for line in lines] == data.data.dropped.tolist()
    assert sum(data.data.dropped) > 0   # the fixture drops candidates: the column says something


def test_a_view_added_by_one_entry_reaches_the_app_and_its_export(drops_view, trace_path, tmp_path, qtbot,
                                                                 isolated_settings):
    from inspector.app.export_dialog import ExportDialog, save_view
    from inspector.app.main_window import MainWindow
    from inspector.app.settings import Settings
    from inspector.qt import QtCore

    assert widget_class(drops_view) is DropsView
    assert (DropsView.title, DropsView.shortcut) == ("Drops", "Ctrl+7")
    settings = Settings(QtCore.QSettings(str(tmp_path / "s.ini"), QtCore.QSettings.Format.IniFormat))
    w = MainWindow(settings)   # the default views: the registry's, read now
    qtbot.addWidget(w)
    w.show()
    with qtbot.waitSignal(w.open_finished, timeout=10000):
        w.open_path(str(trace_path))
    titles = [w.tabs.tabText(i) for i in range(w.tabs.count())]
    assert titles[-1] == "Drops"
    drops_tab = w.views[-1]
    dialog = ExportDialog(w.views, drops_tab, settings)
    assert [dialog.view_box.itemText(i) for i in range(dialog.view_box.count())][-1] == "Drops"
    png = tmp_path / "drops.png"
    save_view(drops_tab, str(png))
    assert png.stat().st_size > 0
    w.close()
    w.wait_for_jobs()
