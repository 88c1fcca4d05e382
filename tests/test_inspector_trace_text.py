"""Text from a trace is text: the command line escapes control characters and shortens long strings,
and the app shows a trace's strings literally (a name that looks like HTML is never rendered)."""

from __future__ import annotations

import h5py
import pytest

from inspector.cli import main
from inspector.terminal import MAX_LINE, printable, printable_line
from traces.synthetic import write_synthetic_trace

ESC_TITLE = "\x1b]0;pwned\x07\x1b[2J"      # sets the terminal's title, clears the screen
HTML = '<img src="/nonexistent/x.png"><b>bold</b>'
#: Characters that reorder or break a line wherever they are shown.
RIGHT_TO_LEFT, LINE_SEPARATOR = "\u202e", "\u2028"
BIDI_AND_BREAKS = "\u061c\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\x85"


@pytest.fixture(scope="module")
def hostile_text(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "text.h5"
    write_synthetic_trace(path, 2, L=2, E=4, K=2, V=32, B=2, T=16, R=2)
    with h5py.File(path, "r+") as f:
        f.attrs["producer"] = f"evil {ESC_TITLE}"
        f["runs/r000"].attrs["label"] = f"label {ESC_TITLE} {HTML}"
        f["runs/r000"].attrs["condition"] = "x" * 100_000 + "\u202e"
        f["runs/r001"].attrs["label"] = f"two{LINE_SEPARATOR}lines"
        f["runs/r001"].attrs["condition"] = f"{RIGHT_TO_LEFT}reversed"
        f.move("runs/r001", f"runs/r{RIGHT_TO_LEFT}reversed")
    return path


def test_info_prints_no_control_character_and_no_long_line(hostile_text, capsys):
    assert main(["info", str(hostile_text)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and not set(BIDI_AND_BREAKS) & set(out)
    assert "two\\u2028lines" in out
    assert "\\x1b]0;pwned\\x07" in out
    assert max(len(line) for line in out.splitlines()) <= MAX_LINE + 40
    assert "characters)" in out  # the long condition says how long it was


def test_printable_escapes_controls_and_keeps_text():
    assert printable_line("a\tb") == "a\tb"
    assert printable_line("\x1b[2Jx\x9b\u202e") == "\\x1b[2Jx\\x9b\\u202e"
    assert printable("one\ntwo") == "one\ntwo"
    assert not set(BIDI_AND_BREAKS) & set(printable_line(BIDI_AND_BREAKS))
    long = printable_line("y" * 1000)
    assert long.startswith("y" * MAX_LINE) and long.endswith("(1000 characters)")


def test_tooltips_never_render_a_trace_string_as_html(qapp):
    from inspector.qt import QtGui, plain_tip

    tip = plain_tip(f"run {HTML}")
    document = QtGui.QTextDocument()
    document.setHtml(tip)
    assert document.toPlainText() == f"run {HTML}"  # shown literally
    assert plain_tip("run-1 · row 2") == "run-1 · row 2"  # plain text stays as it was


def test_the_app_shows_a_label_literally(qtbot, make_window, hostile_text):
    from inspector.qt import Qt, QtWidgets

    window = make_window(hostile_text)
    model = window.browser.model
    qtbot.waitUntil(lambda: model.rowCount(model.index(0, 0)) > 0, timeout=10000)
    group = model.index(0, 0)
    tips = [model.data(model.index(r, c, group), Qt.ItemDataRole.ToolTipRole)
            for r in range(model.rowCount(group)) for c in range(model.columnCount())]
    shown = [t for t in tips if isinstance(t, str) and "img" in t]
    for tip in shown:
        assert "<img" not in tip and "&lt;img" in tip
    for label in window.findChildren(QtWidgets.QLabel):
        if "img" in label.text():
            assert label.textFormat() == Qt.TextFormat.PlainText, label.text()


def test_the_run_table_shows_bidirectional_and_line_separator_characters_escaped(qtbot, make_window,
                                                                                 hostile_text):
    from inspector.qt import Qt

    window = make_window(hostile_text)
    model = window.browser.model
    qtbot.waitUntil(lambda: model.rowCount(model.index(0, 0)) > 0, timeout=10000)
    texts = []
    for g in range(model.rowCount()):
        group = model.index(g, 0)
        texts.append(model.data(group, Qt.ItemDataRole.DisplayRole))
        texts += [model.data(model.index(r, c, group), Qt.ItemDataRole.DisplayRole)
                  for r in range(model.rowCount(group)) for c in range(model.columnCount())]
    shown = "".join(t for t in texts if isinstance(t, str))
    assert "reversed" in shown and not set(BIDI_AND_BREAKS) & set(shown)
