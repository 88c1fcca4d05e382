"""App memory over a 240-run trace: open it, let the run summary read every run, close it.

Runs the real main window on the offscreen platform and prints resident memory (from
/proc/self/statm) before opening, at the first usable run, once the background summary has read
all runs, after visiting every run in the browser, and after File > Close. The trace is generated
once under /tmp and reused.

    python bench/app_memory.py
    python bench/app_memory.py --runs 60     # quick
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from inspector.app.main_window import MainWindow  # noqa: E402 (after the platform is chosen)
from inspector.app.settings import Settings  # noqa: E402
from inspector.qt import QtCore, QtWidgets  # noqa: E402
from traces.synthetic import write_synthetic_trace  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


def wait(app: QtWidgets.QApplication, done, timeout: float = 600.0) -> None:
    deadline = time.perf_counter() + timeout
    while not done():
        app.processEvents()
        time.sleep(0.005)
        if time.perf_counter() > deadline:
            raise TimeoutError("the app did not get there")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=240)
    args = parser.parse_args()
    path = f"/tmp/moe_inspector_app_memory_{args.runs}.h5"
    if not os.path.exists(path):
        write_synthetic_trace(path, args.runs, L=8, E=8, K=2, V=256, B=8, T=128, R=16)
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    with tempfile.TemporaryDirectory() as folder:
        ini = QtCore.QSettings(os.path.join(folder, "bench.ini"), QtCore.QSettings.Format.IniFormat)
        window = MainWindow(Settings(ini))
        window.show()
        app.processEvents()
        marks = [("before open", rss_mib())]
        opened: list[bool] = []
        window.open_finished.connect(opened.append)
        window.open_path(path)
        wait(app, lambda: opened)
        marks.append(("first run shown", rss_mib()))
        wait(app, lambda: window._summary_job is None)
        marks.append((f"summary read {args.runs} runs", rss_mib()))
        for name in window.state.trace.run_names:
            window.state.set_run(name)
            app.processEvents()
        marks.append((f"visited {args.runs} runs", rss_mib()))
        window.close_trace()
        window.wait_for_jobs()
        gc.collect()
        app.processEvents()
        marks.append(("after File > Close", rss_mib()))
        window.close()
    size = os.path.getsize(path) / 1e6
    print(f"app memory, {args.runs}-run trace ({size:.0f} MB, L=8 B=8 T=128 E=8 V=256): "
          + ", ".join(f"{what} {mib:.0f} MiB" for what, mib in marks))


if __name__ == "__main__":
    main()
