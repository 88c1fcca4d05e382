"""`LazyArray` indexing against numpy: any key numpy accepts (ints, slices of any step, Ellipsis,
integer and boolean arrays, mixed) gives numpy's answer, and any key numpy refuses raises IndexError.
The dataset lives in an in-memory HDF5 file, so hypothesis can try many keys quickly."""

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from traces.lazy import LazyArray

SHAPE = (3, 4, 5)
FULL = np.arange(np.prod(SHAPE), dtype=np.int32).reshape(SHAPE)


@pytest.fixture(scope="module")
def lazy():
    with h5py.File("in-memory.h5", "w", driver="core", backing_store=False) as f:
        yield LazyArray(f.create_dataset("x", data=FULL), "in-memory.h5", "/x", ("L", "B", "T"))


def axis_key(n: int):
    """One axis's index: an int (maybe out of range), a slice of any step, an integer array or
    list (maybe negative or out of range), or a boolean mask of the axis's length."""
    ints = st.integers(-n - 1, n)
    return st.one_of(
        ints,
        st.builds(slice, st.none() | st.integers(-n - 2, n + 2), st.none() | st.integers(-n - 2, n + 2),
                  st.none() | st.integers(-3, 3).filter(bool)),
        hnp.arrays(np.int64, st.integers(0, 3), elements=st.integers(-n, n - 1)),
        st.lists(st.integers(-n, n - 1), min_size=1, max_size=3),
        hnp.arrays(np.bool_, n),
    )


@st.composite
def keys(draw):
    """A key over some leading axes, maybe with an Ellipsis somewhere, maybe a bare axis key."""
    n_axes = draw(st.integers(0, len(SHAPE)))
    parts = [draw(axis_key(n)) for n in SHAPE[:n_axes]]
    if draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), Ellipsis)
    if len(parts) == 1 and draw(st.booleans()):
        return parts[0]
    return tuple(parts)


def numpy_answer(key):
    try:
        return FULL[key], None
    except IndexError as exc:
        return None, exc


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=keys())
def test_any_key_reads_what_numpy_gives(lazy, key):
    expected, error = numpy_answer(key)
    if error is not None:
        with pytest.raises(IndexError):
            lazy[key]
        return
    got = lazy[key]
    assert got.shape == expected.shape and got.dtype == expected.dtype, key
    np.testing.assert_array_equal(got, expected, err_msg=repr(key))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=hnp.basic_indices(SHAPE, allow_ellipsis=True))
def test_basic_indices_match_numpy(lazy, key):
    np.testing.assert_array_equal(lazy[key], FULL[key], err_msg=repr(key))


def test_whole_array_and_metadata(lazy):
    assert lazy.shape == SHAPE and lazy.ndim == 3 and len(lazy) == 3 and lazy.nbytes == FULL.nbytes
    np.testing.assert_array_equal(np.asarray(lazy), FULL)
    with pytest.raises(IndexError, match="newaxis"):
        lazy[None]
