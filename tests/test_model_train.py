"""Training pieces: the auxiliary losses, the schedule and the deterministic corpus."""

import math

import numpy as np
import pytest
import torch

from model.corpus import build_corpus, is_held_out
from model.moe import LayerRouting
from model.routing import RoutingPolicy, route
from model.tokenizer import BOS, EOS
from model.train import balance_loss, parse_args, z_loss
from model.train_loop import lr_at


def routing_of(logits):
    valid = torch.ones(logits.shape[:2], dtype=torch.bool)
    return [LayerRouting(logits, route(logits, valid, RoutingPolicy.preset("dropless")))]


def test_balance_loss_is_one_when_uniform_and_e_when_collapsed():
    E = 4
    uniform = torch.zeros(1, 8, E)
    uniform[0, torch.arange(8), torch.arange(8) % E] = 1e-3  # each expert first choice of 2 tokens
    assert math.isclose(float(balance_loss(routing_of(uniform), E)), 1.0, rel_tol=1e-3)
    collapsed = torch.tensor([20.0, 10.0, -20.0, -20.0]).expand(1, 8, E)
    # All first choices on expert 0 and all second on expert 1, with probability ~1 on expert 0.
    assert float(balance_loss(routing_of(collapsed), E)) > 0.49 * E


def test_z_loss_is_the_mean_squared_logsumexp_and_has_a_gradient():
    logits = torch.zeros(2, 3, 4, requires_grad=True)
    loss = z_loss(routing_of(logits))
    assert math.isclose(loss.item(), math.log(4) ** 2, rel_tol=1e-6)
    loss.backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0


def test_learning_rate_warms_up_then_decays_to_a_tenth():
    assert lr_at(0, 100, 1.0, 10) == 0.1
    assert lr_at(9, 100, 1.0, 10) == 1.0
    assert math.isclose(lr_at(100, 100, 1.0, 10), 0.1)
    assert all(lr_at(s, 100, 1.0, 10) >= lr_at(s + 1, 100, 1.0, 10) for s in range(10, 99))


def test_corpus_is_deterministic_and_split_by_document():
    a, b = build_corpus(max_files=4), build_corpus(max_files=4)
    assert a.description["sha256"] == b.description["sha256"]
    assert np.array_equal(a.train, b.train) and np.array_equal(a.held_out, b.held_out)
    assert a.held_out.size > 0 and a.train.size > 10 * a.held_out.size
    assert a.train[0] == BOS and a.train[-1] == EOS
    assert a.train.max() <= EOS and a.train.min() >= 0
    names = [f"doc:module{i}.py" for i in range(400)]
    share = sum(map(is_held_out, names)) / len(names)
    assert 0.02 < share < 0.1  # about one document in 20


def test_bad_training_arguments_are_refused():
    with pytest.raises(SystemExit):
        parse_args(["--steps", "0"])
    with pytest.raises(SystemExit):
        parse_args(["--lr", "-1"])
