"""The run summary table: each producer's writer adds a run's row in the commit that completes it, the
row is what summarising the run from its arrays gives, the validator finds any row that disagrees,
and traces without the table (older ones) keep being read run by run."""

import json

import h5py
import numpy as np
import pytest
from old_format import without_run_summaries

from inspector.cli import main
from traces import TraceWriter, open_trace, validate
from traces.run_table import References, disagreements, first_difference, read_summaries, summarise_run
from traces.schema import ENGINE_OMITTABLE, RUN_SUMMARY_TABLE
from traces.synthetic import synthetic_routing, synthetic_run_arrays, write_synthetic_trace

TABLE = f"tables/{RUN_SUMMARY_TABLE}"


def recomputed(trace) -> dict:
    """Each run summarised from its arrays, the references placed in write order."""
    references = References()
    return {name: references.place(summarise_run(trace.run(name))) for name in trace.run_names}


def assert_table_is_the_runs(trace) -> None:
    stored = read_summaries(trace)
    assert stored is not None and list(stored) == list(trace.run_names)
    for name, actual in recomputed(trace).items():
        assert disagreements(stored[name], actual) == [], name


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A trace of the shipped model recorded by `moe-inspector record` (6 runs in 5 conditions)."""
    path = tmp_path_factory.mktemp("recorded") / "example.h5"
    assert main(["record", "-e", "example", "-n", "1", "--new-tokens", "10", "-o", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    path = tmp_path_factory.mktemp("synthetic") / "s.h5"
    write_synthetic_trace(path, 12, L=2, E=4, K=2, V=32, B=3, T=16, R=3, seed=1, capacity_factor=0.5)
    return path


def test_recorded_table_is_what_each_run_gives(recorded):
    with open_trace(recorded) as trace:
        assert len(trace.run_names) == 6
        assert_table_is_the_runs(trace)
        stored = read_summaries(trace)
        # The same rule as the browser's: the first run of a request in a condition is its reference.
        first = {}
        for name in trace.run_names:
            s = stored[name]
            assert s.reference == first.setdefault((s.focus_request, s.compared_in), name)
            run = trace.run(name)
            focus = max(run.probe_row, 0)
            new = run.tokens[focus, run.prompt_len[focus]:run.row_length(focus)]
            assert s.completion.tolist() == new.tolist()
    assert [p for p in validate(recorded) if p.severity == "error"] == []


def test_synthetic_table_with_drops_and_differences(synthetic):
    with open_trace(synthetic) as trace:
        assert_table_is_the_runs(trace)
        stored = read_summaries(trace).values()
    assert any(s.dropped > 0 for s in stored) and any(s.focus_dropped > 0 for s in stored)
    assert any(s.first_difference >= 0 for s in stored)  # runs that leave their reference
    assert validate(synthetic) == []


@pytest.mark.parametrize("column, value, says", [
    ("dropped", 999, "expected dropped = "),
    ("focus_dropped", 999, "expected focus_dropped = "),
    ("completion", "[1,2]", "expected completion = "),
    ("first_difference", 99, "expected first_difference = "),
    ("reference", "r005", "expected reference = "),
    ("condition", "another", "expected condition = "),
    ("request_ids", "[1]", "expected request_ids = "),
    ("run", "r000", "expected one row per complete run, found a second row"),
    ("run", "nobody", "expected one row per complete run, found a row, but no complete run"),
    ("completion", "[1,", "expected a readable summary"),
])
def test_validator_finds_a_tampered_summary(synthetic, tmp_path, column, value, says):
    path = tmp_path / "tampered.h5"
    path.write_bytes(synthetic.read_bytes())
    with h5py.File(path, "r+") as f:
        f[f"{TABLE}/{column}"][7] = value
    errors = [p for p in validate(path) if p.severity == "error"]
    assert len(errors) >= 1 and all(p.where == f"/{TABLE}" for p in errors)
    assert any(says in p.message for p in errors), [p.message for p in errors]
    # The reader's check of runs is not the table's: the runs still open.
    with open_trace(path) as trace:
        trace.run("r007")


def test_a_run_without_a_row_is_a_warning(synthetic, tmp_path):
    path = tmp_path / "short.h5"
    path.write_bytes(synthetic.read_bytes())
    with h5py.File(path, "r+") as f:
        for name in f[TABLE]:
            f[f"{TABLE}/{name}"].resize((11,))
    problems = validate(path)
    assert [(p.severity, p.message) for p in problems] == [
        ("warning", "run 'r011': expected a row (a reader summarises it from its arrays)")]
    with open_trace(path) as trace:
        assert set(read_summaries(trace)) == set(trace.run_names[:11])


def test_trace_without_the_table_is_read_run_by_run(synthetic, tmp_path):
    old = tmp_path / "old.h5"
    old.write_bytes(synthetic.read_bytes())
    without_run_summaries(old)
    assert validate(old) == []
    with open_trace(old) as trace:
        assert read_summaries(trace) is None and trace.table_names == []
    with TraceWriter.append(old) as writer:  # its new runs get no table either: it would hold some runs
        writer.add_run("late", **late_run(synthetic))
    with open_trace(old) as trace:
        assert read_summaries(trace) is None and "late" in trace.run_names


def test_a_table_of_another_version_is_left_to_the_runs(synthetic, tmp_path):
    path = tmp_path / "newer.h5"
    path.write_bytes(synthetic.read_bytes())
    with h5py.File(path, "r+") as f:
        f[TABLE].attrs["attrs"] = json.dumps({"kind": "run_summary", "version": 99})
    with open_trace(path) as trace:
        assert read_summaries(trace) is None
    assert [(p.severity, "not checked" in p.message) for p in validate(path)] == [("warning", True)]
    with TraceWriter.append(path) as writer:
        writer.add_run("late", **late_run(synthetic))
    with h5py.File(path, "r") as f:
        assert len(f[f"{TABLE}/run"]) == 12   # untouched


def test_appended_runs_continue_the_references(synthetic, tmp_path):
    path = tmp_path / "appended.h5"
    path.write_bytes(synthetic.read_bytes())
    with TraceWriter.append(path) as writer:
        writer.add_run("late", **late_run(synthetic))
        with pytest.raises(ValueError, match="run summary table"):
            writer.write_table(RUN_SUMMARY_TABLE, {"x": [1]})
    with open_trace(path) as trace:
        assert_table_is_the_runs(trace)
        late = read_summaries(trace)["late"]
        assert late.reference == "r000" and late.index == 12   # request 0's first run in its condition
    assert validate(path) == []


def test_engine_runs_summarise_as_the_reader_stands_in(tmp_path):
    """A run whose engine recorded no kept flags or loads: every chosen expert counts as kept."""
    path = tmp_path / "engine.h5"
    write_synthetic_trace(path, 1, L=2, E=4, K=2, V=32, B=3, T=16, R=3)
    run = late_run(path)
    arrays = {p: a for p, a in run["arrays"].items() if p not in ENGINE_OMITTABLE}
    arrays["routing/expert"][0, 1, 3, 1] = -1   # one chosen expert missing
    with TraceWriter.append(path) as writer:
        attrs = {**run["attrs"], "not_recorded": list(ENGINE_OMITTABLE)}
        writer.add_run("engine", attrs=attrs, arrays=arrays)
    with open_trace(path) as trace:
        assert_table_is_the_runs(trace)
        s = read_summaries(trace)["engine"]
    assert s.dropped == 0 and s.requested == int((arrays["routing/expert"] >= 0).sum())
    problems = validate(path)   # the table agrees; the one remark is the engine run's missing route check
    assert [p.severity for p in problems] == ["warning"] and "route_check" in problems[0].message


def test_first_difference():
    assert first_difference(np.array([1, 2]), np.array([1, 2])) is None
    assert first_difference(np.array([1, 2, 3]), np.array([1, 5, 3])) == 1
    assert first_difference(np.array([1, 2]), np.array([1, 2, 3])) == 2   # a length difference counts


def late_run(path) -> dict:
    """A run of requests 0, 1 and 2 (probe 0) for the trace at `path`, in the synthetic fixture's
    condition: `add_run`'s keywords."""
    with open_trace(path) as trace:
        prompts = [trace.requests.prompt_tokens(r) for r in range(3)]
    arrays = synthetic_run_arrays(2, 3, 16, 2, 4, 32, np.random.default_rng(1), prompts=prompts,
                                  request_ids=np.array([0, 1, 2]), capacity_factor=0.5)
    attrs = {"request_ids": np.array([0, 1, 2]), "probe_row": 0, "batch_size": 3, "max_new_tokens": 9,
             "label": "late", "condition": "synthetic batch cf=0.5 native", "experiment": "synthetic",
             "routing": synthetic_routing(0.5), "kernel_mode": "native", "seed": 1, "wall_time_s": 0.0}
    return {"attrs": attrs, "arrays": arrays}
