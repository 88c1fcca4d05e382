"""E0, the kernel probe: for each weight shape of the model, which batch sizes give a row bitwise
the same values.

A row's result is computed at every batch size (the row first, the other rows fixed random inputs)
and the sizes are grouped into classes of bitwise equal results. With native kernels the GEMM
chooses its reduction order by matrix shape, so several classes appear; in batch-invariant mode
every size must fall in one class. The last line probes the whole model: the probe's logits over
its prefill and a few decode steps under dropless routing, partners filling the batch, so only
numerics can differ.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

import torch

from lab.experiments.compositions import Composition
from lab.experiments.conditions import dropless
from lab.experiments.options import Settings
from lab.experiments.progress import ProgressFn, no_progress
from lab.experiments.session import Models, Recording, RequestPool, generate_batch
from lab.experiments.tables import markdown_table, ranges
from model import kernels
from model.recorder import Recorder
from traces import schema
from traces.records import KernelMode
from traces.schema import MISSING

log = logging.getLogger(__name__)

MODES = ("native", "batch_invariant")
WHOLE_MODEL = "whole model (dropless, probe's logits)"
DECODE_STEPS = 8  # decode steps of the whole-model probe: there a GEMM has one row per sequence


@dataclass(frozen=True)
class ShapeClasses:
    """Batch-size classes of one weight shape per kernel mode: lists of sizes with equal results."""

    weight: str
    shape: tuple[int, ...]
    classes: dict[str, list[list[int]]]  # kernel mode -> classes, in order of first size


@dataclass
class E0Result:
    settings: Settings
    shapes: list[ShapeClasses]
    threads: int

    @property
    def invariant(self) -> bool:
        """Whether batch_invariant mode gave one class for every shape probed."""
        return all(len(s.classes["batch_invariant"]) == 1
                   for s in self.shapes if "batch_invariant" in s.classes)

    def table(self) -> str:
        modes = [m for m in MODES if m in self.settings.kernel_modes]
        rows = [[s.weight, " x ".join(map(str, s.shape)) if s.shape else "-",
                 *(" ".join("{" + ranges(c) + "}" for c in s.classes[m]) for m in modes)]
                for s in self.shapes]
        lines = [f"E0: batch sizes {ranges(self.settings.batch_sizes)}; a class is a set of batch sizes "
                 f"giving the first row bitwise equal values ({self.threads} torch thread"
                 f"{'s' if self.threads != 1 else ''}, {torch.__version__}).", "",
                 markdown_table(["weight", "shape [out x in]", *(f"{m} classes" for m in modes)], rows)]
        if KernelMode.BATCH_INVARIANT in modes:
            lines += ["", f"batch_invariant: one class for every shape: {'yes' if self.invariant else 'NO'}"]
        return "\n".join(lines)


def weight_shapes(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """The first weight of each distinct shape that goes through `kernels.linear`, with its name."""
    found: dict[tuple[int, ...], tuple[str, torch.Tensor]] = {}
    for name, p in model.named_parameters():
        if p.dim() == 3:  # stacked expert weights [E, out, in]: one expert is one GEMM
            name, p = f"{name}[0]", p[0]
        if p.dim() == 2 and "norm" not in name:
            found.setdefault(tuple(p.shape), ("head (tied embedding)" if name == "embed.weight" else name, p))
    return [found[k] for k in found]


def classes_of(keys: list[bytes], sizes: list[int]) -> list[list[int]]:
    """Group sizes whose result keys are equal, in order of first appearance."""
    groups: dict[bytes, list[int]] = {}
    for key, size in zip(keys, sizes, strict=True):
        groups.setdefault(key, []).append(size)
    return list(groups.values())


def _key(t: torch.Tensor) -> bytes:
    return hashlib.sha256(t.detach().cpu().contiguous().numpy().tobytes()).digest()


@torch.no_grad()
def probe_weight(weight: torch.Tensor, sizes: list[int], mode: str, tile: int, seed: int) -> list[list[int]]:
    """Classes of batch sizes for `kernels.linear(x[:B], weight)`'s first row."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(max(sizes), weight.shape[1], generator=gen).to(weight.device, weight.dtype)
    keys = [_key(kernels.linear(x[:B], weight, mode, tile)[0]) for B in sizes]
    return classes_of(keys, sizes)


def probe_model(model, pool: RequestPool, sizes: list[int], mode: str) -> list[list[int]]:
    """Classes of batch sizes for the probe's logits (row 0; partners in the other rows) over its
    prefill and `DECODE_STEPS` decode steps."""
    keys = []
    for B in sizes:
        # Partners cycle through the pool (the probe itself when the pool is empty).
        partners = [1 + i % pool.n_partners if pool.n_partners else 0 for i in range(B - 1)]
        comp = Composition((0, *partners), 0)
        recorder = Recorder()
        result = generate_batch(model, pool, comp, dropless(mode), DECODE_STEPS, recorder)
        arrays = recorder.arrays(result)
        # the probe's row, without the batch's padding
        length = int((arrays[schema.TOKENS][0] != MISSING).sum())
        keys.append(_key(torch.from_numpy(arrays[schema.LOGITS][0, :length])))
    return classes_of(keys, sizes)


def run_e0(settings: Settings, models: Models, pool: RequestPool,
           progress: ProgressFn = no_progress) -> E0Result:
    """Probe every weight shape and the whole model; store the classes as a table in the trace."""
    model = models.moe
    sizes = list(settings.batch_sizes)
    modes = [m for m in MODES if m in settings.kernel_modes]
    tile = model.config.kernel_tile
    weights = weight_shapes(model)
    total = (len(weights) + 1) * len(modes)
    shapes: list[ShapeClasses] = []
    done = 0
    for name, w in weights:
        classes = {}
        for mode in modes:
            classes[mode] = probe_weight(w, sizes, mode, tile, settings.seed)
            done += 1
            progress(done, total, f"E0 {name} {mode}")
        shapes.append(ShapeClasses(name, tuple(w.shape), classes))
    classes = {}
    for mode in modes:
        classes[mode] = probe_model(model, pool, sizes, mode)
        done += 1
        progress(done, total, f"E0 {WHOLE_MODEL} {mode}")
    shapes.append(ShapeClasses(WHOLE_MODEL, (), classes))
    result = E0Result(settings, shapes, torch.get_num_threads())
    cols: dict[str, list] = {"weight": [], "shape": [], "kernel_mode": [], "batch_size": [], "class": []}
    for s in shapes:
        for mode, cls in s.classes.items():
            for c, members in enumerate(cls):
                for B in members:
                    cols["weight"].append(s.weight)
                    cols["shape"].append("x".join(map(str, s.shape)))
                    cols["kernel_mode"].append(mode)
                    cols["batch_size"].append(B)
                    cols["class"].append(c)
    with Recording(settings.output, model, pool, experiment="E0", policy=dropless().policy,
                   kernel_mode="native", seed=settings.seed) as rec:
        rec.write_table("e0_kernel_classes", cols, {"threads": result.threads, "torch": torch.__version__})
    return result
