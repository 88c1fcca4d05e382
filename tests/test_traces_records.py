"""The trace's records: a run attribute declared once (a field of the run record) is written, checked,
read back and shown by `info`; the writer and the validator apply the same rules; older traces read
with the defaults of the fields they lack."""

from __future__ import annotations

from dataclasses import dataclass, replace

import h5py
import numpy as np
import pytest
from paths import ROOT

from traces import TraceError, TraceWriter, open_trace, schema, validate
from traces.records import RECORDS, RootMeta, RunAttrs, attr
from traces.summary import describe
from traces.synthetic import byte_vocab, synthetic_meta, synthetic_routing, synthetic_run_arrays

L, E, K, V, B, T = 2, 4, 2, 16, 3, 10
GOLDEN = ROOT / "tests" / "data" / "golden_v1.h5"


@dataclass(frozen=True, kw_only=True)
class WithRevision(RunAttrs):
    """The run record with one more attribute: the only declaration the test makes."""

    tokenizer_revision: str | None = attr("str", "revision of the tokenizer files the run used",
                                          presence="optional", info=True)


def _attrs(record=RunAttrs, **more) -> RunAttrs:
    return record(request_ids=[0, 1, 2], probe_row=1, batch_size=B, max_new_tokens=T - 4, label="three rows",
                  condition="test", experiment="records", routing=synthetic_routing(), seed=5, **more)


def _write(path, attrs) -> None:
    arrays = synthetic_run_arrays(L, B, T, K, E, V, np.random.default_rng(0))
    with TraceWriter(path, meta=synthetic_meta(L, E, K, V), vocab=byte_vocab(V), requests=["a", "b", "c"],
                     prompt_tokens=[[65], [66], [67]]) as writer:
        writer.add_run("r", attrs=attrs, arrays=arrays)


def test_a_run_attribute_declared_once_is_written_validated_read_and_shown(tmp_path, monkeypatch):
    monkeypatch.setitem(RECORDS, "run", WithRevision)
    path = tmp_path / "revision.h5"
    _write(path, _attrs(WithRevision, tokenizer_revision="abc123"))
    assert validate(path) == []
    with open_trace(path) as trace:
        run = trace.run("r")
        assert run.attrs["tokenizer_revision"] == "abc123"
        written = _attrs(WithRevision, tokenizer_revision="abc123")
        assert WithRevision.from_attrs(run.attrs) == replace(written, index=0, complete=True)
        assert "tokenizer_revision: abc123" in describe(trace)
    with h5py.File(path, "r+") as f:
        f["runs/r"].attrs["tokenizer_revision"] = 7
    found = [p.message for p in validate(path)]
    assert found == ["expected attribute 'tokenizer_revision' of type str, found 7"]
    with pytest.raises(ValueError, match="/runs/r: expected attribute 'tokenizer_revision' of type str"):
        _write(tmp_path / "wrong.h5", {**_attrs().to_attrs(), "tokenizer_revision": 7})
    older = tmp_path / "older.h5"  # written before the attribute existed: it reads with its default
    _write(older, _attrs())
    assert validate(older) == []
    with open_trace(older) as trace:
        assert WithRevision.from_attrs(trace.run("r").attrs).tokenizer_revision is None


def test_an_undeclared_attribute_is_neither_checked_nor_shown(tmp_path):
    path = tmp_path / "undeclared.h5"
    _write(path, {**_attrs().to_attrs(), "tokenizer_revision": 7})  # stored as given, a number
    assert validate(path) == []
    with open_trace(path) as trace:
        assert "tokenizer_revision" not in describe(trace)
        assert not hasattr(RunAttrs.from_attrs(trace.run("r").attrs), "tokenizer_revision")


def test_records_round_trip_through_a_trace(tmp_path):
    path = tmp_path / "round.h5"
    attrs = _attrs(not_recorded=[], cached_tokens=[0, 2, -1])
    _write(path, attrs)
    with open_trace(path) as trace:
        assert RunAttrs.from_attrs(trace.run("r").attrs) == replace(attrs, index=0, complete=True)
        stored = RootMeta.from_attrs(trace.meta)
        assert stored.format == schema.FORMAT and stored.format_version == schema.FORMAT_VERSION
        assert stored.without_writer_fields() == synthetic_meta(L, E, K, V)


def test_an_older_trace_reads_with_the_defaults_of_fields_it_lacks():
    with open_trace(GOLDEN) as trace:
        meta = RootMeta.from_attrs(trace.meta)
        run = RunAttrs.from_attrs(trace.run(trace.run_names[0]).attrs)
    assert meta.format_version == 1 and meta.engine is None and meta.machine is None
    assert run.not_recorded is None and run.topk_values is None and run.route_check is None
    lacking = RunAttrs.from_attrs({"request_ids": np.array([0, 1]), "probe_row": 0, "batch_size": 2,
                                   "max_new_tokens": 4, "index": 0, "complete": True})
    assert (lacking.label, lacking.seed, lacking.kernel_mode, lacking.routing) == ("", 0, "native", {})


def test_readers_read_the_records_with_their_defaults(tmp_path):
    """The reader hands out records (`Run.record`, `Trace.record`); a run that lacks its kernel mode
    and its label reads with the record's defaults everywhere: in the record, the run browser's
    columns and `info`."""
    from inspector.figure_data.browser import run_info

    path = tmp_path / "lacking.h5"
    _write(path, _attrs())
    with h5py.File(path, "r+") as f:
        for key in ("kernel_mode", "label", "max_new_tokens"):
            del f["runs/r"].attrs[key]
    with open_trace(path) as trace:
        run = trace.run("r")
        assert isinstance(trace.record, RootMeta) and trace.record == RootMeta.from_attrs(trace.meta)
        assert isinstance(run.record, RunAttrs) and "kernel_mode" not in run.attrs
        assert (run.record.kernel_mode, run.record.label, run.record.max_new_tokens) == ("native", "", None)
        info = run_info(run)
        assert (info.kernel_mode, info.label, info.condition) == ("native", "", "test")
        text = describe(trace)
    assert "kernel mode: native" in text and "      kernel mode:" not in text  # the file's own mode


@pytest.mark.parametrize("edit, value, message", [
    ("probe_row", 3, "expected probe_row in [-1, 3), found 3"),
    ("batch_size", 4, "expected batch_size = B = 3, found 4"),
    ("request_ids", np.array([0, 1, 3], np.int32), "expected request_ids in [0, 3) (the request pool)"),
    ("cached_tokens", "[1, 2]", "expected attribute 'cached_tokens' to list 3 counts"),
    ("topk_values", "probabilities", "expected attribute 'topk_values' in ('logits', 'log_probs')"),
])
def test_the_writer_raises_what_the_validator_collects(tmp_path, edit, value, message):
    good = tmp_path / "good.h5"
    _write(good, _attrs())
    with h5py.File(good, "r+") as f:
        f["runs/r"].attrs[edit] = value
    found = [p for p in validate(good) if p.severity == "error" and p.message.startswith(message)]
    given = {**_attrs().to_attrs(), edit: value}
    with pytest.raises(TraceError) as raised:  # a ValueError too, as the writer's other argument errors
        _write(tmp_path / "bad.h5", given)
    assert isinstance(raised.value, ValueError)
    assert [(raised.value.where, raised.value.expected)] == [(p.where, p.message) for p in found]


def test_the_writer_fills_its_own_attributes_and_refuses_them_given(tmp_path):
    with pytest.raises(ValueError, match="/runs/r: 'index' is filled by the writer"):
        _write(tmp_path / "index.h5", {**_attrs().to_attrs(), "index": 3})
    with pytest.raises(ValueError, match=r"/runs/r: missing run attributes \['max_new_tokens'"):
        _write(tmp_path / "missing.h5",
               {k: v for k, v in _attrs().to_attrs().items() if k != "max_new_tokens"})
    assert schema.WRITER_RUN_ATTRS == ("index", "complete")
    assert set(schema.RUN_ATTRS) == {name for name in RunAttrs.specs()}
