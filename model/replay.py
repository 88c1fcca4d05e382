"""Routing replay: force a generation to use the routing recorded in an earlier run for some rows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.moe import ForcedRouting
from traces import schema


@dataclass(frozen=True)
class ReplayRouting:
    """Recorded routing of one request: expert[L,T,K], kept[L,T,K], gate[L,T,K] in its own positions.

    Positions whose expert is -1 (past the recorded row's end) are routed by the router as usual.
    """

    expert: np.ndarray | torch.Tensor
    kept: np.ndarray | torch.Tensor
    gate: np.ndarray | torch.Tensor

    def __post_init__(self) -> None:
        shapes = {tuple(a.shape) for a in (self.expert, self.kept, self.gate)}
        if len(shapes) != 1 or len(next(iter(shapes))) != 3:
            raise ValueError(f"ReplayRouting: expert, kept and gate must share one shape [L,T,K], got "
                             f"{[tuple(a.shape) for a in (self.expert, self.kept, self.gate)]}")

    @classmethod
    def from_run_arrays(cls, arrays: dict, row: int) -> ReplayRouting:
        """The routing of one row of a recorded run (`Recorder.arrays()` or a trace `Run`)."""
        get = arrays.__getitem__ if isinstance(arrays, dict) else (
            lambda path: getattr(arrays, schema.RUN_ARRAY_NAMES[path]))
        return cls(np.asarray(get(schema.EXPERT)[:, row]), np.asarray(get(schema.KEPT)[:, row]),
                   np.asarray(get(schema.GATE)[:, row]))


def check_replay(replay: dict[int, ReplayRouting] | None, B: int, L: int, K: int) -> None:
    """Raise a ValueError naming what is wrong with a replay mapping for a batch of B rows."""
    if replay is None:
        return
    if not isinstance(replay, dict):
        raise ValueError(f"replay must be a dict row -> ReplayRouting, got {type(replay).__name__}")
    for row, rec in replay.items():
        if isinstance(row, bool) or not isinstance(row, int) or not 0 <= row < B:
            raise ValueError(f"replay row {row!r} is not a row of this batch (0..{B - 1})")
        if not isinstance(rec, ReplayRouting):
            raise ValueError(f"replay[{row}] must be a ReplayRouting, got {type(rec).__name__}")
        if rec.expert.shape[0] != L or rec.expert.shape[2] != K:
            raise ValueError(f"replay[{row}] has shape {tuple(rec.expert.shape)}; this model needs "
                             f"[L={L}, T, K={K}]")


def forced_for_step(replay: dict[int, ReplayRouting], positions: torch.Tensor, valid: torch.Tensor,
                    L: int, K: int) -> list[ForcedRouting | None]:
    """Per MoE layer, the routing to impose on this step's tokens (positions[B,Ts], valid[B,Ts])."""
    B, Ts = positions.shape
    device = positions.device
    expert = torch.full((L, B, Ts, K), -1, dtype=torch.int64)
    kept = torch.zeros((L, B, Ts, K), dtype=torch.bool)
    gate = torch.zeros((L, B, Ts, K), dtype=torch.float32)
    mask = torch.zeros((L, B, Ts), dtype=torch.bool)
    pos = positions.cpu()
    ok = valid.cpu()
    by_length: dict[int, list[int]] = {}   # records of one length T_rec are gathered together
    for row, rec in replay.items():
        by_length.setdefault(int(rec.expert.shape[1]), []).append(row)
    for T_rec, rows in by_length.items():
        r = torch.tensor(rows)                                           # [n]
        p = pos[r]                                                       # [n,Ts]
        here = ok[r] & (p < T_rec)                                       # [n,Ts] recorded columns
        if not bool(here.any()):
            continue
        at = p.clamp(0, T_rec - 1).numpy()
        e = _gathered([replay[row].expert for row in rows], at).long()  # [L,n,Ts,K]
        has = here[None] & (e[..., 0] >= 0)                              # [L,n,Ts] recorded positions
        hit = here[None, ..., None]
        expert[:, r] = torch.where(hit, e, expert[:, r])
        kept[:, r] = torch.where(hit, _gathered([replay[row].kept for row in rows], at).bool(), kept[:, r])
        gate[:, r] = torch.where(hit, _gathered([replay[row].gate for row in rows], at).float(), gate[:, r])
        mask[:, r] = has
    return [ForcedRouting(expert[li].to(device), kept[li].to(device), gate[li].to(device),
                          mask[li].to(device)) for li in range(L)]


def _gathered(records: list, at: np.ndarray) -> torch.Tensor:
    """records [n] of [L,T_rec,K] at positions at[n,Ts] -> [L,n,Ts,K]."""
    a = np.stack([np.asarray(x) for x in records])                   # [n,L,T_rec,K]
    return torch.as_tensor(a[np.arange(len(records))[:, None], :, at].transpose(2, 0, 1, 3))
