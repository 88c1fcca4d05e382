"""Chunks shuffled and deflated on a thread pool and stored with direct chunk writes read back
through plain HDF5 exactly as written, with the filters every HDF5 tool knows."""

import zlib

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_traces_locking import B, E, K, L, T, V, add_run, new_writer
from traces import open_trace, validate
from traces.chunks import encode_chunk, encoded_chunks, new_pool, shuffle, stored_blocks
from traces.synthetic import synthetic_run_arrays


@pytest.mark.parametrize("dtype", ["float32", "float16", "int16", "int32", "int64", "bool"])
def test_shuffle_matches_the_hdf5_shuffle_filter(tmp_path, dtype):
    """HDF5 applies its own shuffle to a chunk written through h5py; with deflate's output inflated
    back, the bytes must be ours exactly."""
    rng = np.random.default_rng(1)
    block = (rng.standard_normal((3, 70)) * 50).astype(dtype)
    with h5py.File(tmp_path / "s.h5", "w") as f:
        ds = f.create_dataset("x", data=block, chunks=block.shape, compression="gzip", shuffle=True)
        _, stored = ds.id.read_direct_chunk((0, 0))
    assert zlib.decompress(stored) == shuffle(block)


@settings(max_examples=30, deadline=None)
@given(shape=st.tuples(st.integers(1, 5), st.integers(1, 700), st.integers(1, 9)),
       dtype=st.sampled_from(["float32", "float16", "int16", "int32", "bool"]), seed=st.integers(0, 2**31))
def test_direct_chunks_read_back_identical_with_gzip_and_shuffle(tmp_path_factory, shape, dtype, seed):
    rng = np.random.default_rng(seed)
    arr = rng.standard_normal(shape) if dtype.startswith("float") else rng.integers(-1, 60, shape)
    arr = (arr > 0) if dtype == "bool" else arr.astype(dtype)
    chunk = (1, min(shape[1], 512), shape[2])  # edge chunks along T when T > 512
    fill = np.array(0, dtype=arr.dtype)
    path = tmp_path_factory.mktemp("dc") / "d.h5"
    with new_pool(2) as pool, h5py.File(path, "w") as f:
        ds = f.create_dataset("x", shape=arr.shape, dtype=arr.dtype, chunks=chunk, compression="gzip",
                              compression_opts=1, shuffle=True, fillvalue=fill)
        for offset, data in encoded_chunks(pool, arr, chunk, fill):
            ds.id.write_direct_chunk(offset, data)
    with h5py.File(path, "r") as f:
        ds = f["x"]
        assert ds.compression == "gzip" and ds.compression_opts == 1 and ds.shuffle
        assert ds.dtype == arr.dtype
        np.testing.assert_array_equal(ds[()], arr)


def test_noise_planes_are_stored_and_exponents_compressed():
    rng = np.random.default_rng(2)
    block = rng.standard_normal((512, 256)).astype(np.float32)
    data = encode_chunk(block, block.shape, np.float32(0))
    assert zlib.decompress(data) == shuffle(block)
    # three stored planes of random mantissa bits cost their size; the sign/exponent plane shrinks
    assert 0.75 * block.nbytes < len(data) < 0.9 * block.nbytes


def test_stored_blocks_are_valid_deflate_beyond_one_block():
    data = np.random.default_rng(3).bytes(200_000)  # four stored blocks of at most 65535 bytes
    last = b"\x01\x00\x00\xff\xff"  # an empty final stored block
    stream = b"\x78\x01" + stored_blocks(data) + last + zlib.adler32(data).to_bytes(4, "big")
    assert zlib.decompress(stream) == data


def test_trace_writer_runs_read_back_and_validate(tmp_path):
    path = tmp_path / "w.h5"
    with new_writer(path) as writer:
        for i in range(3):
            add_run(writer, f"r{i}", seed=i)
    assert validate(path, read_data=True) == []
    with h5py.File(path, "r") as f:
        for name in ("tokens", "routing/router_logits", "logits", "load/kept"):
            ds = f["runs/r1"][name]
            assert ds.compression == "gzip" and ds.shuffle, name
    expected = synthetic_run_arrays(L, B, T, K, E, V, np.random.default_rng(1), prompt_len=2,
                                    request_ids=np.zeros(B, int))
    expected["tokens"][:, :2] = [1, 2]  # as add_run writes: the request's prompt
    with open_trace(path) as trace:
        run = trace.run("r1")
        for p, arr in expected.items():
            np.testing.assert_array_equal(run.arrays[p][...], arr, err_msg=p)
