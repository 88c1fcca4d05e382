"""Seeded fuzzing: a few hundred damaged copies of a small trace read as data or fail with TraceError,
each in bounded time (a watchdog per file turns a hang into a failure) and bounded memory."""

import collections

import h5py
import numpy as np
import pytest

from traces import TraceError, TraceWriter, open_trace, validate
from traces.fuzz import BLOCK, HOSTILE_KINDS, LINK_KINDS, fuzz
from traces.heap import SIGNATURE, damaged_collection
from traces.synthetic import synthetic_routing, synthetic_run_arrays, write_synthetic_trace


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
    reaching = [o for o in outcomes if o.damage.split(" at ")[0] in LINK_KINDS]
    assert len(reaching) == 50 and {o.damage.split(" at ")[0] for o in reaching} == set(LINK_KINDS)
    read = [o for o in reaching if o.result != "TraceError"]
    assert not read, read[:5]
    hostile = [o for o in outcomes if o.damage.split(" ")[0] in HOSTILE_KINDS]
    assert len(hostile) == 25 and len({o.damage.split(" ")[0] for o in hostile}) >= 4
    read = [o for o in hostile if o.result != "TraceError" and o.damage != "machine-threads"]
    assert not read, read[:5]
    assert (tmp_path / "outside.h5").read_bytes() == small.read_bytes()  # a lock link never written through
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


@pytest.mark.parametrize("where", ["vocab", "tables/run_summary/label"])  # stored contiguous, in chunks
def test_a_string_entry_declaring_gigabytes_is_refused_unread(small, tmp_path, where):
    """HDF5 allocates what a string's entry declares before it finds the string: a damaged length
    (3 GiB here) is refused from the file's bytes instead."""
    with h5py.File(small, "r") as f:
        ds = f[where]
        offset = ds.id.get_offset() if ds.chunks is None else ds.id.get_chunk_info(0).byte_offset
    data = bytearray(small.read_bytes())
    data[offset:offset + 4] = (3 << 30).to_bytes(4, "little")   # the first entry's length
    path = tmp_path / "long.h5"
    path.write_bytes(bytes(data))
    with open_trace(path) as trace, pytest.raises(TraceError, match=f"/{where}: expected strings of at "
                                                                    f"most .* found an entry of 3221225472"):
        trace.read_table("run_summary") if where.startswith("tables") else trace.vocab
    assert any("found an entry of 3221225472 bytes" in p.message for p in validate(path))


def test_intact_file_has_no_damaged_collection(small):
    assert damaged_collection(small) is None


def test_damage_after_a_clean_scan_is_still_found(small, tmp_path):
    path = tmp_path / "rewritten.h5"
    path.write_bytes(small.read_bytes())
    assert damaged_collection(path) is None  # remembered as intact
    data = bytearray(path.read_bytes())
    at = data.find(SIGNATURE) + 512
    data[at:at + BLOCK] = bytes(BLOCK)
    with open(path, "r+b") as fh:  # same inode, same size
        fh.write(bytes(data))
    assert damaged_collection(path) is not None


def test_a_growing_trace_is_scanned_from_its_old_end(tmp_path):
    path = tmp_path / "growing.h5"
    write_synthetic_trace(path, 1, L=2, E=4, K=2, V=16, B=3, T=12, R=4)
    assert damaged_collection(path) is None
    with TraceWriter.append(path) as writer:
        arrays = synthetic_run_arrays(2, 3, 12, 2, 4, 16, np.random.default_rng(1), prompt_len=3,
                                      request_ids=np.zeros(3, int))
        writer.add_run("late", attrs={"request_ids": np.zeros(3, int), "probe_row": 0, "batch_size": 3,
                                      "max_new_tokens": 9, "label": "late " * 2000, "condition": "c",
                                      "experiment": "t", "routing": synthetic_routing(),
                                      "kernel_mode": "native", "seed": 1, "wall_time_s": 0.0}, arrays=arrays)
    data = bytearray(path.read_bytes())
    last = data.rfind(SIGNATURE)
    data[last + 16:last + 16 + BLOCK] = bytes(len(data[last + 16:last + 16 + BLOCK]))
    path.write_bytes(bytes(data))
    assert damaged_collection(path) == (last, last + 16)
