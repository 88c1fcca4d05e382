"""Window-level behaviour: settings that persist, recent files, drag and drop, reload, close,
and the `view` command's start-up (example trace or a friendly empty window)."""

import argparse

import pytest

from inspector.app import launch as launch_module
from inspector.app.example import example_path
from inspector.app.launch import launch
from inspector.app.main_window import MainWindow
from inspector.app.settings import MAX_RECENT, Settings
from inspector.commands import view as view_command
from inspector.qt import Qt, QtCore, QtGui, QtWidgets
from inspector.views.routing import RoutingView
from inspector.views.text import TextView
from traces.synthetic import write_synthetic_trace


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    folder = tmp_path_factory.mktemp("win")
    paths = []
    for i, L in enumerate((3, 2)):
        path = folder / f"t{i}.h5"
        write_synthetic_trace(path, 3, L=L, E=4, K=2, V=64, B=3, T=24, R=2, seed=i)
        paths.append(path)
    return paths


@pytest.fixture
def settings_file(tmp_path):
    ini, user = QtCore.QSettings.Format.IniFormat, QtCore.QSettings.Scope.UserScope
    QtCore.QSettings.setPath(ini, user, str(tmp_path))
    return str(tmp_path / "settings.ini")


def new_settings(path):
    return Settings(QtCore.QSettings(path, QtCore.QSettings.Format.IniFormat))


def make_window(qtbot, settings_file, **kwargs):
    w = MainWindow(new_settings(settings_file), **kwargs)
    qtbot.addWidget(w)
    w.show()
    return w


def open_and_wait(qtbot, w, path):
    with qtbot.waitSignal(w.open_finished, timeout=10000) as blocker:
        w.open_path(str(path))
    assert blocker.args == [True]
    shown = w.tabs.currentWidget()  # hidden views draw only when shown
    qtbot.waitUntil(lambda: shown.data is not None and not shown._dirty, timeout=5000)
    return next(v for v in w.views if isinstance(v, RoutingView))


def finish(w):
    w.close()
    w.wait_for_jobs()


def test_choices_persist_between_launches(qtbot, settings_file, traces):
    w = make_window(qtbot, settings_file)
    routing = open_and_wait(qtbot, w, traces[0])
    routing.colormap.setCurrentText("inferno")
    routing.fit.setChecked(True)
    text = next(v for v in w.views if isinstance(v, TextView))
    text.mode.setCurrentIndex(2)
    w.state.set_layer(2)
    w.tabs.setCurrentIndex(1)
    w.resize(731, 533)  # fits the offscreen screen (800 x 600), if the views' minimum widths allow
    size = (w.width(), w.height())
    w.main.setSizes([250, 470])
    main_state = w.main.saveState()
    finish(w)

    w2 = make_window(qtbot, settings_file)
    routing2 = next(v for v in w2.views if isinstance(v, RoutingView))
    assert routing2.colormap.currentText() == "inferno" and routing2.fit.isChecked()
    assert next(v for v in w2.views if isinstance(v, TextView)).mode.currentIndex() == 2
    assert w2.tabs.currentIndex() == 1
    assert (w2.width(), w2.height()) == size and w2.height() == 533
    assert w2.main.saveState() == main_state
    assert w2.settings.recent_files()[0] == str(traces[0])
    # The last layer comes back, clamped to what the next trace has.
    open_and_wait(qtbot, w2, traces[0])
    assert w2.state.layer == 2
    open_and_wait(qtbot, w2, traces[1])
    assert w2.state.layer == 1
    finish(w2)


def test_recent_files_menu_and_clear(qtbot, settings_file, traces):
    w = make_window(qtbot, settings_file)
    for path in (traces[0], traces[1], traces[0]):
        open_and_wait(qtbot, w, path)
    w.fill_recent()
    entries = [a.text() for a in w.recent_menu.actions() if a.text() and not a.isSeparator()]
    assert entries[:2] == [str(traces[0]), str(traces[1])] and entries[-1] == "Clear recent files"
    # Choosing an entry opens it.
    with qtbot.waitSignal(w.open_finished, timeout=10000):
        w.recent_menu.actions()[1].trigger()
    assert w.path == str(traces[1])
    next(a for a in w.recent_menu.actions() if a.text() == "Clear recent files").trigger()
    assert w.settings.recent_files() == []
    for i in range(MAX_RECENT + 3):
        w.settings.add_recent(f"/tmp/x{i}.h5")
    assert len(w.settings.recent_files()) == MAX_RECENT
    finish(w)


def test_drop_files_opens_first_here_and_others_in_new_windows(qtbot, settings_file, traces):
    opened_elsewhere = []
    w = make_window(qtbot, settings_file, open_new_window=opened_elsewhere.append)
    mime = QtCore.QMimeData()
    mime.setUrls([QtCore.QUrl.fromLocalFile(str(p)) for p in traces])
    enter = QtGui.QDragEnterEvent(QtCore.QPoint(10, 10), Qt.DropAction.CopyAction, mime,
                                  Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    w.dragEnterEvent(enter)
    assert enter.isAccepted()
    drop = QtGui.QDropEvent(QtCore.QPointF(10, 10), Qt.DropAction.CopyAction, mime,
                            Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    with qtbot.waitSignal(w.open_finished, timeout=10000):
        w.dropEvent(drop)
    assert w.path == str(traces[0]) and opened_elsewhere == [str(traces[1])]
    finish(w)


def test_reload_keeps_selection_and_close_returns_to_welcome(qtbot, settings_file, traces):
    w = make_window(qtbot, settings_file)
    open_and_wait(qtbot, w, traces[0])
    w.state.set_run("r002")
    w.state.set_row(2 if w.state.row != 2 else 1)
    row = w.state.row
    w.state.set_layer(1)
    old_trace = w.state.trace
    with qtbot.waitSignal(w.open_finished, timeout=10000):
        w.reload_action.trigger()
    assert w.state.trace is not old_trace
    assert (w.state.run.name, w.state.row, w.state.layer) == ("r002", row, 1)
    assert w.browser.current_name() == "r002"
    w.close_action.trigger()
    assert w.state.trace is None and w.stack.currentWidget() is w.welcome
    assert not w.reload_action.isEnabled() and not w.close_action.isEnabled()
    assert w.windowTitle() == "moe-inspector"
    finish(w)


def test_launch_without_files_opens_the_example_or_says_why(qtbot, settings_file, traces, tmp_path,
                                                            monkeypatch):
    assert example_path().parts[-3:] == ("traces", "examples", "example.h5")
    monkeypatch.setattr(launch_module, "example_path", lambda: tmp_path / "absent.h5")
    windows = launch([], new_settings(settings_file))
    qtbot.addWidget(windows[0])
    assert len(windows) == 1 and windows[0].path is None
    assert "example trace is not installed" in windows[0].welcome.label.text()
    finish(windows[0])
    monkeypatch.setattr(launch_module, "example_path", lambda: traces[1])
    windows = launch([], new_settings(settings_file))
    qtbot.addWidget(windows[0])
    qtbot.waitUntil(lambda: windows[0].path == str(traces[1]), timeout=10000)
    finish(windows[0])


def test_launch_opens_one_window_per_file(qtbot, settings_file, traces):
    windows = launch([str(p) for p in traces], new_settings(settings_file))
    for w in windows:
        qtbot.addWidget(w)
    qtbot.waitUntil(lambda: [w.path for w in windows] == [str(p) for p in traces], timeout=10000)
    # The window factory also serves drops of several files.
    windows[0].open_new_window(str(traces[1]))
    assert len(windows) == 3
    for w in windows:
        finish(w)


def test_view_command_arguments_and_run(qtbot, settings_file, traces, tmp_path, monkeypatch):
    parser = argparse.ArgumentParser()
    view_command.add_arguments(parser)
    args = parser.parse_args([str(traces[0]), str(traces[1])])
    assert args.files == [str(traces[0]), str(traces[1])]
    assert parser.parse_args([]).files == []
    monkeypatch.setattr(view_command, "_log_file", lambda: tmp_path / "inspector.log")
    monkeypatch.setattr(QtWidgets.QApplication, "exec", lambda self: 0)
    made = []
    real_launch = launch_module.launch

    def recording_launch(files, settings=None):
        windows = real_launch(files, new_settings(settings_file))
        made.extend(windows)
        return windows

    monkeypatch.setattr(launch_module, "launch", recording_launch)
    assert view_command.run(parser.parse_args([str(traces[0])])) == 0
    assert len(made) == 1
    qtbot.addWidget(made[0])
    qtbot.waitUntil(lambda: made[0].path == str(traces[0]), timeout=10000)
    finish(made[0])


def test_the_plot_has_the_keyboard_at_open_and_the_filter_takes_it_on_ctrl_f(qtbot, make_window, traces):
    w = make_window()
    w.activateWindow()
    qtbot.waitUntil(lambda: w.isActiveWindow(), timeout=3000)
    with qtbot.waitSignal(w.open_finished, timeout=10000):
        w.open_path(str(traces[0]))
    view = w.tabs.currentWidget()
    qtbot.waitUntil(lambda: QtWidgets.QApplication.focusWidget() is view.graphics, timeout=3000)
    assert w.browser.filter.focusPolicy() == Qt.FocusPolicy.ClickFocus  # never by itself
    layer, row = w.state.layer, w.state.row
    qtbot.keyClick(QtWidgets.QApplication.focusWidget(), Qt.Key.Key_Right)  # at once, no click first
    assert w.state.layer == layer + 1
    last = row == int(w.state.run.batch_size) - 1
    qtbot.keyClick(QtWidgets.QApplication.focusWidget(), Qt.Key.Key_PageUp if last else Qt.Key.Key_PageDown)
    assert w.state.row == row + (-1 if last else 1)
    qtbot.keyClick(QtWidgets.QApplication.focusWidget(), Qt.Key.Key_Home)
    assert w.state.row == int(w.state.run.probe_row)
    qtbot.keyClick(QtWidgets.QApplication.focusWidget(), Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert QtWidgets.QApplication.focusWidget() is w.browser.filter
