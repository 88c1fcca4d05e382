"""A plain text progress bar for long recordings (no dependency beyond the standard library).

Experiments report progress through a callback `progress(done, total, label)` called after each
completed run; the command line passes a `ProgressBar`, tests pass any callable. On a terminal the
bar redraws one line; into a file or pipe it writes one line per tenth of the work, so logs stay
readable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

#: The progress callback experiments take: (runs done, runs in total, label of the last run).
ProgressFn = Callable[[int, int, str], None]


def no_progress(done: int, total: int, label: str) -> None:
    """A progress callback that reports nothing."""


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class ProgressBar:
    """`[#######.......]  12/30  0:41 elapsed, ~1:02 left  E1 dropless` on a stream (stderr)."""

    def __init__(self, stream: TextIO, width: int = 28, clock: Callable[[], float] = time.monotonic):
        self.stream = stream
        self.width = width
        self.clock = clock
        self.started = clock()
        self.interactive = bool(getattr(stream, "isatty", lambda: False)())
        self._last_tenth = -1
        self._drawn = 0  # length of the line on screen, 0 when none

    def text(self, done: int, total: int, label: str) -> str:
        """The bar's text for `done` of `total`."""
        total = max(total, 1)
        filled = min(self.width, self.width * done // total)
        elapsed = self.clock() - self.started
        left = f", ~{_clock(elapsed * (total - done) / done)} left" if 0 < done < total else ""
        return (f"[{'#' * filled}{'.' * (self.width - filled)}] {done:>{len(str(total))}}/{total}  "
                f"{_clock(elapsed)} elapsed{left}  {label}")

    def __call__(self, done: int, total: int, label: str) -> None:
        line = self.text(done, total, label)
        if self.interactive:
            line = line[:120]
            self.stream.write("\r" + line.ljust(self._drawn))  # blank out a longer previous line
            self._drawn = len(line)
            if done >= total:
                self.stream.write("\n")
                self._drawn = 0
        else:
            tenth = 10 * done // max(total, 1)
            if tenth != self._last_tenth or done >= total:
                self._last_tenth = tenth
                self.stream.write(line + "\n")
        self.stream.flush()

    def finish(self) -> None:
        """End the bar's line (after an interrupt, so the next message starts on its own line)."""
        if self.interactive and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = 0
