"""Single-event interventions change one routing decision of one step and layer, nothing else."""

import pytest
import torch

from model.config import ModelConfig
from model.generate import generate
from model.intervention import Intervention
from model.routing import RoutingPolicy
from model.tokenizer import encode
from model.transformer import MoETransformer

PROMPTS = ["The probe: def f(x):", "import os", "x = [1, 2, 3]"]
POLICY = RoutingPolicy.preset("gshard", capacity_formula="deepspeed", capacity_factor=0.5)
NEW_TOKENS = 6


class Steps:
    """Keeps what every forward step routed: (positions, valid, routing per layer)."""

    def __init__(self):
        self.steps = []

    def record_step(self, step, positions, valid, routing, logits, tokens=None):
        self.steps.append((positions.clone(), valid.clone(), routing))


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    config = ModelConfig(d_model=32, n_layers=2, n_heads=2, n_experts=4, top_k=2, expert_d_ff=32, context=64,
                         init_std=0.2)
    return MoETransformer(config).eval()


def run(model, intervention=None) -> Steps:
    steps = Steps()
    generate(model, [encode(p) for p in PROMPTS], NEW_TOKENS, POLICY, "batch_invariant", recorder=steps,
             intervention=intervention)
    return steps


@pytest.fixture(scope="module")
def baseline(model):
    return run(model)


def first_drop(steps: Steps, where=lambda d, b, col, j: True):
    """(step, layer, row, col, rank) of the first dropped candidate after the prompt step (for which
    `where(decision, row, col, rank)` holds)."""
    for s, (_, _, routing) in enumerate(steps.steps):
        for layer, r in enumerate(routing):
            for b, col, j in (tuple(int(x) for x in idx) for idx in torch.nonzero(r.decision.dropped)):
                if s > 0 and where(r.decision, b, col, j):
                    return s, layer, b, col, j
    pytest.fail("the low-capacity policy drops no such candidate: the test needs one")


def rows_ahead(d, b, col, j) -> tuple[int, ...]:
    """The other rows holding slots ahead of candidate (b, col, j) in its expert's queue."""
    expert, g = int(d.expert[b, col, j]), int(d.group[b, col])
    queue = (d.expert == expert) & (d.group[..., None] == g)
    ahead = queue & (d.slot < d.slot[b, col, j])
    return tuple(sorted({int(r) for r in torch.nonzero(ahead)[:, 0]} - {b}))


def event(steps: Steps, s, layer, b, col):
    positions, _, routing = steps.steps[s]
    return int(positions[b, col]), routing[layer].decision


def assert_same_until(a: Steps, b: Steps, s: int, layer: int):
    """Every step before s, and the layers of step s before `layer`, routed bitwise alike."""
    for i in range(s + 1):
        for li, (ra, rb) in enumerate(zip(a.steps[i][2], b.steps[i][2], strict=True)):
            if i == s and li >= layer:
                break
            assert torch.equal(ra.decision.kept, rb.decision.kept) and torch.equal(ra.router_logits,
                                                                                  rb.router_logits)


def test_keep_keeps_exactly_the_dropped_candidate(model, baseline):
    s, layer, b, col, j = first_drop(baseline)
    position, d = event(baseline, s, layer, b, col)
    iv = Intervention("keep", step=s, layer=layer, row=b, position=position, rank=j,
                      expert=int(d.expert[b, col, j]))
    changed = run(model, iv)
    assert_same_until(baseline, changed, s, layer)
    after = changed.steps[s][2][layer].decision
    expected = d.kept.clone()
    expected[b, col, j] = True
    assert torch.equal(after.kept, expected)
    assert torch.equal(after.expert, d.expert) and torch.equal(after.slot, d.slot)
    assert after.gate[b, col, j] > 0 and torch.allclose(after.gate[b, col].sum(), torch.tensor(1.0))
    others = torch.ones_like(d.kept[..., 0])
    others[b, col] = False
    assert torch.equal(after.gate[others], d.gate[others])  # untouched tokens keep their bits


def test_a_larger_capacity_keeps_the_group_members_below_it(model, baseline):
    s, layer, b, col, j = first_drop(baseline)
    position, d = event(baseline, s, layer, b, col)
    g = int(d.group[b, col])
    bigger = int(d.slot[b, col, j]) + 1
    iv = Intervention("capacity", step=s, layer=layer, row=b, position=position, group=g, capacity=bigger)
    after = run(model, iv).steps[s][2][layer].decision
    members = (d.expert >= 0) & (d.group[..., None] == g)
    assert torch.equal(after.kept[members], d.slot[members] < bigger)
    assert torch.equal(after.kept[~members], d.kept[~members])
    assert bool(after.kept[b, col, j])


def test_withdrawing_the_displacing_rows_moves_the_queue_up(model, baseline):
    s, layer, b, col, j = first_drop(baseline, lambda d, b, col, j: bool(rows_ahead(d, b, col, j)))
    position, d = event(baseline, s, layer, b, col)
    expert, g = int(d.expert[b, col, j]), int(d.group[b, col])
    rows = rows_ahead(d, b, col, j)
    queue = (d.expert == expert) & (d.group[..., None] == g)
    iv = Intervention("remove_rows", step=s, layer=layer, row=b, position=position, rank=j, expert=expert,
                      group=g, rows=rows)
    after = run(model, iv).steps[s][2][layer].decision
    withdrawn = queue & torch.isin(torch.arange(d.expert.shape[0]), torch.tensor(rows))[:, None, None]
    assert not after.kept[withdrawn].any()
    n_ahead = int((d.slot[withdrawn] < d.slot[b, col, j]).sum())
    assert bool(after.kept[b, col, j]) == (int(d.slot[b, col, j]) - n_ahead < int(d.capacity[g]))
    outside = ~queue
    assert torch.equal(after.kept[outside], d.kept[outside])


def test_router_logits_are_replaced_for_the_one_token(model, baseline):
    s, layer, b, col, _ = first_drop(baseline)
    position, _ = event(baseline, s, layer, b, col)
    before = baseline.steps[s][2][layer].router_logits
    given = tuple(float(x) for x in torch.flip(before[b, col], [0]))
    iv = Intervention("router_logits", step=s, layer=layer, row=b, position=position, logits=given)
    changed = run(model, iv)
    assert_same_until(baseline, changed, s, layer)
    after = changed.steps[s][2][layer].router_logits
    assert torch.equal(after[b, col], torch.tensor(given))
    others = torch.ones(after.shape[:2], dtype=torch.bool)
    others[b, col] = False
    assert torch.equal(after[others], before[others])


@pytest.mark.parametrize("kwargs, message", [
    (dict(kind="swap"), "kind must be one of"),
    (dict(kind="remove_rows"), "displacing rows"),
    (dict(kind="capacity"), "new capacity"),
    (dict(kind="router_logits"), "logits to give"),
])
def test_malformed_interventions_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Intervention(step=1, layer=0, row=0, position=3, **kwargs)


def test_an_event_the_step_does_not_route_is_refused(model, baseline):
    s, layer, b, col, j = first_drop(baseline)
    iv = Intervention("keep", step=s, layer=layer, row=b, position=10_000, rank=j, expert=0)
    with pytest.raises(ValueError, match="does not route"):
        run(model, iv)


def test_a_set_of_interventions_applies_each_event_and_nothing_else(model, baseline):
    from model.intervention import InterventionSet

    s, layer, b, col, j = first_drop(baseline)
    position, d = event(baseline, s, layer, b, col)
    keep = Intervention("keep", step=s, layer=layer, row=b, position=position, rank=j,
                        expert=int(d.expert[b, col, j]))
    later = first_drop(baseline, lambda d2, b2, c2, j2: (b2, c2) != (b, col))
    s2, layer2, b2, col2, _ = later
    position2, d2 = event(baseline, s2, layer2, b2, col2)
    given = tuple(float(x) for x in torch.flip(baseline.steps[s2][2][layer2].router_logits[b2, col2], [0]))
    logits = Intervention("router_logits", step=s2, layer=layer2, row=b2, position=position2, logits=given)
    both = run(model, InterventionSet((keep, logits)))
    alone = run(model, keep)
    assert_same_until(alone, both, s2, layer2)   # the first event alone until the second acts
    assert bool(both.steps[s][2][layer].decision.kept[b, col, j])
    assert torch.equal(both.steps[s2][2][layer2].router_logits[b2, col2], torch.tensor(given))


def test_until_stops_the_generation_without_changing_what_came_before(model):
    prompts = [encode(p) for p in PROMPTS]
    full = generate(model, prompts, NEW_TOKENS, POLICY, "batch_invariant")
    calls = []

    def until(rows):
        calls.append(len(rows[0]))
        return len(rows[0]) >= len(prompts[0]) + 2

    short = generate(model, prompts, NEW_TOKENS, POLICY, "batch_invariant", until=until)
    assert short.steps < full.steps and calls[-1] == len(prompts[0]) + 2
    assert all(s == f[: len(s)] for s, f in zip(short.tokens, full.tokens, strict=True))
