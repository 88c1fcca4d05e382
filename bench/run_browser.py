"""GUI benchmark: a trace of many runs opens, every run is summarised, and the window stays responsive.

Runs the real main window on the offscreen platform and prints each figure beside its target:

- 1,000 runs fully summarised (drops, completion and mark of every run in the browser) in <= 2 s
  from the open, and the window's resident memory <= 200 MB above the empty window's, at rest;
- 10,000 runs fully summarised in <= 10 s, every UI event handled within 100 ms meanwhile (a 10 ms
  timer's worst lateness, the event loop running as for a user).

The traces are generated once under /tmp and reused (the 10,000-run one takes a few minutes); the
writer gives them their run summary table, and `--without-table` also opens a copy without it (a
trace written before the table: every run is summarised from its arrays), alternating.

    python bench/run_browser.py
    python bench/run_browser.py --runs 1000        # one size only
    python bench/run_browser.py --runs 1000 --without-table --repeat 4
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from many_runs import trace_of  # noqa: E402
from pairs import load_average, overloaded  # noqa: E402

from inspector.app.main_window import MainWindow  # noqa: E402
from inspector.app.settings import Settings  # noqa: E402
from inspector.qt import QtCore, QtWidgets  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK_MS = 10


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


def report(name: str, value: float, target: float, unit: str) -> None:
    verdict = "ok" if value <= target else "OVER"
    print(f"{name:<52} {value:9.1f} {unit:<3} target <= {target:g} {unit:<3} "
          f"ratio {value / target:5.2f}  {verdict}", flush=True)


def cpu_s() -> tuple[float, float]:
    """CPU seconds used so far by this process and by its finished children (the summary workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def measure(app: QtWidgets.QApplication, path: str, settings_dir: str) -> dict[str, float]:
    """Open `path` in a fresh window and run the event loop until every run is summarised."""
    cpu_before = cpu_s()
    settings = QtCore.QSettings(os.path.join(settings_dir, "bench.ini"), QtCore.QSettings.Format.IniFormat)
    window = MainWindow(Settings(settings))
    window.resize(1600, 1000)
    window.show()
    for _ in range(5):
        app.processEvents()
    rest_before = rss_mb()
    loop = QtCore.QEventLoop()
    lateness: list[float] = []   # while the summary fills in (from its first result on)
    opening: list[float] = []    # from the open to the first summary (the first run drawn meanwhile)
    last = [0.0]
    marks: dict[str, float] = {}
    window.open_finished.connect(lambda ok: marks.setdefault("open_s", time.perf_counter() - t0))
    slow: list[tuple[float, float]] = []  # (seconds since the open, delay ms) of events over 100 ms

    def tick() -> None:
        now = time.perf_counter()
        if last[0]:
            late = (now - last[0]) * 1e3 - TICK_MS
            (lateness if "first_s" in marks else opening).append(late)
            if late > 100:
                slow.append((now - t0, late))
        last[0] = now
        model = window.browser.model
        if model.stats and "first_s" not in marks:
            marks["first_s"] = now - t0
        if (window.state.trace is not None and window._summary_job is None and model.names
                and len(model.stats) + len(model.unusable) >= len(model.names)):
            loop.quit()

    timer = QtCore.QTimer()
    timer.setInterval(TICK_MS)
    timer.timeout.connect(tick)
    t0 = time.perf_counter()
    window.open_path(path)
    timer.start()
    loop.exec()
    full_s = time.perf_counter() - t0
    timer.stop()
    end = time.perf_counter() + 1.0
    while time.perf_counter() < end:  # at rest
        app.processEvents()
        time.sleep(0.01)
    out = {"runs": len(window.browser.model.names), "full_s": full_s,
           "open_worst_ms": max(opening, default=0.0), **marks, "slow": slow,
           "rss_mb": rss_mb() - rest_before, "worst_ms": max(lateness, default=0.0),
           "p99_ms": (statistics.quantiles(lateness, n=100)[98] if len(lateness) > 100
                      else max(lateness, default=0.0)),
           "count": window.browser.count.text()}
    window.close()
    window.wait_for_jobs()
    out["cpu_window_s"], out["cpu_workers_s"] = (a - b for a, b in zip(cpu_s(), cpu_before, strict=True))
    return out


#: Seconds to every run summarised, by trace size (issue 37).
TARGET_S = {1000: 2.0, 10000: 10.0}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, action="append", help="trace sizes (default 1000 and 10000)")
    parser.add_argument("--without-table", action="store_true",
                        help="also open a copy of each trace without its run summary table (as written "
                             "before the table), alternating with the trace")
    parser.add_argument("--repeat", type=int, default=1, help="readings of each (default 1)")
    args = parser.parse_args(argv)
    sizes = args.runs or [1000, 10000]
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv)
    kinds = [True, False] if args.without_table else [True]
    paths = {(n, table): trace_of(n, table) for n in sizes for table in kinds}
    with tempfile.TemporaryDirectory() as settings_dir:
        for _ in range(args.repeat):
            for n in sizes:
                for table in kinds:
                    load_before = load_average()
                    m = measure(app, paths[n, table], settings_dir)
                    show(n, "with the run summary table" if table else "without the table", m, load_before)
    return 0


def show(n: int, kind: str, m: dict, load_before: float) -> None:
    note = overloaded(load_before, load_average())
    print(f"\n{n} runs, {kind}, browser says: {m['count']!r}; load average {load_before:.2f} -> "
          f"{load_average():.2f}" + (f"  NOISY: {note}" if note else ""))
    target = TARGET_S.get(n)
    report(f"{n} runs: open to every run summarised" + ("" if target else " (no target)"), m["full_s"],
           target or m["full_s"], "s")
    if n <= 1000:
        report(f"{n} runs: resident memory over the window at rest", m["rss_mb"], 200, "MB")
    report(f"{n} runs: worst UI event delay while filling in", m["worst_ms"], 100, "ms")
    print(f"{n} runs: worst UI event delay before the first summary (the first run drawn): "
          f"{m['open_worst_ms']:.0f} ms (no target); first run shown at {m.get('open_s', 0):.2f} s, "
          f"first summary at {m.get('first_s', 0):.2f} s; events over 100 ms (at s: ms): "
          + ", ".join(f"{at:.2f}: {ms:.0f}" for at, ms in m["slow"][:12]))
    report(f"{n} runs: 99th percentile UI event delay", m["p99_ms"], 100, "ms")
    print(f"{n} runs: CPU time (less sensitive to the load than the wall clock): window process "
          f"{m['cpu_window_s']:.1f} s, summary workers {m['cpu_workers_s']:.1f} s "
          f"({m['cpu_workers_s'] / max(m['runs'], 1) * 1e3:.1f} ms a run)")


if __name__ == "__main__":
    sys.exit(main())
