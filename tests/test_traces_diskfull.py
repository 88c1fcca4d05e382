"""A full disk stops the writer cleanly: TraceError, no crash, and a file that passes validation with
every run completed before it (here the limit is the process's RLIMIT_FSIZE, in a subprocess)."""

import subprocess
import sys

import pytest
from paths import ROOT

from tests.test_traces_locking import add_run, new_writer
from traces import TraceError, open_trace, validate
from traces.superblock import stored_eof
from traces.writer import TraceWriter, is_disk_full, room_bytes

WRITE_UNTIL_FULL = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
from tests.test_traces_locking import add_run, new_writer
from traces import TraceError
writer = new_writer(sys.argv[1])
n = 0
try:
    for n in range(10_000):
        add_run(writer, f"r{n:04d}", seed=n)
except TraceError as exc:
    print(f"stopped after {n} runs: {exc}")
    try:
        add_run(writer, "again")
    except TraceError as again:
        print(f"then: {again}")
writer.close()
"""


def test_disk_full_keeps_every_complete_run_and_a_valid_file(tmp_path):
    path = tmp_path / "full.h5"
    proc = subprocess.run([sys.executable, "-c", WRITE_UNTIL_FULL, str(path), str(3 << 20)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "disk full" in proc.stdout and "Traceback" not in proc.stderr
    assert "then: " in proc.stdout  # a stopped writer refuses further runs
    assert "bytes left" not in proc.stdout or "(-" not in proc.stdout  # never a negative room
    kept = int(proc.stdout.split("stopped after ")[1].split()[0])
    assert kept > 0
    with open_trace(path) as trace:
        assert len(trace.run_names) == kept and trace.incomplete_runs == []
    assert validate(path, read_data=True) == []


RESERVE_ONLY = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
import traces.writer
traces.writer.room_bytes = lambda path: 1 << 62  # as if the space went between check and write
from tests.test_traces_locking import add_run, new_writer
from traces import TraceError
writer = new_writer(sys.argv[1])
try:
    for n in range(10_000):
        add_run(writer, f"r{n:04d}", seed=n)
except TraceError as exc:
    print(f"stopped after {n} runs: {exc}")
writer.close()
"""


@pytest.mark.parametrize("limit", [2 << 20, 5 << 20])
def test_space_is_reserved_before_hdf5_writes(tmp_path, limit):
    path = tmp_path / "reserved.h5"
    proc = subprocess.run([sys.executable, "-c", RESERVE_ONLY, str(path), str(limit)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]  # no crash inside HDF5
    assert "disk full" in proc.stdout and "Traceback" not in proc.stderr
    kept = int(proc.stdout.split("stopped after ")[1].split()[0])
    with open_trace(path) as trace:
        assert len(trace.run_names) == kept > 0 and trace.incomplete_runs == []
    assert validate(path, read_data=True) == []


def test_room_is_never_negative_past_the_size_limit(tmp_path, monkeypatch):
    """A file already past the process's file-size limit has 0 bytes of room, not a negative number."""
    import resource

    path = tmp_path / "big.bin"
    path.write_bytes(b"x" * 10_000)
    monkeypatch.setattr(resource, "getrlimit", lambda what: (1000, 1000))
    assert room_bytes(str(path)) == 0


def test_reserved_space_is_given_back(tmp_path):
    path = tmp_path / "trim.h5"
    with new_writer(path) as writer:
        add_run(writer, "r0")
        assert path.stat().st_size == stored_eof(path)
    with TraceWriter.append(path) as writer:  # HDF5 keeps a reopened file's reserved tail
        add_run(writer, "r1", seed=1)
        writer.write_table("t", {"x": [1.0, 2.0]})
        assert path.stat().st_size == stored_eof(path)
    assert path.stat().st_size == stored_eof(path)
    assert validate(path, read_data=True) == []


def test_h5py_errors_at_the_writer_boundary_become_trace_errors(tmp_path):
    path = tmp_path / "closed.h5"
    writer = new_writer(path)
    writer._file.id.close()  # the file vanishes under the writer, as on an I/O error
    with pytest.raises(TraceError, match="an I/O error"):
        add_run(writer, "r0")
    writer.close()


@pytest.mark.parametrize("exc, full", [
    (OSError(28, "No space left on device"), True),
    (RuntimeError("Unable to synchronously flush file (file write failed: errno = 27, error message = "
                  "'File too large')"), True),
    (RuntimeError("Unable to synchronously flush file (bad checksum)"), False),
])
def test_disk_full_is_told_from_other_errors(exc, full):
    assert is_disk_full(exc) is full


LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
from tests.test_traces_locking import add_run
from traces import TraceError, TraceWriter
from traces.synthetic import byte_vocab, synthetic_meta
try:
    writer = TraceWriter(sys.argv[1], meta=synthetic_meta(2, 4, 2, 16), vocab=byte_vocab(16),
                         requests=["a" * 30000, "b"], prompt_tokens=[[1, 2], [3]])  # a 30 KB prompt
except TraceError as exc:
    print(f"header: {exc}")
    sys.exit(0)
try:
    for n in range(int(sys.argv[3])):
        add_run(writer, f"n{n}", seed=n)
except TraceError as exc:
    print(f"run: {exc}")
writer.close()
print("closed")
"""


def _limited(path, limit: int, runs: int = 1):
    proc = subprocess.run([sys.executable, "-c", LIMITED, str(path), str(limit), str(runs)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    return proc.stdout


def test_header_that_does_not_fit_fails_cleanly_and_leaves_nothing(tmp_path):
    out = _limited(tmp_path / "u20.h5", 20 << 10)  # `ulimit -f 20`
    assert "header: " in out and "disk full" in out
    assert list(tmp_path.iterdir()) == []  # no trace, temporary file or lock left


def test_new_trace_on_a_nearly_full_disk_keeps_the_old_one_until_it_holds_a_run(tmp_path):
    path = tmp_path / "old.h5"
    with new_writer(path) as writer:
        add_run(writer, "r0")
    old = path.read_bytes()
    out = _limited(path, 64 << 10)  # room for the new root, not for a run
    assert "run: " in out and "disk full" in out and "closed" in out
    assert path.read_bytes() == old  # not replaced by a trace of 0 runs
    out = _limited(path, 300 << 10, runs=100)  # room for a few runs
    assert "disk full" in out
    with open_trace(path) as trace:
        assert trace.run_names[0] == "n0" and trace.incomplete_runs == []
    assert validate(path, read_data=True) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.h5"]


def test_space_margin_scales_with_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr("traces.writer.room_bytes", lambda path: 147_000)  # 147 KB free
    path = tmp_path / "small.h5"
    with new_writer(path) as writer:
        add_run(writer, "r0")  # a small run fits (a fixed 1 MiB margin refused it)
    with open_trace(path) as trace:
        assert trace.run_names == ["r0"]
