"""The reference an engine's recorded routes are checked against (`traces.route_check`): the Hugging
Face model of the folder the engine serves, in the trace's dtype, through the project's bridge.

Each replayed row's recorded tokens (prompt and generated, as the engine fed them) go through the
model alone, in one forward pass; its routers' logits give the top-K set of every (layer, position),
and its next-token logits the log-probabilities the engine's are compared with. Every row is
replayed by default; with a `share` below 1, a random share of rows drawn from fresh entropy (the
draw is stored, so the same rows can be drawn again, but no one knows them before the run).
"""

from __future__ import annotations

import math
import secrets
import time

import numpy as np
import torch

from model.routing_policy import RoutingPolicy
from model.step import StepInputs
from traces import schema
from traces.route_check import RouteCheck, compare, sample_rows, structure


def structure_check(arrays: dict[str, np.ndarray], n_experts: int, dtype: str) -> RouteCheck:
    """The check of a run whose rows are not replayed (`--no-route-check`): its structure alone."""
    expert = np.asarray(arrays[schema.EXPERT])  # [L, B, T, K]
    held = np.asarray(arrays[schema.TOKENS]) >= 0  # [B, T]
    routes, repeated, out_of_range, example = structure(expert, n_experts, held)
    return RouteCheck(tokens=routes, repeated=repeated, out_of_range=out_of_range, example=example,
                      dtype=dtype, replayed=False, share=0.0)


class RouterReference:
    """The Hugging Face model of `folder` in `dtype` (or `model`, already loaded, e.g. by `against`)."""

    def __init__(self, folder: str, dtype: str, model=None):
        from model.hf.load import load_hf

        self.dtype = dtype
        self.owned = model is None
        self.model = load_hf(folder, dtype=dtype) if model is None else model
        self.policy = self.model.adapt_policy(RoutingPolicy.preset("dropless"))

    def check(self, arrays: dict[str, np.ndarray], n_experts: int, share: float = 1.0,
              draw: int | None = None) -> RouteCheck:
        """The route check of one run's datasets (`model.vllm.arrays.run_arrays`): every row, or at
        `share` < 1 a random share drawn with `draw` (fresh entropy when None)."""
        started = time.perf_counter()
        expert = np.asarray(arrays[schema.EXPERT])  # [L, B, T, K]
        tokens = np.asarray(arrays[schema.TOKENS])  # [B, T]
        routes, repeated, out_of_range, example = structure(expert, n_experts, tokens >= 0)
        if share < 1 and draw is None:
            draw = secrets.randbits(63)
        rows = sample_rows(tokens.shape[0], share, np.random.default_rng(draw if share < 1 else 0))
        checked = agreeing = near_ties = 0
        first: tuple[int, ...] = ()
        difference = -math.inf
        for b in rows:
            T = int((tokens[b] >= 0).sum())
            router_logits, log_probs = self._forward(tokens[b, :T])
            c, a, n, where = compare(expert[:, b, :T], router_logits, self.dtype)
            checked, agreeing, near_ties = checked + c, agreeing + a, near_ties + n
            if where is not None and not first:
                first = (b, *where)
            difference = max(difference, _logprob_difference(arrays, b, T, log_probs))
        return RouteCheck(tokens=routes, repeated=repeated, out_of_range=out_of_range, example=example,
                          dtype=self.dtype, rows=rows, share=min(float(share), 1.0),
                          draw=draw if share < 1 else None, checked=checked, agreeing=agreeing,
                          near_ties=near_ties, first=first,
                          logprob_difference=difference if difference >= 0 else math.nan,
                          seconds=time.perf_counter() - started)

    @torch.no_grad()
    def _forward(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Router logits [L, T, E] and next-token log-probabilities [T, V] of one row's tokens."""
        x = torch.as_tensor(ids, dtype=torch.long, device=self.model.device)[None]  # [1, T]
        out = self.model(x, self.policy, step=StepInputs(valid=torch.ones_like(x, dtype=torch.bool)))
        router_logits = torch.stack([r.router_logits[0] for r in out.routing]).float()  # [L, T, E]
        log_probs = torch.log_softmax(out.logits[0].double(), dim=-1)  # [T, V]
        return router_logits.cpu().numpy(), log_probs.cpu().numpy()

    def close(self) -> None:
        if self.owned:
            self.model.close()


def _logprob_difference(arrays: dict, b: int, T: int, log_probs: np.ndarray) -> float:
    """Max |engine - reference| log-probability over row b's recorded top-k ids (-inf when none)."""
    index = np.asarray(arrays[schema.TOPK_INDEX][b, :T])  # [T, J]
    value = np.asarray(arrays[schema.TOPK_VALUE][b, :T], np.float64)
    held = index >= 0
    if not held.any():
        return -math.inf
    reference = np.take_along_axis(log_probs, np.where(held, index, 0), axis=-1)
    return float(np.abs(value - reference)[held].max())
