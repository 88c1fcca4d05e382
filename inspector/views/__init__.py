"""The views of the main window, registered in one list: adding a view is one line here.

Each entry is a `View` subclass with a `title` and an `area` ("tab" or "bottom").
"""

from __future__ import annotations

from inspector.views.base import View
from inspector.views.divergence import DivergenceView
from inspector.views.divergence_overview import DivergenceOverviewView
from inspector.views.load import LoadView
from inspector.views.overview import OverviewView
from inspector.views.routing import RoutingView
from inspector.views.text import TextView

VIEWS: list[type[View]] = [
    RoutingView,
    OverviewView,
    LoadView,
    DivergenceView,
    DivergenceOverviewView,
    TextView,
]

__all__ = ["VIEWS", "View"]
