"""One writer per trace: a second writer fails before it touches the file, and a new trace replaces
an old one only once its root is written (never by truncating it first)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from traces import TraceError, TraceWriter, open_trace, validate
from traces.lock import is_locked, lock_path
from traces.synthetic import byte_vocab, synthetic_meta, synthetic_routing, synthetic_run_arrays

# Not tests/paths.py: subprocesses import this module as tests.test_traces_locking, with only the
# repository root on their path.
ROOT = Path(__file__).resolve().parent.parent
L, E, K, V, B, T = 2, 4, 2, 16, 2, 8


def new_writer(path) -> TraceWriter:
    return TraceWriter(path, meta=synthetic_meta(L, E, K, V), vocab=byte_vocab(V), requests=["a", "b"],
                       prompt_tokens=[[1, 2], [3]])


def add_run(writer: TraceWriter, name: str, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    arrays = synthetic_run_arrays(L, B, T, K, E, V, rng, prompt_len=2, request_ids=np.zeros(B, int))
    arrays["tokens"][:, :2] = [1, 2]  # request 0's prompt, as every run of it holds
    writer.add_run(name, attrs={"request_ids": np.zeros(B, int), "probe_row": 0, "batch_size": B,
                                "max_new_tokens": T - 2, "label": name, "condition": "c", "experiment": "t",
                                "routing": synthetic_routing(), "kernel_mode": "native", "seed": seed,
                                "wall_time_s": 0.0}, arrays=arrays)


def test_second_writer_fails_and_the_first_keeps_its_file(tmp_path):
    path = tmp_path / "two.h5"
    with new_writer(path) as first:
        add_run(first, "r0")
        before = path.read_bytes()
        assert is_locked(path)
        with pytest.raises(TraceError, match="another process is writing"):
            new_writer(path)
        with pytest.raises(TraceError, match="another process is writing"):
            TraceWriter.append(path)
        assert path.read_bytes() == before
        add_run(first, "r1", seed=1)
    assert not is_locked(path) and not Path(lock_path(path)).exists()
    with open_trace(path) as trace:
        assert trace.run_names == ["r0", "r1"]
    assert validate(path, read_data=True) == []


def test_writer_in_another_process_fails_with_one_line(tmp_path):
    path = tmp_path / "busy.h5"
    code = ("import sys; from tests.test_traces_locking import new_writer\n"
            "from traces import TraceError\n"
            "try:\n    new_writer(sys.argv[1])\nexcept TraceError as e:\n    print(e); sys.exit(2)\n")
    with new_writer(path) as first:
        add_run(first, "r0")
        before = path.read_bytes()
        proc = subprocess.run([sys.executable, "-c", code, str(path)], cwd=ROOT, capture_output=True,
                              text=True)
        assert proc.returncode == 2 and "another process is writing" in proc.stdout
        assert path.read_bytes() == before
        add_run(first, "r1", seed=1)
    with open_trace(path) as trace:
        assert len(trace.run_names) == 2


def test_new_trace_replaces_the_old_one_only_once_written(tmp_path):
    path = tmp_path / "old.h5"
    with new_writer(path) as writer:
        add_run(writer, "r0")
    old = path.read_bytes()
    with pytest.raises(ValueError):  # refused before anything is touched
        TraceWriter(path, meta={}, vocab=byte_vocab(V), requests=["a"], prompt_tokens=[[1]])
    assert path.read_bytes() == old
    reader = open_trace(path)  # a reader of the old file keeps reading it after the replacement
    with new_writer(path) as writer:
        add_run(writer, "n0")
        add_run(writer, "n1", seed=1)
    assert reader.run_names == ["r0"] and reader.run("r0").tokens[0].shape == (T,)
    reader.close()
    with open_trace(path) as trace:
        assert trace.run_names == ["n0", "n1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.h5"]  # no temporary or lock file left


def test_a_killed_writers_temporary_file_is_removed_by_the_next_writer(tmp_path):
    path = tmp_path / "t.h5"
    stale = tmp_path / ".t.h5.99999999.tmp"  # left by a writer killed before its first run
    stale.write_bytes(b"half a trace")
    other = tmp_path / ".other.h5.99999999.tmp"  # another trace's: not ours to remove
    other.write_bytes(b"x")
    with new_writer(path) as writer:
        add_run(writer, "r0")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.h5.99999999.tmp", "t.h5"]
