"""Memory follows what a file holds, not what it declares: shapes its stored bytes cannot hold,
huge attributes and deeply nested JSON are reported as problems before anything is allocated; the
reader keeps a bounded set of runs open and the writer reopens its file to keep HDF5's cache small."""

import os
import subprocess
import sys

import h5py
import numpy as np
import pytest
from paths import ROOT

from inspector.cli import main
from traces import TraceError, TraceWriter, open_trace, validate
from traces.synthetic import write_synthetic_trace


@pytest.fixture
def writable_trace(tmp_path):
    """A fresh trace of 3 small runs for each test, which rewrites its datasets."""
    path = tmp_path / "t.h5"
    write_synthetic_trace(path, 3, L=2, E=4, K=2, V=16, B=3, T=12, R=4)
    return path


def _replace(path, where: str, shape, dtype) -> None:
    """Replace a dataset by an empty chunked one of `shape`: a few bytes of metadata declaring a lot."""
    with h5py.File(path, "r+") as f:
        del f[where]
        f.create_dataset(where, shape=shape, dtype=dtype, chunks=(1,) * (len(shape) - 1) + (1024,))


def test_run_declaring_a_huge_T_is_refused_before_reading(writable_trace):
    _replace(writable_trace, "runs/r001/tokens", (3, 1 << 28), np.int32)
    with open_trace(writable_trace) as trace:
        with pytest.raises(TraceError, match="declared"):
            trace.run("r001")
        assert trace.run("r000").tokens.shape == (3, 12)
    assert any("declared" in p.message for p in validate(writable_trace, read_data=True))


def test_pool_declaring_2_to_the_31_requests_is_refused_on_open(writable_trace):
    _replace(writable_trace, "requests/offsets", (1 << 31,), np.int64)
    with pytest.raises(TraceError, match="requests/offsets.*declared"):
        open_trace(writable_trace)


def test_json_nested_200k_deep_is_one_line_and_exit_2(writable_trace, capsys):
    with h5py.File(writable_trace, "r+") as f:
        f["runs/r000"].attrs["routing"] = "[" * 200_000 + "]" * 200_000
    assert main(["info", "--check", str(writable_trace)]) == 2
    out = capsys.readouterr()
    assert "nested less deeply" in out.out and "Traceback" not in out.err + out.out
    with open_trace(writable_trace) as trace, pytest.raises(TraceError, match="nested less deeply"):
        trace.run("r000")


def test_huge_attribute_is_refused_unread(writable_trace):
    with h5py.File(writable_trace, "r+") as f:
        f["runs/r000"].attrs["label"] = np.zeros(5 << 20, dtype=np.float32)  # 20 MB
    with open_trace(writable_trace) as trace, pytest.raises(TraceError, match="at most"):
        trace.run("r000")


def test_reader_keeps_runs_within_its_budget_and_held_runs_stay_usable(writable_trace):
    with open_trace(writable_trace, cache_bytes=1) as trace:
        first = trace.run("r000")
        for name in trace.run_names:
            trace.run(name)
        assert list(trace._runs) == ["r002"]  # only the newest stays
        assert first.tokens[0].shape == (12,)  # a run the caller holds still reads
        assert trace.run("r000") is not first  # reopened on demand


def test_writer_reopens_its_file_and_every_run_survives(tmp_path, monkeypatch):
    monkeypatch.setattr("traces.writer.REOPEN_EVERY", 2)
    path = write_synthetic_trace(tmp_path / "many.h5", 7, L=2, E=4, K=2, V=16, B=2, T=8, R=3)
    with TraceWriter.append(path) as writer:
        writer.write_table("t", {"x": [1, 2]})
    with open_trace(path) as trace:
        assert len(trace.run_names) == 7 and trace.table_names == ["run_summary", "t"]
    assert validate(path, read_data=True) == []


RSS = """
import sys
from traces import TraceError, open_trace, validate
try:
    with open_trace(sys.argv[1]) as trace:
        trace.vocab
        for name in trace.run_names:
            trace.run(name)
    print("read")
except TraceError as exc:
    print("refused:", exc)
print("check:", "; ".join(p.message for p in validate(sys.argv[1], read_data=True) if p.severity == "error"))
# VmHWM: peak resident memory of this program (ru_maxrss would count the forked test process too)
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM"))
print("rss_mb", int(hwm.split()[1]) / 1024)
"""


def _refused_within_memory(path) -> str:
    out = subprocess.run([sys.executable, "-c", RSS, str(path)], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert float(out.split("rss_mb")[1]) < 200, out
    assert "refused:" in out, out
    return out


def test_vocab_pointing_259_times_at_one_10_mb_string_is_refused_in_little_memory(tmp_path):
    path = write_synthetic_trace(tmp_path / "vb.h5", 2, L=2, E=4, K=2, V=259, B=2, T=12, R=3)
    with h5py.File(path, "r+") as f:
        f["vocab"][0] = "x" * (10 << 20)
        offset, n = f["vocab"].id.get_offset(), len(f["vocab"])
    with open(path, "r+b") as fh:  # every reference (length, collection, index) made the first one
        fh.seek(offset)
        first = fh.read(16)
        fh.seek(offset)
        fh.write(first * n)
    out = _refused_within_memory(path)
    assert "/vocab: expected strings that fit in the file" in out
    assert "check: expected strings that fit in the file" in out  # `info --check` reports it


def test_100_mb_string_attribute_is_refused_unread(tmp_path):
    path = write_synthetic_trace(tmp_path / "ab.h5", 2, L=2, E=4, K=2, V=16, B=2, T=12, R=3)
    with h5py.File(path, "r+") as f:
        f["runs/r000"].attrs["routing"] = '{"a": "' + "x" * (100 << 20) + '"}'
    out = _refused_within_memory(path)
    assert "expected strings of at most 16777216 bytes" in out


def test_sparse_4_gb_tail_is_not_read(writable_trace, monkeypatch):
    size = os.path.getsize(writable_trace)
    os.truncate(writable_trace, 4 << 30)
    read = []
    real = os.pread
    monkeypatch.setattr("traces.heap.os.pread", lambda fd, n, at: read.append(n) or real(fd, n, at))
    with open_trace(writable_trace) as trace:
        assert len(trace.run_names) == 3
    assert 0 < sum(read) <= 2 * size  # the heap scan stops at the recorded end of file


def test_20000_empty_run_groups_are_refused_with_one_error(tmp_path):
    path = write_synthetic_trace(tmp_path / "g.h5", 1, L=2, E=4, K=2, V=16, B=2, T=8, R=2)
    with h5py.File(path, "r+", libver=("v108", "v108")) as f:
        runs = f["runs"]
        for i in range(20000):
            runs.create_group(f"x{i}")
    with pytest.raises(TraceError, match="at most 16384 runs, found 20001"):
        open_trace(path)
    problems = validate(path, read_data=True)
    assert [p.message for p in problems if p.severity == "error"] == [
        "expected at most 16384 runs, found 20001 groups (not checked)"]
