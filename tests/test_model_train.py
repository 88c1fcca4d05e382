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


def test_the_loop_is_seeded_and_logs_the_first_and_the_last_step(tiny_model):
    """`train_steps`: the same seed trains the same bits; windows are seq + 1 tokens of the stream;
    each step's loss is the one given; a log entry at steps 0, 50, ... and the last."""
    import torch.nn.functional as F

    from model.train_loop import train_steps

    stream = torch.from_numpy(np.random.default_rng(1).integers(0, 256, 3000).astype(np.int64))
    runs = []
    for _ in range(2):
        model = tiny_model(seed=0)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        shapes = []

        def step_loss(windows, model=model, shapes=shapes):
            shapes.append(tuple(windows.shape))
            out = model(windows[:, :-1], RoutingPolicy.preset("dropless"))
            ce = F.cross_entropy(out.logits.reshape(-1, out.logits.shape[-1]), windows[:, 1:].reshape(-1))
            return ce, lambda step, seconds: {"step": step, "loss": round(ce.item(), 4)}

        run = train_steps(model, opt, stream, np.random.default_rng(0), steps=3, batch=2, seq=8, lr=1e-2,
                          warmup=2, step_loss=step_loss)
        runs.append((run, [p.detach().clone() for p in model.parameters()]))
        assert shapes == [(2, 9)] * 3 and model.training
    (first, weights), (second, again) = runs
    assert [e["step"] for e in first.history] == [0, 2] and first.history == second.history
    assert all(torch.equal(a, b) for a, b in zip(weights, again, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(weights, tiny_model(seed=0).parameters(), strict=True))
