"""Which rows of which runs hold a request, and whole-request analysis of a synthetic trace file."""

import numpy as np
import pytest

from traces import open_trace
from traces.analysis import (
    aligned_rows,
    analyse_request,
    probe_request,
    request_rows,
    requests_with_several_runs,
    run_expert_load,
    runs_of_request,
)
from traces.synthetic import write_synthetic_trace

RUNS = [("a", np.array([0, 3, 0]), 2), ("b", np.array([3, 1]), -1), ("c", np.array([0]), 0),
        ("d", np.array([2, 2, 0, 4]), 2)]


def test_request_rows_and_runs_of_a_request():
    assert request_rows(RUNS) == {0: [("a", 0), ("a", 2), ("c", 0), ("d", 2)], 1: [("b", 1)],
                                  2: [("d", 0), ("d", 1)], 3: [("a", 1), ("b", 0)], 4: [("d", 3)]}
    # One row per run: the probe row when it holds the request, else the first row holding it.
    assert runs_of_request(RUNS, 0) == [("a", 2), ("c", 0), ("d", 2)]
    assert runs_of_request(RUNS, 3) == [("a", 1), ("b", 0)]
    assert runs_of_request(RUNS, 9) == []
    assert requests_with_several_runs(RUNS) == [0, 3]  # request 2 sits twice in one run only
    assert probe_request(RUNS) == 0 and probe_request([("b", np.array([3]), -1)]) is None


def test_runs_by_request_is_runs_of_request_for_every_request_in_one_pass():
    from traces.analysis.alignment import runs_by_request

    every = runs_by_request(RUNS)
    assert every == {r: runs_of_request(RUNS, r) for r in range(5)}


def test_whole_request_analysis_of_a_synthetic_trace(tmp_path):
    path = write_synthetic_trace(tmp_path / "s.h5", n_runs=4, L=2, E=4, K=2, V=64, B=3, T=40, R=3, seed=5,
                                 compression=None)
    with open_trace(path) as trace:
        assert probe_request(trace) == 0 and 0 in requests_with_several_runs(trace)
        rows = aligned_rows(trace, 0)
        assert [(r.run, r.row) for r in rows] == runs_of_request(trace, 0)
        for r in rows:
            run = trace.run(r.run)
            assert r.is_probe and r.row == run.probe_row and r.length == run.row_length(r.row)
            assert np.array_equal(r.router_logits, run.router_logits[:, r.row, : r.length])
        analysis = analyse_request(rows, reference=1)
        assert analysis.verdicts[1].cause == "identical" and len(analysis.verdicts) == 4
        for v, t in zip(analysis.verdicts, analysis.t_star, strict=True):
            assert v.ref_run == rows[1].run and v.t_star == t
            assert v.cause in ("identical", "upstream_numeric", "router_flip", "capacity", "output_numeric")
        curves = analysis.curves(0)
        assert curves.length == analysis.verdicts[0].compared
        load = run_expert_load(trace.run(rows[0].run), 0, 1)
        assert (load.requested_by_row.sum(axis=-1) == load.requested).all()
        with pytest.raises(ValueError, match="several requests"):
            analyse_request(rows + aligned_rows(trace, 1))
