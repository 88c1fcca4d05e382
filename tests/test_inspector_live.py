"""Following a trace while another process records it: reload closes every handle before it reopens
(HDF5 would otherwise serve the stale view), new runs appear as they complete, and the status bar
says "live" while a writer holds the trace."""

import subprocess
import sys

from paths import ROOT

WRITER = """
import sys
from tests.test_traces_locking import add_run, new_writer
writer = new_writer(sys.argv[1])
n = 0
for line in sys.stdin:
    if line.strip() == "close":
        break
    for _ in range(int(line)):
        add_run(writer, f"r{n:03d}", seed=n)
        n += 1
    print(n, flush=True)
writer.close()
print("closed", flush=True)
"""


def _tell(writer, line: str) -> str:
    writer.stdin.write(line + "\n")
    writer.stdin.flush()
    return writer.stdout.readline().strip()


def _poll_until_reloaded(qtbot, w) -> None:
    with qtbot.waitSignal(w.open_finished, timeout=20000) as blocker:
        w.follower.poll()  # the file changed since it was opened ...
        w.follower.poll()  # ... and held still: reload
    assert blocker.args == [True]


def test_runs_recorded_while_open_appear_and_live_is_shown(qtbot, empty_window, tmp_path):
    path = tmp_path / "recording.h5"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], cwd=ROOT, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert _tell(writer, "2") == "2"
        with qtbot.waitSignal(empty_window.open_finished, timeout=20000):
            empty_window.open_path(str(path))
        empty_window.follower.timer.stop()  # the test polls by hand
        assert empty_window.state.trace.run_names == ["r000", "r001"]
        assert not empty_window.live_label.isHidden()
        assert _tell(writer, "3") == "5"
        _poll_until_reloaded(qtbot, empty_window)
        assert len(empty_window.state.trace.run_names) == 5 and empty_window.main.isEnabled()
        assert _tell(writer, "close") == "closed"
        _poll_until_reloaded(qtbot, empty_window)
        assert len(empty_window.state.trace.run_names) == 5
        assert empty_window.live_label.isHidden()
    finally:
        writer.kill()
        writer.wait()


STEADY_WRITER = """
import sys, time
from pathlib import Path
from tests.test_traces_locking import add_run, new_writer
writer = new_writer(sys.argv[1])
n = 0
while not Path(sys.argv[2]).exists():  # a run every 0.2 s: the file never holds still
    add_run(writer, f"r{n:04d}", seed=n)
    n += 1
    Path(sys.argv[3]).write_text(str(n))
    time.sleep(0.2)
writer.close()
"""


def test_runs_of_a_recording_that_never_holds_still_appear_as_they_commit(qtbot, empty_window, tmp_path):
    path, stop, count = tmp_path / "steady.h5", tmp_path / "stop", tmp_path / "count"
    writer = subprocess.Popen([sys.executable, "-c", STEADY_WRITER, str(path), str(stop), str(count)],
                              cwd=ROOT)
    try:
        qtbot.waitUntil(count.exists, timeout=20000)
        with qtbot.waitSignal(empty_window.open_finished, timeout=20000):
            empty_window.open_path(str(path))
        first = len(empty_window.state.trace.run_names)
        # The follower's own timer: the app reloads while the writer keeps writing.
        qtbot.waitUntil(lambda: empty_window.state.trace is not None
                        and len(empty_window.state.trace.run_names) >= first + 3, timeout=30000)
        assert writer.poll() is None  # still recording
        names = empty_window.state.trace.run_names
        assert names == [f"r{i:04d}" for i in range(len(names))]  # exactly the committed runs, in order
        assert not empty_window.browser.model.unusable  # the run being written is not shown as broken
    finally:
        stop.touch()
        writer.wait(timeout=60)
