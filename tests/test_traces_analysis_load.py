"""Expert load of one step and layer: requested vs kept, capacity, and each row's share."""

import numpy as np
import pytest

from traces.analysis import LayerArrays, RunArrays, drop_rate, expert_load, run_expert_load
from traces.synthetic import synthetic_run_arrays


def hand_layer() -> LayerArrays:
    # Three rows, two positions, top-2 of three experts, one group of capacity 2 at step 0.
    # k-major slots: 1st choices r0t0 e0:0, r0t1 e0:1, r1t0 e0:2, r1t1 e1:0, r2t0 e2:0;
    # 2nd choices r0t0 e1:1, r0t1 e2:1, r1t0 e1:2, r1t1 e2:2, r2t0 e0:3. Row 2 position 1 not routed.
    expert = np.array([[[0, 1], [0, 2]], [[0, 1], [1, 2]], [[2, 0], [-1, -1]]])
    slot = np.array([[[0, 1], [1, 1]], [[2, 2], [0, 2]], [[0, 3], [-1, -1]]])
    return LayerArrays(
        run="r", layer=0, request_ids=np.array([5, 0, 6]), probe_row=1,
        step=np.array([[0, 0], [0, 0], [0, -1]]), group=np.array([[0, 0], [0, 0], [0, -1]]),
        expert=expert, slot=slot, kept=(slot >= 0) & (slot < 2), capacity=np.array([[2]]),
        requested=np.array([[[4, 3, 4]]]),  # expert 2 also got a pad the trace does not hold
        load_kept=np.array([[[2, 2, 2]]]),
    )


def test_requested_and_kept_per_row():
    load = expert_load(hand_layer(), 0)
    assert load.capacity.tolist() == [2] and load.groups.tolist() == [0] and not load.dropless
    assert load.requested_by_row[0].tolist() == [[2, 1, 1], [1, 2, 0], [1, 1, 1]]
    assert load.kept_by_row[0].tolist() == [[2, 0, 0], [1, 1, 0], [1, 0, 1]]
    assert load.requested_share[0, 0].tolist() == [0.5, 0.25, 0.25]
    assert load.kept_share[0, 1].tolist() == [0.5, 0.5, 0.0]
    assert load.probe_requested().tolist() == [[1, 2, 1]] and load.probe_kept().tolist() == [[0, 1, 0]]
    assert load.dropped.tolist() == [[2, 1, 2]]
    assert load.over_capacity.tolist() == [[True, True, True]]
    assert load.unattributed_requested.tolist() == [[0, 0, 1]]
    assert load.unattributed_kept.tolist() == [[0, 0, 0]]
    with pytest.raises(ValueError, match="forward steps 0..0, not 1"):
        expert_load(hand_layer(), 1)


def test_synthetic_run_loads_match_the_per_token_arrays():
    rng = np.random.default_rng(0)
    arrays = synthetic_run_arrays(2, 4, 24, 2, 4, 16, rng, prompt_len=(4, 8), capacity_factor=1.0)
    run = RunArrays.from_schema("s", arrays, request_ids=[0, 1, 2, 3], probe_row=2)
    S = run.capacity.shape[0]
    for s in (0, 1, S - 1):
        for layer in (0, 1):
            load = run_expert_load(run, s, layer)
            assert (load.unattributed_requested == 0).all() and (load.unattributed_kept == 0).all()
            assert ((load.kept <= np.maximum(load.capacity[:, None], 0)) | (load.capacity[:, None] < 0)).all()
    rates = drop_rate(run.expert, run.kept)
    want = [((run.expert[l] >= 0) & ~run.kept[l]).sum() / (run.expert[l] >= 0).sum() for l in range(2)]
    assert rates.tolist() == pytest.approx(want) and (rates > 0).any()


def test_dropless_group_and_bad_expert_ids():
    layer = hand_layer()
    dropless = LayerArrays(**{**layer.__dict__, "capacity": np.array([[-2]])})
    load = expert_load(dropless, 0)
    assert load.dropless and not load.over_capacity.any()
    broken = LayerArrays(**{**layer.__dict__, "expert": np.where(layer.expert == 2, 7, layer.expert)})
    with pytest.raises(ValueError, match="outside G=1, E=3"):
        expert_load(broken, 0)
