"""Reading a trace while another process records it: readers opening in a tight loop for the whole
recording never crash (no SIGBUS from a file that shrinks under a map), never raise on the healthy
growing file, see the run count only grow, see every run in the end, and find the run summary table's
row of every run they list when no run was committed since they opened the trace."""

import json
import subprocess
import sys

from paths import ROOT

N_RUNS = 80

WRITER = """
import sys
from pathlib import Path
import numpy as np
from traces import TraceWriter
from traces.synthetic import byte_vocab, synthetic_meta, synthetic_routing, synthetic_run_arrays
L, E, K, V, B, T = 2, 8, 2, 259, 3, 40
path, n, done = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
writer = TraceWriter(path, meta=synthetic_meta(L, E, K, V), vocab=byte_vocab(V), requests=["a", "b", "c"],
                     prompt_tokens=[[1, 2], [3], [4, 5, 6]])
Path(sys.argv[4]).touch()  # the trace exists: readers may start
for i in range(n):
    rng = np.random.default_rng(i)
    rids = np.arange(B) % 3
    arrays = synthetic_run_arrays(L, B, T, K, E, V, rng, prompt_len=3, request_ids=rids)
    arrays["tokens"][:, :3] = [7, 8, 9]  # every run of a request holds the same prompt
    writer.add_run(f"r{i:03d}", attrs={"request_ids": rids, "probe_row": 0, "batch_size": B,
                   "max_new_tokens": T - 3, "label": f"run {i}", "condition": "c", "experiment": "t",
                   "routing": synthetic_routing(), "kernel_mode": "native", "seed": i,
                   "wall_time_s": 0.0}, arrays=arrays)
writer.write_table("notes", {"run": [f"r{i:03d}" for i in range(n)], "i": np.arange(n)})
writer.close()
done.touch()
"""

READER = """
import json, sys
from pathlib import Path
from traces import TraceError, open_trace, validate
from traces.run_table import read_summaries
path, done, check = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "check"
opens, errors, counts, tables = 0, [], [], 0
while True:
    last = done.exists()
    try:
        if check:
            problems = [str(p) for p in validate(path, read_data=True) if p.severity == "error"]
            errors += problems
            n = -1
        else:
            with open_trace(path) as trace:
                n = len(trace.run_names)
                summarised = read_summaries(trace)  # None when runs were committed since the open
                if summarised is not None and n:
                    assert set(summarised) == set(trace.run_names), (n, len(summarised))
                    tables += 1
                for name in trace.run_names[-2:]:  # the newest runs read back whole
                    run = trace.run(name)
                    assert run.complete and run.tokens.read().shape[0] == 3
                    run.logits.read(), run.expert.read()
                trace.vocab
        opens += 1
        counts.append(n)
    except TraceError as exc:
        errors.append(str(exc))
    if last:
        break
print(json.dumps({"opens": opens, "errors": errors[:5], "n_errors": len(errors), "counts": counts,
                  "tables": tables}))
"""


def test_readers_in_a_tight_loop_never_crash_nor_err_and_see_every_run(tmp_path):
    path, done, started = tmp_path / "live.h5", tmp_path / "done", tmp_path / "started"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(N_RUNS), str(done), str(started)],
                              cwd=ROOT)
    try:
        while not started.exists():
            assert writer.poll() is None, "the writer failed before it created the trace"
        readers = [subprocess.Popen([sys.executable, "-c", READER, str(path), str(done), mode], cwd=ROOT,
                                    stdout=subprocess.PIPE, text=True) for mode in ("open", "open", "check")]
        outs = [r.communicate(timeout=300) for r in readers]
        assert writer.wait(timeout=60) == 0
    finally:
        writer.kill()
    for reader, (out, _) in zip(readers, outs, strict=True):
        assert reader.returncode == 0, f"reader {reader.args[-1]} died with {reader.returncode}"  # -7: SIGBUS
        result = json.loads(out)
        assert result["n_errors"] == 0, result["errors"]
        assert result["opens"] >= 2
    assert all(json.loads(out)["tables"] for out, _ in outs[:2]), "no reader ever read the run summary table"
    counts = json.loads(outs[0][0])["counts"]
    assert counts == sorted(counts), "a reader saw fewer runs after seeing more"
    assert counts[-1] == N_RUNS


def _bench_live_commands():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_live_commands", ROOT / "bench" / "live_commands.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # bench/ is a folder of scripts, not a package
    return module


def test_info_check_and_export_as_processes_during_a_recording(tmp_path, monkeypatch):
    """`info`, `info --check` and `export`, each a new process, while another process records: every one
    exits 0 with no traceback (bench/live_commands.py runs the same for longer)."""
    monkeypatch.chdir(ROOT)
    result = _bench_live_commands().read_during_recording(tmp_path, reads=3)
    assert result["failures"] == 0, result["failed"]
    assert result["during_recording"] == 3 and result["runs_recorded"] >= 2


def test_a_trace_opened_before_runs_were_added_is_walked_as_it_was_opened(tmp_path):
    """`info` walks every run's links after it opened the trace: runs committed meanwhile rewrote the
    run list, which HDF5 then read at addresses past the end it knew. Opened, held while the writer
    commits 20 more runs (its commit counter says so), then walked: never an error."""
    import time

    from traces import open_trace
    from traces.lock import commit_counter

    bench = _bench_live_commands()
    path, stop, started = tmp_path / "live.h5", tmp_path / "stop", tmp_path / "started"
    writer = subprocess.Popen([sys.executable, "-c", bench.WRITER, str(path), str(stop), str(started), "0"],
                              cwd=ROOT, stdout=subprocess.PIPE)
    try:
        while not started.exists():
            assert writer.poll() is None, "the writer failed before it wrote a run"
            time.sleep(0.01)
        for _ in range(5):
            with open_trace(path) as trace:
                seen = commit_counter(path)[1]
                while commit_counter(path)[1] < seen + 2 * 20:  # two counts a run
                    assert writer.poll() is None
                    time.sleep(0.01)
                trace.check_contained()
        stop.touch()
        assert writer.wait(timeout=120) == 0
    finally:
        stop.touch()
        writer.kill()
