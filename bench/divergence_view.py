"""Speed of the side-by-side divergence view: how long it takes to show a new pair of runs.

Target: <= 100 ms from picking run B in the view's combo box to the view painted, on a synthetic
trace of 30 runs x 512 positions x 8 layers x 8 experts (top-2, vocabulary 256, four rows per
batch, gzip). Every pair is new (run A = r000, run B = each other run in turn, rows not read
before), so the time includes reading both rows from the file, the cause and curves of the pair,
the figure data, drawing the figure and both texts, and painting the view offscreen. For scale the
same is timed for a pair already seen (rows memoised) and for a layer change, and the new-pair
time is split into its parts, all in one process. With the load average above the core count before
or after, the verdict is "noisy — rerun" instead of ok / OVER.

    .venv/bin/python bench/divergence_view.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from pairs import NOISY, load_average, overloaded  # noqa: E402

from inspector.app.main_window import MainWindow  # noqa: E402
from inspector.app.settings import Settings  # noqa: E402
from inspector.figure_data.divergence_source import DivergenceSource  # noqa: E402
from inspector.figure_data.pair import pair_figure_data  # noqa: E402
from inspector.figures.divergence_text import A_COLOR, B_COLOR, completion_html  # noqa: E402
from inspector.figures.style import FigureStyle  # noqa: E402
from inspector.qt import QtCore, QtWidgets  # noqa: E402
from inspector.views.pair import PairView  # noqa: E402
from traces import open_trace  # noqa: E402
from traces.synthetic import write_synthetic_trace  # noqa: E402

TARGET_MS = 100.0
N, T, L, E, K, V, B = 30, 512, 8, 8, 2, 256, 4


def wait_drawn(app: QtWidgets.QApplication, view: PairView, start) -> float:
    """Run `start()`, process events until the view redrew, paint it; milliseconds taken."""
    done = []
    view.drawn.connect(lambda: done.append(True))
    t0 = time.perf_counter()
    start()
    while not done:
        app.processEvents()
    view.repaint()
    ms = (time.perf_counter() - t0) * 1e3
    view.drawn.disconnect()
    return ms


def open_window(app: QtWidgets.QApplication, path: str, folder: str) -> tuple[MainWindow, PairView]:
    ini = QtCore.QSettings.Format.IniFormat
    settings = Settings(QtCore.QSettings(os.path.join(folder, "settings.ini"), ini))
    window = MainWindow(settings)
    window.resize(1500, 950)
    window.show()
    opened = []
    window.open_finished.connect(opened.append)
    window.open_path(path)
    while not opened:
        app.processEvents()
    if opened != [True]:
        raise SystemExit(f"could not open {path}")
    view = next(v for v in window.views if isinstance(v, PairView))
    wait_drawn(app, view, lambda: window.tabs.setCurrentWidget(view))
    # The run browser summarises every run in the background after opening; let it finish first.
    window.wait_for_jobs()
    for _ in range(20):
        app.processEvents()
    return window, view


def parts(path: str, runs: list[str]) -> dict[str, float]:
    """Median milliseconds of each part of a new pair, outside the window (same process)."""
    times: dict[str, list[float]] = {"read both rows": [], "cause, curves and figure data": [],
                                     "texts as HTML": []}
    with open_trace(path) as trace:
        source = DivergenceSource(trace)
        a = source.choices(0)[0]
        for name in runs:
            b = next(c for c in source.choices(0) if c.run == name)
            fresh = DivergenceSource(trace)  # nothing memoised: both rows are read
            t0 = time.perf_counter()
            row_a, row_b = fresh.row(a.run, a.row), fresh.row(b.run, b.row)
            t1 = time.perf_counter()
            data = pair_figure_data(row_a, row_b, 0, vocab=source.vocab, capacity_a=source.capacity(a.run, 0),
                                    capacity_b=source.capacity(b.run, 0), record=None)
            t2 = time.perf_counter()
            completion_html(data.text_a, "A", A_COLOR, FigureStyle())
            completion_html(data.text_b, "B", B_COLOR, FigureStyle())
            t3 = time.perf_counter()
            for key, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2), strict=True):
                times[key].append(dt * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", help="write the synthetic trace here (and reuse it if present)")
    args = parser.parse_args()
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([])
    with tempfile.TemporaryDirectory() as folder:
        path = args.keep or str(Path(folder) / "divergence.h5")
        if not os.path.exists(path):
            t0 = time.perf_counter()
            write_synthetic_trace(path, N, L=L, E=E, K=K, V=V, B=B, T=T, R=8, seed=3)
            print(f"wrote {path} in {time.perf_counter() - t0:.1f} s")
        window, view = open_window(app, path, folder)
        print(f"{N} runs x {T} positions x {L} layers x {E} experts (K={K}, V={V}, B={B}), side-by-side view "
              f"{view.width()}x{view.height()} px offscreen, run A = {view.data.run_a}:")
        names = [c.run for c in view.picker.choices]
        others = [n for n in names if n != view.data.run_a and n != view.data.run_b]
        load_before = load_average()
        new = [wait_drawn(app, view, lambda n=n: view.picker.pick("B", n)) for n in others]
        load_after = load_average()
        noise = overloaded(load_before, load_after)
        seen = [wait_drawn(app, view, lambda n=n: view.picker.pick("B", n)) for n in others[:10]]
        layer = [wait_drawn(app, view, lambda i=i: window.state.set_layer(i % L)) for i in range(1, 11)]
        median, worst = statistics.median(new), max(new)
        print(f"  new pair (rows read from the file): median {median:.1f} ms, max {worst:.1f} ms over "
              f"{len(new)} pairs (target <= {TARGET_MS:.0f} ms, median {median / TARGET_MS:.2f} of the "
              f"target; load average {load_before:.2f} -> {load_after:.2f}) "
              f"{NOISY + f' ({noise})' if noise else 'ok' if median <= TARGET_MS else 'OVER'}")
        print(f"  pair seen before (rows memoised): median {statistics.median(seen):.1f} ms")
        print(f"  layer change, same pair: median {statistics.median(layer):.1f} ms")
        print(f"  t* of the last pair: {view.data.t_star}; cause: {view.data.cause.cause}")
        split = parts(path, others[:10])
        rest = median - sum(split.values())
        print("  parts of a new pair (median ms): " + ", ".join(f"{k} {v:.1f}" for k, v in split.items())
              + f", drawing and painting the rest ~{rest:.1f}")
        window.close()
        window.wait_for_jobs()


if __name__ == "__main__":
    main()
