"""The views of the main window: one widget per declaration of `inspector.specs.registry.SPECS`,
in the registry's order. Each widget names its declaration (`View.name`); title, key and place come
from there.
"""

from __future__ import annotations

from inspector.specs.registry import SPECS
from inspector.views.base import View
from inspector.views.layers import LayersView
from inspector.views.load import LoadView
from inspector.views.pair import PairView
from inspector.views.routing import RoutingView
from inspector.views.runs import RunsView
from inspector.views.text import TextView

#: The widget of each view, by name.
WIDGETS: dict[str, type[View]] = {cls.name: cls for cls in
                                  (RoutingView, LayersView, LoadView, PairView, RunsView, TextView)}
if set(WIDGETS) != set(SPECS):
    raise ImportError(f"views without a widget or a declaration: {sorted(set(WIDGETS) ^ set(SPECS))}")

VIEWS: list[type[View]] = [WIDGETS[name] for name in SPECS]

__all__ = ["VIEWS", "WIDGETS", "View"]
