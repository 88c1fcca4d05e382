"""Machine fingerprints as stored in a trace (root attribute `machine`): short names, full lines, and
the differences between two of them.

A fingerprint is a JSON object (written by `model.fingerprint.machine_fingerprint`); every field is
optional, so traces recorded before the attribute existed, or by other tools, read as `{}`.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Fields whose difference can change floating-point results, in the order they are reported.
KERNEL_FIELDS = ("kernels", "kernel_path", "cpu", "simd", "cpu_capability", "threads", "libraries", "torch",
                 "cuda", "cudnn", "gpu", "gpu_capability", "tf32_matmul", "deterministic_algorithms", "env",
                 "device")

_LABELS = {"kernels": "kernel version", "kernel_path": "kernel path", "cpu": "CPU", "simd": "SIMD",
           "cpu_capability": "ATen CPU capability", "threads": "threads",
           "libraries": "libraries", "torch": "torch", "cuda": "CUDA", "cudnn": "cuDNN", "gpu": "GPU",
           "gpu_capability": "GPU compute capability", "tf32_matmul": "TF32 matmul",
           "deterministic_algorithms": "deterministic algorithms", "env": "kernel environment",
           "device": "device", "cpu_vendor": "CPU vendor", "arch": "architecture", "os": "OS",
           "numpy": "numpy", "python": "Python"}


def short_name(fp: Mapping | None) -> str:
    """'AMD EPYC (AVX2, 2 threads, torch 2.13.0+cpu)' or 'NVIDIA H200 (sm 9.0, CUDA 12.8, torch ...)';
    'an unrecorded machine' for an empty fingerprint."""
    if not fp:
        return "an unrecorded machine"
    if fp.get("gpu"):
        parts = [f"sm {fp.get('gpu_capability', '?')}", f"CUDA {fp.get('cuda', '?')}"]
        head = str(fp["gpu"])
    else:
        parts = [str(fp.get("cpu_capability") or "?"), _threads(fp.get("threads"))]
        head = str(fp.get("cpu") or "unknown CPU")
    parts.append(f"torch {fp.get('torch', '?')}")
    return f"{head} ({', '.join(parts)})"


def _threads(n) -> str:
    return f"{n} thread{'' if n == 1 else 's'}" if isinstance(n, int) else "? threads"


def _value(value) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "none"
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value) or "none"
    return str(value)


def lines(fp: Mapping | None) -> list[str]:
    """One 'label: value' line per recorded field (what `moe-inspector info` prints)."""
    if not fp:
        return ["not recorded (a trace written before fingerprints, or by another tool)"]
    order = [*KERNEL_FIELDS, *(k for k in _LABELS if k not in KERNEL_FIELDS)]
    order += [k for k in fp if k not in order]
    return [f"{_LABELS.get(k, k)}: {_value(fp[k])}" for k in order if k in fp]


def differences(a: Mapping | None, b: Mapping | None) -> list[str]:
    """The kernel-relevant fields in which two fingerprints differ, as 'threads 1 -> 2'; [] when either
    is unrecorded (nothing can be said) or they agree."""
    if not a or not b:
        return []
    out = []
    for k in KERNEL_FIELDS:
        if a.get(k) != b.get(k):
            out.append(f"{_LABELS[k]} {_value(a.get(k, 'none'))} -> {_value(b.get(k, 'none'))}")
    return out

