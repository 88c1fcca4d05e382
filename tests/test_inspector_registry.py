"""The one declaration of each view: the app, the export dialog, the `export` command and these
tests read the same entries."""

import dataclasses
import importlib

from inspector.cli import _parser
from inspector.export import SPECS, Selection
from inspector.specs.registry import DRAW_MODULE, NAMES, spec_of
from inspector.views import VIEWS, WIDGETS


def test_every_view_is_one_entry_with_one_widget():
    assert list(SPECS) == ["routing", "layers", "load", "pair", "runs", "text"]
    assert [cls.name for cls in VIEWS] == list(SPECS) and set(WIDGETS) == set(SPECS)
    fields = {f.name for f in dataclasses.fields(Selection)}
    draw = importlib.import_module(DRAW_MODULE)
    for name, spec in SPECS.items():
        cls = WIDGETS[name]
        assert (cls.title, cls.shortcut, cls.area) == (spec.title, spec.key, spec.area)
        assert set(spec.options) <= fields, name
        assert callable(getattr(draw, spec.figure)), name
        assert spec.area in ("tab", "bottom")
    assert len({s.title for s in SPECS.values()}) == len(SPECS)


def test_command_accepts_the_names_and_their_aliases():
    sub = next(a for a in _parser()._actions if a.dest == "command")
    view = next(a for a in sub.choices["export"]._actions if a.dest == "view")
    assert list(view.choices) == list(NAMES)
    assert spec_of("overview").name == "layers" and spec_of("divergence").name == "pair"
    assert all(spec_of(n) is s for n, s in SPECS.items())
