"""The writer thread: runs checked in the caller, written in order behind it; its failures (disk
full, anything else) reach the caller with the writer's own message, and nothing written is lost."""

import subprocess
import sys

import numpy as np
import pytest
from paths import ROOT

from tests.test_traces_locking import B, E, K, L, T, V, add_run, new_writer
from traces import TraceError, open_trace, validate
from traces.background import BackgroundWriter
from traces.synthetic import synthetic_run_arrays


def test_runs_are_written_in_order_and_close_joins(tmp_path):
    path = tmp_path / "bg.h5"
    with BackgroundWriter(new_writer(path), depth=1) as writer:
        for i in range(5):
            add_run(writer, f"r{i}", seed=i)
        writer.write_table("t", {"x": np.arange(3)})
    with open_trace(path) as trace:
        assert trace.run_names == [f"r{i}" for i in range(5)] and trace.table_names == ["run_summary", "t"]
        expected = synthetic_run_arrays(L, B, T, K, E, V, np.random.default_rng(3), prompt_len=2,
                                        request_ids=np.zeros(B, int))
        np.testing.assert_array_equal(trace.run("r3").router_logits[...], expected["routing/router_logits"])
    assert validate(path, read_data=True) == []


def test_bad_arrays_fail_in_the_caller_at_once(tmp_path):
    with BackgroundWriter(new_writer(tmp_path / "bad.h5")) as writer:
        arrays = synthetic_run_arrays(L, B, T, K, E, V, np.random.default_rng(0), prompt_len=2)
        del arrays["routing/kept"]
        with pytest.raises(ValueError, match="routing/kept: required dataset missing"):
            writer.add_run("r", attrs={}, arrays=arrays)


def test_an_error_in_the_thread_surfaces_at_the_next_call_and_keeps_earlier_runs(tmp_path):
    path = tmp_path / "twice.h5"
    writer = BackgroundWriter(new_writer(path))
    add_run(writer, "r0")
    add_run(writer, "r0", seed=1)  # valid arrays, but the name is taken: found by the writer thread
    with pytest.raises(ValueError, match="run 'r0' already exists"):
        writer.flush()
    with pytest.raises(ValueError, match="run 'r0' already exists"):
        add_run(writer, "r1")  # a stopped writer refuses more, with the same message
    writer.close()  # seen already: close does not raise it again
    with open_trace(path) as trace:
        assert trace.run_names == ["r0"] and trace.incomplete_runs == []


FILL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
from tests.test_traces_locking import add_run, new_writer
from traces import TraceError
from traces.background import BackgroundWriter
writer = BackgroundWriter(new_writer(sys.argv[1]))
queued = 0
try:
    for queued in range(10_000):
        add_run(writer, f"r{queued:04d}", seed=queued)
    writer.close()
except TraceError as exc:
    print(f"stopped: {exc}")
    writer.close()
print("closed")
"""


def test_disk_full_in_the_thread_reaches_the_caller_with_the_writers_message(tmp_path):
    path = tmp_path / "full.h5"
    proc = subprocess.run([sys.executable, "-c", FILL_DISK, str(path), str(3 << 20)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "closed" in proc.stdout
    message = proc.stdout.split("stopped: ")[1].splitlines()[0]
    assert message.startswith(str(path)) and "disk full" in message
    with open_trace(path) as trace:
        assert len(trace.run_names) > 0 and trace.incomplete_runs == []
    assert validate(path, read_data=True) == []


def test_a_failed_writer_is_reported_by_close_when_not_seen_before(tmp_path, monkeypatch):
    path = tmp_path / "late.h5"
    inner = new_writer(path)
    writer = BackgroundWriter(inner)
    add_run(writer, "r0")
    writer.flush()

    def fail(run):
        raise TraceError(inner.path, f"/runs/{run.name}", "a write that succeeds; disk full (test)")

    monkeypatch.setattr(inner, "write_prepared", fail)
    add_run(writer, "r1")
    with pytest.raises(TraceError, match="r1: a write that succeeds; disk full"):
        writer.close()
    with open_trace(path) as trace:
        assert trace.run_names == ["r0"]
