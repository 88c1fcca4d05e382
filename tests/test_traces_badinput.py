"""Bad input of every kind gives TraceError (never another exception), and a killed writer leaves a
file whose completed runs read back intact."""

import os
import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import ROOT

from traces import TraceError, TraceWriter, open_trace, schema, validate
from traces.summary import describe
from traces.synthetic import synthetic_run_arrays, write_synthetic_trace


def read_everything(path) -> None:
    """Everything a viewer does with a file: open, list, read every dataset of every run, tables."""
    with open_trace(path) as trace:
        assert all(isinstance(s, str) for s in trace.vocab)  # decoded, not bytes
        assert len(trace.requests.text) == len(trace.requests)
        for r in range(len(trace.requests)):
            trace.requests.prompt_tokens(r)
        for name in trace.run_names + trace.incomplete_runs:
            run = trace.run(name)
            for array in run.arrays.values():
                array[...]
            run.row_length(0)
        for name in trace.table_names:
            trace.read_table(name)
        describe(trace)


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("good") / "good.h5"
    write_synthetic_trace(path, 2, L=2, E=4, K=2, V=16, B=3, T=12, R=4)
    with TraceWriter.append(path) as writer:
        writer.write_table("causes", {"run": ["r000", "r001"], "share": [0.5, 0.5]}, {"n": 2})
    return path


def _copy(src: Path, dst: Path) -> Path:
    dst.write_bytes(src.read_bytes())
    return dst


def test_good_file_reads_cleanly(good):
    read_everything(good)
    assert validate(good, read_data=True) == []


def test_truncated_file(good, tmp_path):
    data = good.read_bytes()
    for n, cut in enumerate((len(data) // 2, len(data) - 100, 512)):
        path = tmp_path / f"cut{n}.h5"
        path.write_bytes(data[:cut])
        with pytest.raises(TraceError, match=str(path)):
            read_everything(path)
        assert any(p.severity == "error" for p in validate(path, read_data=True))


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)),
                      min_size=1, max_size=8))
def test_flipped_bytes_give_trace_error_or_read_cleanly(good, tmp_path, flips):
    data = bytearray(good.read_bytes())
    for where, mask in flips:
        data[int(where * len(data))] ^= mask
    path = tmp_path / "flipped.h5"
    path.write_bytes(bytes(data))
    try:
        read_everything(path)
    except TraceError as exc:
        assert str(path) in str(exc)
    validate(path, read_data=True)  # returns problems, never raises


def test_another_kind_of_hdf5_file(tmp_path):
    path = tmp_path / "other.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(4)
        f.attrs["format"] = "something-else"
    with pytest.raises(TraceError, match='other.h5: /: expected attribute format = "moe-routing-trace"'):
        open_trace(path)
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(4)
    with pytest.raises(TraceError, match="expected attribute 'format'"):
        open_trace(path)


def test_not_hdf5_empty_directory_and_missing_paths(tmp_path):
    text = tmp_path / "notes.h5"
    text.write_text("hello, not a trace\n" * 100)
    empty = tmp_path / "empty.h5"
    empty.write_bytes(b"")
    cases = {
        text: "a file that is not HDF5",
        empty: "empty file",
        tmp_path: "found a directory",
        tmp_path / "missing.h5": "found nothing",
        text / "inside.h5": "found nothing",  # a path through a regular file
    }
    for path, message in cases.items():
        with pytest.raises(TraceError, match=message):
            open_trace(path)
        assert validate(path)[0].severity == "error"


def test_missing_root_parts(good, tmp_path):
    for part, message in (("vocab", "/vocab: expected dataset"), ("requests/offsets", "offsets"),
                          ("runs", "/runs: expected group")):
        path = _copy(good, tmp_path / f"no_{part.replace('/', '_')}.h5")
        with h5py.File(path, "r+") as f:
            del f[part]
        with pytest.raises(TraceError, match=message):
            open_trace(path)
    path = _copy(good, tmp_path / "no_layers.h5")
    with h5py.File(path, "r+") as f:
        del f.attrs["moe_layers"]
    with pytest.raises(TraceError, match="expected attribute 'moe_layers'"):
        open_trace(path)


def test_newer_format_version(good, tmp_path):
    path = _copy(good, tmp_path / "v2.h5")
    with h5py.File(path, "r+") as f:
        f.attrs["format_version"] = schema.FORMAT_VERSION + 1
    with pytest.raises(TraceError, match="format_version <= 2.*found 3.*upgrade"):
        open_trace(path)


def _broken_copy(good, tmp_path, name, edit):
    path = _copy(good, tmp_path / name)
    with h5py.File(path, "r+") as f:
        edit(f["runs/r001"])
    return path


def _replace(path, data):
    def edit(group):
        del group[path]
        group.create_dataset(path, data=data)
    return edit


@pytest.mark.parametrize("name, edit, message", [
    ("missing.h5", lambda g: g.__delitem__("routing/kept"),
     "/runs/r001/routing/kept: expected dataset, found"),
    ("dtype.h5", _replace("routing/kept", np.zeros((2, 3, 12, 2), np.float32)),
     "/runs/r001/routing/kept: expected dataset of dtype bool, found float32"),
    ("shape.h5", _replace("routing/gate", np.zeros((2, 2, 12, 2), np.float32)),
     "/runs/r001/routing/gate: expected dim B = 3"),
    ("ndim.h5", _replace("logits", np.zeros((3, 12), np.float32)), "/runs/r001/logits: expected 3-D array"),
    ("object.h5", _replace("tokens", ["a"] * 3), "/runs/r001/tokens: expected dataset of dtype int32"),
    ("attr.h5", lambda g: g.attrs.__delitem__("request_ids"), "expected attribute 'request_ids'"),
    ("group.h5", lambda g: (g.__delitem__("step"), g.create_group("step")),
     "step: expected dataset, found group"),
])
def test_broken_run_fails_when_accessed_not_on_open(good, tmp_path, name, edit, message):
    path = _broken_copy(good, tmp_path, name, edit)
    with open_trace(path) as trace:
        assert trace.run_names == ["r000", "r001"]
        trace.run("r000").logits[0, :4]  # the other run stays usable
        with pytest.raises(TraceError, match=message):
            trace.run("r001")
    with pytest.raises(TraceError):
        read_everything(path)
    problems = validate(path)
    assert any(p.severity == "error" and re.search(message, f"{p.where}: {p.message}") for p in problems)


def test_validate_reports_every_problem_not_only_the_first(good, tmp_path):
    path = _copy(good, tmp_path / "many.h5")
    with h5py.File(path, "r+") as f:
        del f["runs/r000/logits"]
        del f["runs/r001/routing/slot"]
        f["runs/r001"].attrs["probe_row"] = 99
        del f.attrs["device"]
    problems = validate(path)
    wheres = {(p.where, p.severity) for p in problems}
    assert ("/runs/r000/logits", "error") in wheres
    assert ("/runs/r001/routing/slot", "error") in wheres
    assert ("/runs/r001", "error") in wheres
    assert ("/", "warning") in wheres
    with open_trace(path) as trace, pytest.raises(TraceError, match="and 1 more problems"):
        trace.run("r001")


def test_unknown_run_name(good):
    with open_trace(good) as trace, pytest.raises(TraceError, match="expected an existing run"):
        trace.run("nope")


def test_object_attributes_are_refused_not_interpreted(good, tmp_path):
    path = _copy(good, tmp_path / "ref.h5")
    with h5py.File(path, "r+") as f:
        f["runs/r001"].attrs["batch_size"] = f["vocab"].ref  # an object reference is not data
    with open_trace(path) as trace, pytest.raises(TraceError, match="batch_size"):
        trace.run("r001")


# -- a writer killed mid-run -------------------------------------------------------------------

CHILD = r"""
import sys
import numpy as np
from traces.synthetic import byte_vocab, synthetic_meta, synthetic_routing, synthetic_run_arrays
from traces.writer import TraceWriter

path, kill_at = sys.argv[1], sys.argv[2]
write_dataset = TraceWriter._write_dataset

def announce(self, group, spec, arr, *encoded):
    print(f"writing {group.name}/{spec.path}", flush=True)
    write_dataset(self, group, spec, arr, *encoded)

TraceWriter._write_dataset = announce
with TraceWriter(path, meta=synthetic_meta(4, 8, 2, 256), vocab=byte_vocab(256), requests=["probe"],
                 prompt_tokens=[[1, 2, 3]]) as writer:
    for i in range(3):
        arrays = synthetic_run_arrays(4, 32, 512, 2, 8, 256, np.random.default_rng(i), prompt_len=(16, 64))
        attrs = {"request_ids": np.zeros(32, int), "probe_row": 0, "batch_size": 32, "max_new_tokens": 8,
                 "label": "x", "condition": "c", "experiment": "test", "routing": synthetic_routing(),
                 "kernel_mode": "native", "seed": i, "wall_time_s": 0.0}
        writer.add_run(f"r{i}", attrs=attrs, arrays=arrays)
    print("finished", flush=True)
"""


@pytest.mark.parametrize("kill_at", ["routing/router_logits", "logits"])
def test_writer_killed_mid_run_leaves_completed_runs_intact(tmp_path, kill_at):
    path = tmp_path / "killed.h5"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), kill_at], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, text=True)
    try:
        for line in child.stdout:
            if line.strip() == f"writing /runs/r2/{kill_at}":
                child.kill()  # SIGKILL while HDF5 compresses and writes that dataset
                break
    finally:
        child.kill()
        child.wait(timeout=60)
    assert child.returncode == -9
    with open_trace(path) as trace:
        assert trace.run_names == ["r0", "r1"]
        assert trace.incomplete_runs == ["r2"]
        for i, run in enumerate(trace.runs()):
            expected = synthetic_run_arrays(4, 32, 512, 2, 8, 256, np.random.default_rng(i),
                                            prompt_len=(16, 64))
            for spec in schema.run_datasets():
                np.testing.assert_array_equal(run.arrays[spec.path][...], expected[spec.path],
                                              err_msg=spec.path)
        with pytest.raises(TraceError, match="/runs/r2"):
            trace.run("r2")
        assert "r2  [INCOMPLETE]" in describe(trace)
    assert any(p.where == "/runs/r2" and p.severity == "warning" for p in validate(path))
    with TraceWriter.append(path) as writer:  # a new recording session can redo the run
        arrays = synthetic_run_arrays(4, 2, 16, 2, 8, 256, np.random.default_rng(9))
        writer.add_run("r2", arrays=arrays, attrs={
            "request_ids": np.zeros(2, int), "probe_row": -1, "batch_size": 2, "max_new_tokens": 8,
            "label": "x", "condition": "c", "experiment": "test", "routing": {}, "kernel_mode": "native",
            "seed": 9, "wall_time_s": 0.0})
    with open_trace(path) as trace:
        assert trace.run_names == ["r0", "r1", "r2"] and trace.incomplete_runs == []


# -- the command line --------------------------------------------------------------------------

def test_info_on_bad_file_exits_2_with_a_clear_message(tmp_path, capsys):
    from inspector.cli import main

    bad = tmp_path / "bad.h5"
    bad.write_text("not a trace")
    assert main(["info", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"moe-inspector info: error: {bad}: expected an HDF5 trace")
    assert "Traceback" not in err and "/:" not in err


def test_info_prints_summary(good, capsys):
    from inspector.cli import main

    assert main(["info", str(good)]) == 0
    out = capsys.readouterr().out
    assert "runs: 2 complete, 0 incomplete" in out
    assert "r000: B=3 T=12" in out and "routing/router_logits" in out and "tables: causes" in out


def test_info_subprocess_on_bad_file(tmp_path):
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 200)  # HDF5 signature, nothing valid after it
    result = subprocess.run([sys.executable, "-m", "inspector.cli", "info", str(bad)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith(f"moe-inspector info: error: {bad} cannot be opened: expected an HDF5 "
                                    "trace, found a damaged HDF5 file (")
    assert "Traceback" not in result.stderr and "OSError" not in result.stderr


def test_info_of_a_truncated_trace_is_one_sentence(good, tmp_path):
    cut = tmp_path / "cut.h5"
    cut.write_bytes(good.read_bytes()[:good.stat().st_size // 2])
    result = subprocess.run([sys.executable, "-m", "inspector.cli", "info", str(cut)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith(f"moe-inspector info: error: {cut} is truncated: it holds ")
    assert result.stderr.count("\n") == 1 and "OSError" not in result.stderr


def test_info_into_a_closed_pipe_stops_quietly(good):
    """`moe-inspector info T | head`: the reader is gone before the summary is written."""
    proc = subprocess.Popen([sys.executable, "-m", "inspector.cli", "info", "--check", str(good)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # no reader: the first write to stdout fails with EPIPE
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141  # as a process ended by SIGPIPE
    assert err == ""
