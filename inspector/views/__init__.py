"""The views of the main window: one widget per declaration of `inspector.specs.registry.SPECS`,
in the registry's order. Each widget names its declaration (`View.name`); title, key and place come
from there. A declaration finds its widget by name (`widget_class`), so a new view is its entry in
the registry and its own files, with no list to extend here.
"""

from __future__ import annotations

import importlib

from inspector.specs.registry import SPECS, ViewSpec
from inspector.views.base import View


def widget_class(spec: ViewSpec) -> type[View]:
    """The widget of `spec`: the class its `widget` names, else the `View` whose `name` is the
    view's in module `inspector.views.<name>`."""
    module, _, name = (spec.widget or f"inspector.views.{spec.name}").partition(":")
    found = vars(importlib.import_module(module))
    classes = [found[name]] if name else [c for c in found.values() if isinstance(c, type)
                                          and issubclass(c, View) and c.__dict__.get("name") == spec.name]
    if len(classes) != 1 or not issubclass(classes[0], View) or classes[0].name != spec.name:
        raise ImportError(f"the {spec.name} view has no widget in {module} (a View with name = "
                          f"{spec.name!r})")
    return classes[0].bind(spec)


def view_classes() -> list[type[View]]:
    """The widget of every declared view, in the registry's order (read when asked)."""
    return [widget_class(spec) for spec in SPECS.values()]


#: The widgets of the views declared when the app starts, in the registry's order.
VIEWS: list[type[View]] = view_classes()
#: The widget of each view, by name.
WIDGETS: dict[str, type[View]] = {cls.name: cls for cls in VIEWS}

__all__ = ["VIEWS", "WIDGETS", "View", "view_classes", "widget_class"]
