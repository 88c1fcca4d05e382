"""The committed schema-v1 golden file keeps reading with known values, and the spec's example works."""

import re

import numpy as np
import pytest
from paths import ROOT

from traces import TraceError, open_trace, validate
from traces.summary import describe

GOLDEN = ROOT / "tests" / "data" / "golden_v1.h5"


def test_golden_v1_root():
    assert GOLDEN.stat().st_size < 200_000
    with open_trace(GOLDEN) as trace:
        assert trace.meta["format"] == "moe-routing-trace" and trace.meta["format_version"] == 1
        assert trace.meta["created"] == "2026-11-29T21:24:45+00:00"
        assert trace.meta["model_config"]["d_model"] == 16
        assert trace.meta["routing"]["capacity"]["cf"] == 0.75
        assert trace.moe_layers == [1, 2]
        assert len(trace.vocab) == 32 and trace.vocab[0] == "<pad>"
        assert trace.vocab[28:32] == [".", "é", "→", "\n"]
        assert trace.requests.text == ["the probe → é", "a partner", "another partner."]
        np.testing.assert_array_equal(trace.requests.prompt_tokens(0), [20, 8, 5, 27, 16, 18])
        assert trace.run_names == ["alone", "batch"]
        assert trace.incomplete_runs == ["cut"]
        assert trace.table_names == ["causes"]
        columns, attrs = trace.read_table("causes")
        assert columns["cause"].tolist() == ["capacity"] and columns["position"].tolist() == [9]
        assert attrs == {"reference": "alone"}


def test_golden_v1_run_values():
    with open_trace(GOLDEN) as trace:
        run = trace.run("batch")
        assert run.dims == {"B": 3, "T": 16, "L": 2, "K": 2, "E": 4, "S": 11, "G": 1, "V": 32}
        assert run.request_ids.tolist() == [1, 0, 2] and run.probe_row == 1 and run.complete
        assert run.attrs["label"] == "batch: requests [1, 0, 2]" and run.attrs["wall_time_s"] == 0.5
        assert run.tokens[1].tolist() == [20, 8, 5, 27, 16, 18, 17, 0, 26, 29, 16, 13, 29, 29, 7, 21]
        assert run.step[1].tolist() == [0] * 6 + list(range(1, 11))
        assert run.expert[1, 1, :6].tolist() == [[2, 3], [1, 0], [2, 0], [3, 2], [3, 0], [2, 3]]
        assert run.kept[1, 1, :6].tolist() == [[True, False], [True, True], [True, True], [True, False],
                                               [True, False], [True, False]]
        assert run.slot[1, 1, :6].tolist() == [[2, 7], [1, 5], [3, 6], [3, 9], [4, 7], [4, 8]]
        assert run.capacity[:4, 1, 0].tolist() == [7, 2, 2, 2]
        assert run.requested[0, 1, 0].tolist() == [9, 6, 10, 11]
        assert run.load_kept[0, 1, 0].tolist() == [7, 6, 7, 7]
        np.testing.assert_array_equal(run.gate[0, 1, 0], np.float32([0.6328423023223877, 0.3671576678752899]))
        np.testing.assert_array_equal(run.router_logits[0, 1, 0], np.float32(
            [1.354173183441162, -1.5952277183532715, 0.9587230086326599, 1.898603081703186]))
        np.testing.assert_array_equal(run.logits[1, 3, :4], np.float32(
            [3.4983410835266113, 1.6632027626037598, 4.7815752029418945, 3.3029966354370117]))
        assert run.row_length(1) == 16


def test_golden_v1_incomplete_run_and_validation():
    with open_trace(GOLDEN) as trace:
        cut = trace.run("cut")
        assert cut.complete is False and cut.request_ids.tolist() == [2, 0]
        text = describe(trace)
    assert "cut  [INCOMPLETE]" in text and "runs: 2 complete, 1 incomplete" in text
    problems = validate(GOLDEN, read_data=True)
    assert [(p.where, p.severity) for p in problems] == [("/runs/cut", "warning")]


def test_spec_reading_example_runs_on_the_golden_file(capsys, monkeypatch, tmp_path):
    """The plain-h5py example of docs/trace-format.md works as written."""
    spec = (ROOT / "docs" / "trace-format.md").read_text()
    example = re.search(r"## Reading a trace with plain h5py\s+```python\n(.*?)```", spec, re.S).group(1)
    (tmp_path / "trace.h5").write_bytes(GOLDEN.read_bytes())
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "trace-format.md", "exec"), {})
    out = capsys.readouterr().out
    assert "dropped candidates in layer 1" in out and "['L', 'B', 'T', 'E']" in out


def test_golden_file_is_not_writable_by_accident():
    # The reader opens read-only: opening never modifies the committed file.
    before = GOLDEN.read_bytes()
    with open_trace(GOLDEN) as trace:
        trace.run("alone").logits[...]
    assert GOLDEN.read_bytes() == before
    with pytest.raises(TraceError, match="found nothing"):
        open_trace(GOLDEN / "x")
