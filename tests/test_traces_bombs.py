"""Memory follows what a file holds, not what it declares: shapes its stored bytes cannot hold,
huge attributes and deeply nested JSON are reported as problems before anything is allocated; the
reader keeps a bounded set of runs open and the writer reopens its file to keep HDF5's cache small."""

import h5py
import numpy as np
import pytest

from inspector.cli import main
from traces import TraceError, TraceWriter, open_trace, validate
from traces.synthetic import write_synthetic_trace


@pytest.fixture
def trace_path(tmp_path):
    path = tmp_path / "t.h5"
    write_synthetic_trace(path, 3, L=2, E=4, K=2, V=16, B=3, T=12, R=4)
    return path


def _replace(path, where: str, shape, dtype) -> None:
    """Replace a dataset by an empty chunked one of `shape`: a few bytes of metadata declaring a lot."""
    with h5py.File(path, "r+") as f:
        del f[where]
        f.create_dataset(where, shape=shape, dtype=dtype, chunks=(1,) * (len(shape) - 1) + (1024,))


def test_run_declaring_a_huge_T_is_refused_before_reading(trace_path):
    _replace(trace_path, "runs/r001/tokens", (3, 1 << 28), np.int32)
    with open_trace(trace_path) as trace:
        with pytest.raises(TraceError, match="declared"):
            trace.run("r001")
        assert trace.run("r000").tokens.shape == (3, 12)
    assert any("declared" in p.message for p in validate(trace_path, read_data=True))


def test_pool_declaring_2_to_the_31_requests_is_refused_on_open(trace_path):
    _replace(trace_path, "requests/offsets", (1 << 31,), np.int64)
    with pytest.raises(TraceError, match="requests/offsets.*declared"):
        open_trace(trace_path)


def test_json_nested_200k_deep_is_one_line_and_exit_2(trace_path, capsys):
    with h5py.File(trace_path, "r+") as f:
        f["runs/r000"].attrs["routing"] = "[" * 200_000 + "]" * 200_000
    assert main(["info", "--check", str(trace_path)]) == 2
    out = capsys.readouterr()
    assert "nested less deeply" in out.out and "Traceback" not in out.err + out.out
    with open_trace(trace_path) as trace, pytest.raises(TraceError, match="nested less deeply"):
        trace.run("r000")


def test_huge_attribute_is_refused_unread(trace_path):
    with h5py.File(trace_path, "r+") as f:
        f["runs/r000"].attrs["label"] = np.zeros(5 << 20, dtype=np.float32)  # 20 MB
    with open_trace(trace_path) as trace, pytest.raises(TraceError, match="at most"):
        trace.run("r000")


def test_reader_keeps_runs_within_its_budget_and_held_runs_stay_usable(trace_path):
    with open_trace(trace_path, cache_bytes=1) as trace:
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
        assert len(trace.run_names) == 7 and trace.table_names == ["t"]
    assert validate(path, read_data=True) == []
