"""KL, logit and router margins, bitwise differences and drops against hand computation."""

import math

import numpy as np
import pytest

from traces.analysis import RowTrace, pair_curves, routing_differences
from traces.analysis.curves import shared_prefix
from traces.analysis.measures import (
    bitwise_differ,
    drops,
    kept_sets,
    kl_divergence,
    logit_margin,
    max_logit_difference,
    router_margin,
)


def test_kl_against_hand_computation():
    p_logits, q_logits = np.array([0.0, math.log(2.0)]), np.array([0.0, 0.0])
    want = (1 / 3) * math.log((1 / 3) / 0.5) + (2 / 3) * math.log((2 / 3) / 0.5)
    assert kl_divergence(p_logits, q_logits) == pytest.approx(want, rel=1e-12)
    assert kl_divergence(q_logits + 5.0, q_logits) == 0.0  # a shift of all logits is the same distribution
    batch = kl_divergence(np.stack([p_logits, q_logits]), np.stack([q_logits, q_logits]))
    assert batch.shape == (2,) and batch[0] == pytest.approx(want) and batch[1] == 0.0


def test_logit_difference_and_margins():
    assert max_logit_difference(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.5, 2.0])) == 1.0
    assert logit_margin(np.array([1.0, 5.0, 4.5])) == pytest.approx(0.5)
    assert logit_margin(np.array([[2.0, 2.0, 0.0]]))[0] == 0.0  # an exact tie
    z = np.array([3.0, 1.0, 2.0, 0.0])
    assert router_margin(z, 1) == 1.0 and router_margin(z, 2) == 1.0 and router_margin(z, 3) == 1.0
    assert router_margin(np.array([3.0, 0.5, 2.0, 0.0]), 2) == 1.5
    assert router_margin(z, 4) == math.inf  # every expert chosen: no (k+1)-th
    with pytest.raises(ValueError, match="k = 5"):
        router_margin(z, 5)


def test_bitwise_differences():
    a = np.array([[0.0, 1.0], [np.nan, 2.0]], np.float32)
    b = np.array([[-0.0, 1.0], [np.nan, np.nextafter(np.float32(2), np.float32(3))]], np.float32)
    assert bitwise_differ(a, b, axis=None).tolist() == [[True, False], [False, True]]
    assert bitwise_differ(a, a.astype(np.float16)).tolist() == [False, False]  # equal values
    with pytest.raises(ValueError, match="cannot compare"):
        bitwise_differ(a, a[0])


def test_drops_and_kept_sets():
    expert = np.array([[0, 1], [2, -1], [3, 1]])
    kept = np.array([[True, False], [False, False], [True, True]])
    assert drops(expert, kept).tolist() == [1, 1, 0]
    assert kept_sets(expert, kept).tolist() == [[-1, 0], [-1, -1], [1, 3]]
    # The same kept set in another choice order is not a kept-set difference.
    assert (kept_sets(np.array([3, 1]), np.array([True, True])) == kept_sets(np.array([1, 3]),
                                                                             np.array([True, True]))).all()


def row(run, tokens, logits, router_logits, kept, step=None):
    T = len(tokens)
    return RowTrace(run=run, row=0, request=0, is_probe=True, prompt_len=1, tokens=np.array(tokens),
                    step=np.array(step if step is not None else range(T)),
                    expert=np.zeros((1, T, 1), np.int16), gate=np.ones((1, T, 1), np.float32),
                    kept=np.array(kept, bool).reshape(1, T, 1), slot=np.zeros((1, T, 1), np.int32),
                    group=np.zeros((1, T), np.int32), router_logits=np.asarray(router_logits, np.float32),
                    logits=np.asarray(logits, np.float64))


def test_pair_curves_over_the_shared_prefix():
    logits_a = [[0.0, math.log(2.0), 0.0], [1.0, 0.0, 0.0], [3.0, 1.0, 0.0], [0.0, 0.0, 9.0]]
    logits_b = [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [3.0, 1.0, 0.5], [0.0, 0.0, 0.0]]
    z_a = [[[1.0, 0.5, 0.0]] * 4]
    z_b = [[[1.0, 0.5, 0.0], [1.0, 0.7, 0.0], [1.0, 0.5, 0.0], [1.0, 0.5, 0.0]]]
    a = row("a", [5, 6, 7, 8], logits_a, z_a, [True, True, True, True])
    b = row("b", [5, 6, 7, 9], logits_b, z_b, [True, True, False, True], step=[0, 1, -1, 3])
    assert shared_prefix(a, b) == 3
    c = pair_curves(a, b)
    assert c.length == 3
    p = np.array([1.0, 2.0, 1.0]) / 4.0
    assert c.kl[0] == pytest.approx(float((p * np.log(p / (1 / 3))).sum()))
    assert c.kl[1] == 0.0 and math.isnan(c.kl[2])  # position 2 was not routed in b
    assert c.max_logit_diff[:2].tolist() == pytest.approx([math.log(2.0), 0.0])
    assert c.logit_margin[:2].tolist() == pytest.approx([math.log(2.0), 1.0])
    assert c.router_margin_ref.shape == (1, 3) and c.router_margin_ref[0].tolist() == pytest.approx([0.5] * 3)
    assert c.router_margin_other[0, :2].tolist() == pytest.approx([0.5, 0.3]) and math.isnan(
        c.router_margin_other[0, 2])
    assert c.router_delta[0, :2].tolist() == pytest.approx([0.0, 0.2])
    d = c.differences
    assert d.router_logits[0].tolist() == [False, True, False]
    assert d.kept[0].tolist() == [False, False, False]  # the drop at 2 is where b did not route
    assert d.logits.tolist() == [True, False, False]
    assert drops(b.expert[:, :3], b.kept[:, :3])[0].tolist() == [0, 0, 1]
    longer = pair_curves(a, b, length=4)
    assert longer.length == 4 and longer.kl[3] > 0
    with pytest.raises(ValueError, match="beyond the rows"):
        routing_differences(a, b, 5)
