"""What a window shows of a trace, kept across a reload of the same file (Qt-free)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ShownPlace:
    """The run, row, layer and tab a window showed of the trace at `path`, to show again once the
    file is read anew (a recording committed runs; File > Reload)."""

    path: str
    run: str | None      # None: no run was shown (the first usable one is shown)
    row: int | None      # None: the run's probe row
    layer: int
    tab: int             # the index of the view's tab

    def of(self, path: str) -> ShownPlace | None:
        """This selection where it belongs to the trace at `path`, else None."""
        return self if path == self.path else None
