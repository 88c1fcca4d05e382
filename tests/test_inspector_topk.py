"""A trace with top-k next-token logits opens in every view, and the pair view's readout says which
next-token numbers became lower bounds."""

import pytest

from inspector.views.pair import PairView
from traces.synthetic import write_synthetic_trace


@pytest.fixture(scope="module")
def topk_path(tmp_path_factory):
    return write_synthetic_trace(tmp_path_factory.mktemp("topk") / "topk.h5", 3, L=2, E=4, V=5000, B=4, T=40,
                                 R=2, seed=1, capacity_factor=0.75, logits_k=16)


def test_every_view_draws_a_top_k_trace(qtbot, make_window, topk_path):
    w = make_window(topk_path)
    tabbed = [v for v in w.views if w.tabs.indexOf(v) >= 0]
    assert len(tabbed) >= 4
    for v in tabbed:
        w.tabs.setCurrentWidget(v)
        qtbot.waitUntil(lambda v=v: not v._dirty and v.data is not None, timeout=10000)
    pair = next(v for v in w.views if isinstance(v, PairView))
    assert not pair.data.exact_logits
    assert "next-token KL >= " in pair.data.describe_position(1)
