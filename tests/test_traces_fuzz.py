"""Seeded fuzzing: a few hundred damaged copies of a small trace read as data or fail with TraceError,
each in bounded time (a watchdog per file turns a hang into a failure) and bounded memory."""

import collections

import pytest

from traces import TraceError, TraceWriter, open_trace, validate
from traces.fuzz import BLOCK, fuzz
from traces.heap import SIGNATURE, damaged_collection
from traces.synthetic import write_synthetic_trace


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "small.h5"
    write_synthetic_trace(path, 3, L=2, E=4, K=2, V=16, B=3, T=12, R=4)
    with TraceWriter.append(path) as writer:
        writer.write_table("causes", {"run": ["r000", "r001"], "share": [0.5, 0.5]}, {"n": 2})
    return path


def test_fuzzed_copies_never_hang_nor_raise_other_errors(small, tmp_path):
    outcomes, peak_kib = fuzz(small, 250, seed=16, workdir=tmp_path)
    bad = [o for o in outcomes if o.result not in ("ok", "TraceError")]
    assert not bad, bad[:5]
    counts = collections.Counter(o.result for o in outcomes)
    assert counts["TraceError"] > 0 and counts["ok"] > 0
    assert peak_kib < 1 << 20  # 1 GiB: memory follows the file, not what damage declares


def _zero_inside_first_collection(src, dst):
    data = bytearray(src.read_bytes())
    at = data.find(SIGNATURE) + 512  # header intact, objects zeroed
    data[at:at + BLOCK] = bytes(BLOCK)
    dst.write_bytes(bytes(data))
    return at


def test_zeroed_global_heap_is_reported_not_read(small, tmp_path):
    path = tmp_path / "zeroed.h5"
    _zero_inside_first_collection(small, path)
    assert damaged_collection(path) is not None
    with pytest.raises(TraceError, match="global heap collection"):
        open_trace(path)
    problems = validate(path, read_data=True)
    assert len(problems) == 1 and "global heap" in problems[0].message
    with pytest.raises(TraceError, match="global heap"):
        TraceWriter.append(path)


def test_intact_file_has_no_damaged_collection(small):
    assert damaged_collection(small) is None
