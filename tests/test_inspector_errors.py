"""Bad input: corrupt, foreign and missing files each give one clear dialog, and the app stays usable;
an unexpected exception becomes a dialog without a traceback."""

import sys

import h5py
import numpy as np
import pytest
from old_format import without_run_summaries

from inspector.app.errors import ExceptHook
from inspector.qt import QtCore, QtWidgets
from inspector.views.routing import RoutingView
from traces.synthetic import write_synthetic_trace


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    path = tmp_path_factory.mktemp("err") / "good.h5"
    write_synthetic_trace(path, 3, L=2, E=4, K=2, V=64, B=3, T=24, R=2)
    return path


@pytest.fixture
def dialogs(monkeypatch):
    """Record error dialogs instead of blocking on them."""
    shown = []

    def critical(parent, title, text, *args, **kwargs):
        shown.append((title, text))
        return QtWidgets.QMessageBox.StandardButton.Ok

    monkeypatch.setattr(QtWidgets.QMessageBox, "critical", staticmethod(critical))
    return shown


def open_and_wait(qtbot, w, path) -> bool:
    with qtbot.waitSignal(w.open_finished, timeout=10000) as blocker:
        w.open_path(str(path))
    return blocker.args[0]


def corrupt(tmp_path):
    path = tmp_path / "corrupt.h5"
    path.write_bytes(b"\x89HDF\r\n\x1a\n" + np.random.default_rng(0).bytes(4096))
    return path


def foreign(tmp_path):
    path = tmp_path / "foreign.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("images", data=np.zeros((4, 4)))
        f.attrs["format"] = "someone-elses-format"
    return path


def missing(tmp_path):
    return tmp_path / "no-such-trace.h5"


@pytest.mark.parametrize("make", [corrupt, foreign, missing], ids=["corrupt", "foreign", "missing"])
def test_bad_file_shows_one_dialog_and_the_app_stays_usable(qtbot, empty_window, dialogs, good, tmp_path,
                                                            make):
    bad = make(tmp_path)
    assert not open_and_wait(qtbot, empty_window, bad)
    assert len(dialogs) == 1
    title, text = dialogs[0]
    assert title == "Cannot open trace"
    assert str(bad) in text and "Traceback" not in text
    assert empty_window.state.trace is None and empty_window.stack.currentWidget() is empty_window.welcome
    # Still usable: a good file opens and draws.
    assert open_and_wait(qtbot, empty_window, good)
    routing = next(v for v in empty_window.views if isinstance(v, RoutingView))
    qtbot.waitUntil(lambda: routing.data is not None, timeout=5000)
    # A bad file while a good one is open leaves the good one on screen.
    assert not open_and_wait(qtbot, empty_window, bad)
    assert len(dialogs) == 2
    assert empty_window.state.trace is not None and empty_window.state.trace.path == str(good)
    with qtbot.waitSignal(routing.drawn, timeout=5000):
        empty_window.state.set_layer(1)
    assert routing.data.layer == 1


def test_missing_file_leaves_the_recent_list(qtbot, empty_window, dialogs, good, tmp_path):
    gone = tmp_path / "gone.h5"
    gone.write_bytes(good.read_bytes())
    assert open_and_wait(qtbot, empty_window, gone)
    assert str(gone) in empty_window.settings.recent_files()
    empty_window.close_trace()
    gone.unlink()
    assert not open_and_wait(qtbot, empty_window, gone)
    assert str(gone) not in empty_window.settings.recent_files()


def _damaged(good, tmp_path, table: bool):
    """A copy of `good` whose run r001 has a dataset of a wrong dtype and whose r002 is incomplete."""
    path = tmp_path / "damaged.h5"
    path.write_bytes(good.read_bytes())
    if not table:
        without_run_summaries(path)
    with h5py.File(path, "r+") as f:
        del f["runs/r001/routing/kept"]
        f["runs/r001/routing/kept"] = np.zeros((2, 3, 24, 2), dtype=np.float32)  # wrong dtype
        f["runs/r002"].attrs["complete"] = False
    return path


def test_damaged_run_is_listed_not_fatal(qtbot, empty_window, dialogs, good, tmp_path):
    """A trace without the run summary table: the background check greys the damaged run."""
    assert open_and_wait(qtbot, empty_window, _damaged(good, tmp_path, table=False))
    assert not dialogs
    model = empty_window.browser.model
    qtbot.waitUntil(lambda: not empty_window.progress.isVisible(), timeout=10000)
    assert list(model.infos) == ["r000"] and model.names == ["r000", "r001", "r002"]
    assert set(model.unusable) == {"r001", "r002"}
    assert empty_window.state.names == ["r000"]
    assert "kept" in model.unusable["r001"] and "incomplete" in model.unusable["r002"]
    assert "2 incomplete or damaged" in empty_window.browser.count.text()
    greyed = model.index_of("r002", 1)
    assert model.flags(greyed) == QtCore.Qt.ItemFlag.NoItemFlags  # listed, not selectable
    # Selecting a damaged run before the background check reached it: one dialog, nothing else.
    empty_window.state.unusable.discard("r001")
    empty_window._run_selected("r001")
    assert len(dialogs) == 1 and "kept" in dialogs[0][1]
    assert empty_window.state.run.name == "r000" and "r001" in empty_window.state.unusable


def test_damaged_run_of_the_summary_table_is_greyed_once_shown(qtbot, empty_window, dialogs, good, tmp_path):
    """With the run summary table the runs are listed from it and checked when shown: the damaged
    run is listed from its row; selecting it gives one dialog and greys it."""
    assert open_and_wait(qtbot, empty_window, _damaged(good, tmp_path, table=True))
    model = empty_window.browser.model
    assert not dialogs and not empty_window.progress.isVisible()  # nothing left to read in the background
    assert list(model.stats) == ["r000", "r001"] and set(model.unusable) == {"r002"}
    assert "incomplete" in model.unusable["r002"]
    assert "1 incomplete or damaged" in empty_window.browser.count.text()
    empty_window._run_selected("r001")
    assert len(dialogs) == 1 and "kept" in dialogs[0][1]
    assert empty_window.state.run.name == "r000" and "r001" in empty_window.state.unusable
    assert set(model.unusable) == {"r001", "r002"} and "kept" in model.unusable["r001"]
    assert "2 incomplete or damaged" in empty_window.browser.count.text()
    assert model.flags(model.index_of("r001", 1)) == QtCore.Qt.ItemFlag.NoItemFlags


def test_unexpected_exception_becomes_a_dialog_without_traceback(qtbot, empty_window, dialogs):
    hook = ExceptHook(lambda: empty_window).install()
    try:
        try:
            raise ZeroDivisionError("division by zero in a slot")
        except ZeroDivisionError:
            sys.excepthook(*sys.exc_info())
    finally:
        hook.uninstall()
    assert len(dialogs) == 1
    title, text = dialogs[0]
    assert title == "Unexpected error"
    assert "ZeroDivisionError: division by zero in a slot" in text
    assert "Traceback" not in text and 'File "' not in text
    assert sys.excepthook is not hook
