"""Engines for the route check's tests, without vLLM: the project's Hugging Face path as a serving
engine (`LoopEngine`: greedy, every row of a composition in one right-padded batch, routes from the
router's top-K of that batch), and an engine that corrupts another's routes on purpose
(`Corrupting`), as a lying engine would.

Corruptions of one `generate` call's routes `[P + G - 1, L, K]` per row (each replaced set differs
from the one it replaces):
- `row`: every route of one random row;
- `uniform-Q`: max(1, round(Q * pairs)) (layer, token) pairs drawn uniformly among all of the call's;
- `duplicate`: one random pair names one expert twice;
- `range`: one random pair names expert E (out of range);
- `zeros`: every route [0, 0], as vLLM 0.30 compiled on a CPU returns.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from model.routing_policy import RoutingPolicy
from model.step import StepInputs
from model.vllm.outputs import EngineOutput


class LoopEngine:
    """Transformers' model of `folder` in `dtype` through the project's bridge, served as an engine."""

    name = "vllm"
    version = "loop"

    def __init__(self, folder: str, dtype: str):
        from model.hf.load import load_hf

        self.model = load_hf(folder, dtype=dtype)
        self.policy = self.model.adapt_policy(RoutingPolicy.preset("dropless"))
        self.dtype = dtype
        self.answers: dict = {}

    def check_tokenizer(self, text: str, ids: list[int]) -> None:
        pass

    @torch.no_grad()
    def _forward(self, rows: list[list[int]]):
        T = max(len(r) for r in rows)
        x = torch.zeros((len(rows), T), dtype=torch.long)
        valid = torch.zeros_like(x, dtype=torch.bool)
        for b, r in enumerate(rows):
            x[b, :len(r)], valid[b, :len(r)] = torch.as_tensor(r), True
        return self.model(x, self.policy, step=StepInputs(valid=valid))

    def generate(self, prompts: list[list[int]], max_new_tokens: int) -> list[EngineOutput]:
        """The greedy outputs, computed once per (prompts, max_new_tokens) and kept (a deterministic
        engine: the corrupted tries of one composition share its clean answer)."""
        key = (tuple(map(tuple, prompts)), max_new_tokens)
        if key not in self.answers:
            self.answers[key] = self._generate(prompts, max_new_tokens)
        return self.answers[key]

    def _generate(self, prompts: list[list[int]], max_new_tokens: int) -> list[EngineOutput]:
        rows = [list(p) for p in prompts]
        for _ in range(max_new_tokens + 1):  # greedy, the whole batch recomputed each step
            logits = self._forward(rows).logits.float()
            for b, r in enumerate(rows):
                r.append(int(logits[b, len(r) - 1].argmax()))
        fed = [r[:-1] for r in rows]
        out = self._forward(fed)
        log_probs = torch.log_softmax(out.logits.double(), dim=-1)  # [B, T, V]
        experts = torch.stack([r.decision.expert for r in out.routing], dim=2).numpy()  # [B, T, L, K]
        outputs = []
        for b, (p, r) in enumerate(zip(prompts, rows, strict=True)):
            generated = r[len(p):]
            logprobs = []
            for j, g in enumerate(generated):
                lp = log_probs[b, len(p) - 1 + j]  # [V]
                top = torch.topk(lp, 20)
                logprobs.append({int(i): float(v) for i, v in zip(top.indices, top.values, strict=True)}
                                | {g: float(lp[g])})
            routed = experts[b, :len(r) - 1].astype(np.int16)  # [P + G - 1, L, K]
            outputs.append(EngineOutput(list(p), generated, routed, logprobs))
        return outputs

    def settings(self) -> dict:
        return {"name": self.name, "package": "transformers", "version": self.version, "dtype": self.dtype,
                "compilation_mode": "NONE", "device": "cpu"}

    def close(self) -> None:
        self.model.close()


class Corrupting:
    """`engine` whose routes are corrupted by `kind` with a generator seeded by `seed`, from its
    `after`-th `generate` call on (0: every call, the first answer included)."""

    def __init__(self, engine, kind: str, seed: int, n_experts: int, after: int = 0):
        self.engine, self.kind, self.after, self.E = engine, kind, after, n_experts
        self.rng = np.random.default_rng(seed)
        self.calls = 0
        self.name, self.version = engine.name, engine.version

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def generate(self, prompts, max_new_tokens):
        outputs = self.engine.generate(prompts, max_new_tokens)
        self.calls += 1
        if self.calls <= self.after:
            return outputs
        routed = [o.routed.copy() for o in outputs]
        self.corrupt(routed)
        return [dataclasses.replace(o, routed=r) for o, r in zip(outputs, routed, strict=True)]

    def _other_set(self, old: np.ndarray) -> np.ndarray:
        while True:
            new = self.rng.choice(self.E, size=old.shape[-1], replace=False)
            if set(new.tolist()) != set(old.tolist()):
                return new

    def corrupt(self, routed: list[np.ndarray]) -> None:
        """Corrupt each row's routes `[T, L, K]` in place."""
        pairs = [(b, t, layer) for b, r in enumerate(routed) for t in range(r.shape[0])
                 for layer in range(r.shape[1])]
        if self.kind == "zeros":
            for r in routed:
                r[...] = 0
        elif self.kind == "row":
            r = routed[int(self.rng.integers(len(routed)))]
            for t in range(r.shape[0]):
                for layer in range(r.shape[1]):
                    r[t, layer] = self._other_set(r[t, layer])
        elif self.kind.startswith("uniform-"):
            n = max(1, round(float(self.kind.removeprefix("uniform-")) * len(pairs)))
            for i in self.rng.choice(len(pairs), size=n, replace=False):
                b, t, layer = pairs[i]
                routed[b][t, layer] = self._other_set(routed[b][t, layer])
        else:
            b, t, layer = pairs[int(self.rng.integers(len(pairs)))]
            old = routed[b][t, layer]
            routed[b][t, layer] = [old[0]] * len(old) if self.kind == "duplicate" else [self.E, *old[1:]]
