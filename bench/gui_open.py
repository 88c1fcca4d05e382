"""GUI benchmark: open a >= 1 GB trace, switch layers and runs, pan and zoom a wide heatmap.

Runs the real main window on the offscreen platform and prints each measured figure beside its
target (and their ratio):

- open to first routing heatmap painted <= 1 s, resident memory growing <= 200 MB;
- switching layer or run repaints in <= 50 ms (drawn and painted, median and worst);
- a 4096-position x 64-expert heatmap pans and zooms without stutter: the time the event loop
  takes to handle each view change, painting included, while zooming in and panning (median
  <= 16.7 ms, 95th percentile <= 33.3 ms, worst <= 50 ms), beside the same changes of the bare
  image in a plain pyqtgraph plot (their ratio read as in bench/pairs.py).

Beside each repaint it times reading the same slice through `traces` alone, so the share of a
frame spent on drawing is visible. The traces are generated once under /tmp and reused.

    python bench/gui_open.py
    python bench/gui_open.py --runs 8          # a smaller trace, for a quick look
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
from pairs import HEADER, Pair, load_average  # noqa: E402

from inspector.app.main_window import MainWindow  # noqa: E402
from inspector.app.settings import Settings  # noqa: E402
from inspector.qt import QtCore, QtWidgets, pg  # noqa: E402
from inspector.views.routing import RoutingView  # noqa: E402
from traces import open_trace  # noqa: E402
from traces.synthetic import write_synthetic_trace  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
BIG = "/tmp/moe_inspector_gui_bench_1gb.h5"
WIDE = "/tmp/moe_inspector_gui_bench_wide.h5"


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


def settle_ms(app: QtWidgets.QApplication, rounds: int = 3) -> float:
    """Milliseconds the event loop needs to handle everything a view change posted, painting
    included (as the screen would get it: Qt coalesces the updates into the paints it makes)."""
    t0 = time.perf_counter()
    for _ in range(rounds):  # a paint can post a follow-up (axes laid out anew): a few rounds
        app.processEvents()
    return (time.perf_counter() - t0) * 1e3


def ensure(path: str, make) -> None:
    if not os.path.exists(path):
        print(f"generating {path} ...", flush=True)
        t0 = time.perf_counter()
        tmp = path + ".part"
        make(tmp)
        os.replace(tmp, path)
        print(f"  {os.path.getsize(path) / 1e9:.2f} GB in {time.perf_counter() - t0:.0f} s", flush=True)


def report(name: str, value: float, target: float, unit: str) -> None:
    verdict = "ok" if value <= target else "OVER"
    print(f"{name:<46} {value:9.1f} {unit:<3} target <= {target:g} {unit:<3} "
          f"ratio {value / target:5.2f}  {verdict}")


class Bench:
    """One main window with helpers that wait for the routing view to draw and paint."""

    def __init__(self, app: QtWidgets.QApplication, settings_dir: str) -> None:
        self.app = app
        ini = os.path.join(settings_dir, "bench.ini")
        settings = QtCore.QSettings(ini, QtCore.QSettings.Format.IniFormat)
        self.window = MainWindow(Settings(settings))
        self.window.resize(1600, 1000)
        self.window.show()
        self.routing = next(v for v in self.window.views if isinstance(v, RoutingView))
        self._drawn = False
        self.routing.drawn.connect(self._mark)

    def _mark(self) -> None:
        self._drawn = True

    def until_drawn_and_painted(self, timeout: float = 60.0) -> None:
        deadline = time.perf_counter() + timeout
        while not self._drawn:
            self.app.processEvents()
            if time.perf_counter() > deadline:
                raise TimeoutError("the routing view did not draw")
        self.routing.graphics.viewport().repaint()  # paint now, synchronously
        self._drawn = False

    def settle(self, seconds: float = 0.15) -> None:
        """Let deferred work (the text strip under the tabs) finish, as between two key presses."""
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            self.app.processEvents()
            time.sleep(0.005)

    def timed(self, action) -> float:
        """Milliseconds from `action()` to the routing view drawn and painted (after settling)."""
        self.settle()
        self._drawn = False
        t0 = time.perf_counter()
        action()
        self.until_drawn_and_painted()
        return (time.perf_counter() - t0) * 1e3

    def frame_ms(self) -> float:
        return settle_ms(self.app)

    def open(self, path: str) -> float:
        self._drawn = False
        t0 = time.perf_counter()
        self.window.open_path(path)
        self.until_drawn_and_painted()
        return (time.perf_counter() - t0) * 1e3

    def close(self) -> None:
        self.window.close()
        self.window.wait_for_jobs()


def read_ms(path: str, run: str, layer: int, row: int, repeat: int = 5) -> float:
    """Reading one (run, layer, row) slice of every per-token array through `traces` alone."""
    times = []
    with open_trace(path) as trace:
        for _ in range(repeat):
            r = trace.run(run)
            t0 = time.perf_counter()
            T = r.row_length(row)
            for arr in (r.router_logits, r.expert, r.gate, r.kept, r.slot):
                arr[layer, row, :T]
            r.group[layer, row, :T]
            r.step[row, :T]
            r.capacity[:, layer, :]
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


class BareHeatmap:
    """The reference: the same image in a plain pyqtgraph plot of the same size, nothing else."""

    def __init__(self, probs: np.ndarray, size: QtCore.QSize) -> None:
        self.widget = pg.PlotWidget()
        self.image = pg.ImageItem(probs, axisOrder="row-major")
        self.widget.addItem(self.image)
        self.widget.invertY(True)
        self.widget.resize(size)
        self.widget.show()

    def frame_ms(self, app: QtWidgets.QApplication) -> float:
        return settle_ms(app)


def frames(bench: Bench, n: int = 40) -> dict[str, list[float]]:
    """Frame times of zooming in from the whole row to 64 positions, then panning 128 positions wide,
    each frame of the inspector followed by the same frame of a bare heatmap (interleaved, so both
    see the same machine load)."""
    vb = bench.routing.figure.plot.vb
    T = bench.routing.data.n_positions
    E = bench.routing.data.n_experts
    bare = BareHeatmap(bench.routing.data.probs, bench.routing.graphics.size())
    out: dict[str, list[float]] = {"zoom": [], "zoom bare": [], "pan": [], "pan bare": []}

    def frame(kind: str, x0: float, x1: float) -> None:
        for target, name in ((vb, kind), (bare.widget.getPlotItem().vb, f"{kind} bare")):
            target.setRange(xRange=(x0, x1), yRange=(-0.5, E - 0.5), padding=0)
            out[name].append(bench.frame_ms() if target is vb else bare.frame_ms(bench.app))

    for i in range(n):
        width = T * (64 / T) ** (i / (n - 1))
        frame("zoom", T / 2 - width / 2, T / 2 + width / 2)
    width = 128  # about 10 px per position: the chosen-expert frames are drawn
    for i in range(n):
        x0 = (T - width) * i / (n - 1)
        frame("pan", x0, x0 + width)
    bare.widget.close()
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60, help="runs of the big trace (60: about 1.1 GB)")
    parser.add_argument("--path", default=BIG)
    parser.add_argument("--wide-path", default=WIDE)
    args = parser.parse_args(argv)
    ensure(args.path, lambda p: write_synthetic_trace(p, args.runs, seed=1))
    ensure(args.wide_path, lambda p: write_synthetic_trace(p, 2, L=2, E=64, K=2, V=64, B=2, T=4096, R=2,
                                                           seed=2))
    size_gb = os.path.getsize(args.path) / 1e9
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    with tempfile.TemporaryDirectory() as settings_dir:
        bench = Bench(app, settings_dir)
        app.processEvents()
        rss0 = rss_mb()
        open_ms = bench.open(args.path)
        rss1 = rss_mb()
        state = bench.window.state
        n_runs, L = len(state.names), state.n_layers
        print(f"\ntrace {args.path}: {size_gb:.2f} GB on disk, {n_runs} runs, run dims {state.run.dims}")
        print(f"platform {app.platformName()}, window {bench.window.width()}x{bench.window.height()}\n")
        report("open -> first heatmap painted", open_ms, 1000, "ms")
        report("resident memory growth at first paint", rss1 - rss0, 200, "MB")
        layer_ms = [bench.timed(lambda l=l: state.set_layer(l)) for l in list(range(1, L)) * 3 + [0]]
        names = state.names
        run_ms = [bench.timed(lambda n=n: state.set_run(n)) for n in names[1:21]]
        print("  layer switches (ms):", " ".join(f"{t:.0f}" for t in layer_ms))
        print("  run switches (ms):  ", " ".join(f"{t:.0f}" for t in run_ms))
        report("switch layer: drawn + painted (median)", statistics.median(layer_ms), 50, "ms")
        report("switch layer: drawn + painted (worst)", max(layer_ms), 50, "ms")
        report("switch run: drawn + painted (median)", statistics.median(run_ms), 50, "ms")
        report("switch run: drawn + painted (worst)", max(run_ms), 50, "ms")
        raw = read_ms(args.path, names[0], 1, int(state.run.probe_row))
        print(f"{'  same slice read through traces alone':<46} {raw:9.1f} ms  "
              f"(share of a layer switch: {raw / statistics.median(layer_ms):.0%})")
        bench.close()

        bench = Bench(app, settings_dir)
        wide_ms = bench.open(args.wide_path)
        d = bench.routing.data
        print(f"\nwide heatmap {args.wide_path}: {d.n_positions} positions x {d.n_experts} experts")
        report("open -> first heatmap painted", wide_ms, 1000, "ms")
        load_before = load_average()
        times = frames(bench)
        load_after = load_average()
        for name in ("zoom", "pan"):
            values, bare = times[name], times[f"{name} bare"]
            report(f"{name}: frame time (median)", statistics.median(values), 16.7, "ms")
            report(f"{name}: frame time (95th percentile)", float(np.percentile(values, 95)), 33.3, "ms")
            report(f"{name}: frame time (worst)", max(values), 50, "ms")
            pair = Pair(tuple(bare), tuple(values), load_before, load_after, os.cpu_count() or 1)
            print(f"  {HEADER}\n  {pair.line(f'{name}: inspector / bare image in a plain plot', scale=1)}")
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
