"""Nothing on screen a reader must decode: no spelling of a closed vocabulary (`router_flip`,
`token_near_tie`...) reaches any rendered text, in the app or an exported figure or caption, and a
cause's headline holds no parentheses inside parentheses. Every view of the two shipped examples and
of a serving engine's runs is drawn and every text it shows is read back."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest
from engine_trace import write_engine_trace
from paths import EXAMPLES

from inspector.export.fit import _tick_labels
from inspector.export.output import default_page, drawn, print_style
from inspector.figures.key import Key
from inspector.figures.marks import MarkAxis
from inspector.qt import QtCore, QtWidgets, pg
from inspector.specs.defaults import informative
from inspector.specs.registry import SPECS, read_export
from inspector.specs.selection import Selection
from traces import open_trace
from traces.vocabulary import Vocabulary


def vocabulary_words() -> set[str]:
    """Every spelling of every vocabulary of the trace and analysis packages that a reader could
    mistake for a word of the app: those joined by underscores."""
    import traces

    for module in pkgutil.walk_packages(traces.__path__, "traces."):
        importlib.import_module(module.name)

    def below(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from below(sub)

    # A kernel mode is the value a user gives `--kernel-mode` and reads in a run's condition (as
    # the recorder wrote it): a word of the command line, not an identifier to decode.
    from traces.records import KernelMode

    return {name for cls in below(Vocabulary) if cls is not KernelMode for name in cls.names() if "_" in name}


WORDS = vocabulary_words()
PATTERN = re.compile(r"(?<![\w/])(" + "|".join(sorted(map(re.escape, WORDS))) + r")(?![\w/])")


def leaks(texts) -> list[str]:
    return [t for t in texts if t and PATTERN.search(t)]


def plain(text: str) -> str:
    return re.sub(r"<[^>]+>", "", text or "")


def scene_texts(scene: QtWidgets.QGraphicsScene) -> list[str]:
    """Every text a figure draws: titles, labels, axes' names and ticks, keys, marks' names."""
    out = []
    for item in scene.items():
        if isinstance(item, pg.LabelItem):
            out.append(plain(item.text))
        elif isinstance(item, QtWidgets.QGraphicsTextItem):
            out.append(item.toPlainText())
        if isinstance(item, pg.AxisItem) and item.isVisible():
            out.append(item.label.toPlainText())
            out += [text for text, _ in _tick_labels(item)]
        if isinstance(item, MarkAxis):
            out += [text for text, _ in item.placed] + [m[1] for m in item.marks().values()]
        if isinstance(item, Key):
            out += item.texts()
    return out


def widget_texts(root: QtWidgets.QWidget) -> list[str]:
    """Every text the window shows: labels, buttons, rich text, tooltips, combo boxes and the items of
    its lists, trees and tables."""
    out = []
    for w in [root, *root.findChildren(QtWidgets.QWidget)]:
        out.append(w.toolTip())
        if isinstance(w, QtWidgets.QLabel):
            out.append(plain(w.text()))
        elif isinstance(w, QtWidgets.QAbstractButton):
            out.append(w.text())
        elif isinstance(w, QtWidgets.QTextEdit):
            out.append(w.toPlainText())
        elif isinstance(w, QtWidgets.QComboBox):
            out += [w.itemText(i) for i in range(w.count())]
        elif isinstance(w, QtWidgets.QAbstractItemView) and w.model() is not None:
            out += model_texts(w.model())
        if isinstance(w, pg.GraphicsView):
            out += scene_texts(w.scene())
    return out


def model_texts(model, parent=None, depth: int = 0) -> list[str]:
    parent = QtCore.QModelIndex() if parent is None else parent
    out = []
    for r in range(min(model.rowCount(parent), 200)):
        for c in range(model.columnCount(parent)):
            index = model.index(r, c, parent)
            for role in (QtCore.Qt.ItemDataRole.DisplayRole, QtCore.Qt.ItemDataRole.ToolTipRole):
                value = index.data(role)
                if isinstance(value, str):
                    out.append(value)
            if c == 0 and depth < 8 and model.rowCount(index) > 0:
                out += model_texts(model, index, depth + 1)
    return out


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    return {"example": EXAMPLES / "example.h5", "tiny-mixtral-bf16": EXAMPLES / "tiny-mixtral-bf16.h5",
            "engine": write_engine_trace(tmp_path_factory.mktemp("engine") / "engine.h5")}


def test_the_vocabularies_have_words_to_look_for():
    assert {"token_near_tie", "router_flip", "output_numeric"} <= WORDS
    assert leaks(["the cause is token_near_tie."]) and not leaks(["routing/router_logits", "a near-tie"])


@pytest.mark.parametrize("name", ["example", "tiny-mixtral-bf16", "engine"])
def test_no_exported_figure_or_caption_shows_a_vocabulary_spelling(qapp, traces, name):
    path = traces[name]
    for view, spec in SPECS.items():
        with open_trace(path) as trace:
            sel, _ = informative(trace, spec, Selection())
            try:
                export = read_export(trace, view, sel)
            except ValueError:
                continue  # a view this trace cannot show (no request held by several runs)
        with drawn(export, default_page(view, 100, size="page"), print_style(8.0)) as canvas:
            texts = scene_texts(canvas.widget.scene())
            texts.append(export.caption(list(getattr(canvas, "left_out", []))))
        assert texts and leaks(texts) == [], (name, view, leaks(texts))


@pytest.mark.parametrize("name", ["tiny-mixtral-bf16", "engine"])
def test_no_view_of_the_app_shows_a_vocabulary_spelling(qtbot, make_window, traces, name):
    w = make_window(traces[name])
    qtbot.waitUntil(lambda: not w.progress.isVisible(), timeout=20000)
    for view in [v for v in w.views if v.area == "tab"]:
        w.tabs.setCurrentWidget(view)
        qtbot.waitUntil(lambda v=view: not v._dirty, timeout=10000)
        qtbot.wait(20)
        texts = widget_texts(w)
        assert leaks(texts) == [], (name, view.name, leaks(texts))


def _depth(text: str) -> int:
    depth = most = 0
    for c in text:
        depth += (c == "(") - (c == ")")
        most = max(most, depth)
    return most


@pytest.mark.parametrize("name", ["example", "tiny-mixtral-bf16"])
def test_every_headline_reads_without_parentheses_inside_parentheses(traces, name):
    from inspector.figure_data.divergence_source import DivergenceSource

    with open_trace(traces[name]) as trace:
        source = DivergenceSource(trace)
        records = source.records()
        assert records
        seen = 0
        for record in records[:40]:
            choices = source.choices(record.request)
            a = next((c for c in choices if (c.run, c.row) == (record.ref_run, record.ref_row)), None)
            b = next((c for c in choices if (c.run, c.row) == (record.run, record.row)), None)
            if a is None or b is None:
                continue
            cause = source.pair(a, b, 0).cause
            assert _depth(cause.headline) <= 1, cause.headline
            assert not leaks([cause.headline, cause.sentence]), cause.headline
            seen += 1
    assert seen


def test_the_glossary_in_docs_is_the_tooltips_glossary():
    from paths import ROOT

    from inspector.views.glossary import GLOSSARY, explain, markdown

    doc = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    assert markdown() in doc
    # Every term a headline of the example uses is explained in its tooltip.
    text = explain("Proven cause: capacity — at position 28; the first difference, at position 0, is not it; "
                   "t* at 29, not recorded")
    for term in ("proven cause", "capacity", "first difference", "t*", "not recorded"):
        assert f"{term}: {GLOSSARY[term]}" in text
