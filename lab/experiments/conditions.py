"""Named conditions of the experiments: which model, which routing knobs, which kernels.

A condition's `name` is what tables print and what each run stores in its `condition` attribute;
its `slug` goes into run names. Capacity conditions start from a preset of `model.routing_policy`
and change only the capacity factor and the grouping, so a table row differs from the next in one
knob.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.experiments import ExperimentError
from model.routing_policy import RoutingPolicy
from traces.records import KernelMode


@dataclass(frozen=True)
class Condition:
    """One way of running a batch: the routing policy (None for the dense control) and kernel mode."""

    name: str
    slug: str
    policy: RoutingPolicy | None
    kernel_mode: str
    dense: bool = False


def _cf_text(cf: float) -> str:
    return f"{cf:g}" if cf != int(cf) else f"{cf:.1f}"


def capacity_policy(preset: str, cf: float, group_by: str = "batch", **knobs) -> RoutingPolicy:
    """The knobs of `preset` with capacity factor `cf` and grouping `group_by` (plus `knobs`).

    GShard's own training formula `2*ceil(S/E)` has no factor; with a factor it is DeepSpeed's
    `ceil(S/E*k*cf)` (equal at cf = 1.0 up to rounding), the formula the shipped model trained with.
    """
    base = RoutingPolicy.preset(preset)
    if base.capacity_mode != "factor":
        raise ExperimentError(f"--presets: {preset} uses {base.capacity_mode} capacity, not a capacity "
                              f"factor; choose a preset with capacity_mode factor")
    overrides = dict(capacity_factor=float(cf), group_by=group_by, group_size=None, **knobs)
    if base.capacity_formula == "gshard_train":
        overrides["capacity_formula"] = "deepspeed"
    try:
        return base.replace(**overrides)
    except ValueError as exc:
        raise ExperimentError(f"--presets: {preset} with cf {cf}: {exc}") from None


def dense_control() -> Condition:
    return Condition("dense control", "dense", None, "native", dense=True)


def dropless(kernel_mode: str = "native") -> Condition:
    return Condition(f"MoE dropless, {kernel_mode}", f"dropless-{_mode_slug(kernel_mode)}",
                     RoutingPolicy.preset("dropless"), kernel_mode)


def capacity(preset: str, cf: float, kernel_mode: str, group_by: str = "batch", *,
             priority: str | None = None, pads_counted: bool | None = None,
             min_capacity: int | None = None) -> Condition:
    """`MoE gshard cf=1.0 per batch, native` and its policy; `priority`, `pads_counted` (whether pad
    positions count toward a group's S) and `min_capacity` (the capacity floor, DeepSpeed's
    `min_capacity`) override the preset's knobs when given. A floor above 0 shows in the name."""
    per = {"batch": "per batch", "sequence": "per sequence"}.get(group_by, group_by)
    knobs: dict[str, object] = {}
    name = f"MoE {preset} cf={_cf_text(cf)} {per}"
    slug = f"{preset}-cf{_cf_text(cf)}-{group_by}"
    if min_capacity is not None:
        knobs["min_capacity"] = int(min_capacity)
        if min_capacity:
            name += f", floor {int(min_capacity)}"
            slug += f"-min{int(min_capacity)}"
    if priority is not None:
        knobs["priority"] = priority
        name += f", {priority}"
        slug += f"-{priority}"
    if pads_counted is not None:
        knobs["pads_count_toward_capacity"] = pads_counted
        if not pads_counted:
            knobs["pads_routed"] = False  # a routed pad occupies a slot, so it must count
        name += ", pads counted" if pads_counted else ", pads not counted"
        slug += "-pads" if pads_counted else "-nopads"
    return Condition(f"{name}, {kernel_mode}", f"{slug}-{_mode_slug(kernel_mode)}",
                     capacity_policy(preset, cf, group_by, **knobs), kernel_mode)


def _mode_slug(kernel_mode: str) -> str:
    return {"native": "native", "batch_invariant": "bi"}[kernel_mode]


def e1_conditions(presets, capacity_factors, kernel_modes, with_dense: bool,
                  min_capacities=(0,)) -> list[Condition]:
    """E1 of docs/experiments.md, in table order: dense control, dropless, cf per batch (native, then
    batch-invariant kernels; each capacity floor of `min_capacities`), per-sequence grouping with
    native kernels (pads not counted: the control that shows the fix needs no invariant kernels, since
    a decode group of one token cannot overflow), then per-sequence grouping with batch-invariant
    kernels (with the preset's pad counting, then without: the fix that must give U = 1), and dropless
    with batch-invariant kernels (Thinking Machines' setting, also U = 1)."""
    out: list[Condition] = []
    if KernelMode.NATIVE in kernel_modes:
        if with_dense:
            out.append(dense_control())
        out.append(dropless("native"))
    for mode in ("native", "batch_invariant"):
        if mode in kernel_modes:
            out += [capacity(p, cf, mode, min_capacity=m) for p in presets for cf in capacity_factors
                    for m in min_capacities]
    if KernelMode.NATIVE in kernel_modes:
        out += [capacity(p, capacity_factors[0], "native", group_by="sequence", pads_counted=False)
                for p in presets]
    if KernelMode.BATCH_INVARIANT in kernel_modes:
        cf = capacity_factors[0]
        for p in presets:
            # Per-sequence groups are batch-invariant only if pads do not count toward S: a longer
            # partner pads the probe's prefill and, counted, raises its capacity (docs/routing.md, trap 4).
            if RoutingPolicy.preset(p).pads_count_toward_capacity:
                out.append(capacity(p, cf, "batch_invariant", group_by="sequence", pads_counted=True))
            out.append(capacity(p, cf, "batch_invariant", group_by="sequence", pads_counted=False))
        out.append(dropless("batch_invariant"))
    return out


def e7_conditions(preset: str, cf: float) -> list[Condition]:
    """E7: the native batch-grouped baseline first, then each mitigation alone, then both fixes."""
    return [
        capacity(preset, cf, "native"),
        capacity(preset, cf, "batch_invariant"),
        dropless("native"),
        capacity(preset, cf, "native", group_by="sequence", pads_counted=False),
        capacity(preset, cf, "batch_invariant", group_by="sequence", pads_counted=False),
    ]
