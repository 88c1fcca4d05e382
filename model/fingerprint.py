"""The machine fingerprint a recording stores: what decides the bits of its floating-point results.

Float results of one torch build differ between CPU types (AVX2 against AVX-512 kernels, MKL code
paths), thread counts and GPU models, while the routing decisions usually agree. A trace therefore
records where it was computed (`machine` root attribute, see docs/trace-format.md), and `explain`
compares it with the machine of its reruns. `traces.fingerprint` reads and compares it without torch.
"""

from __future__ import annotations

import os
import platform
import re

import numpy as np
import torch

from model.experts import choose
from model.kernels import KERNEL_VERSION

#: Environment variables that change which kernels run or how they reduce.
KERNEL_ENV = ("ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "MKL_ENABLE_INSTRUCTIONS",
              "MKL_CBWR", "MKL_DEBUG_CPU_TYPE", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE",
              "OPENBLAS_L2_SIZE", "KMP_AFFINITY", "DNNL_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA",
              "CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
              "CUDA_VISIBLE_DEVICES")

_CONFIG_LIBRARIES = {
    "mkl": re.compile(r"Math Kernel Library Version ([^\s]+)"),
    "onednn": re.compile(r"MKL-DNN v([^\s]+)"),
    "openblas": re.compile(r"OpenBLAS ([^\s]+)"),
    "blas": re.compile(r"BLAS_INFO=([^,\s]+)"),
}


def machine_fingerprint(device: torch.device | str = "cpu", kernels: int = KERNEL_VERSION,
                        kernel_path: str | None = None) -> dict:
    """A JSON-ready description of this machine and torch build as far as they change float results;
    `kernels`: the version of the project's kernels the model runs (its `kernel_version`);
    `kernel_path`: that version and its instruction-set path (its `kernel_path`, `3-avx512`), by default
    the path a model chooses here for `kernels`."""
    fp = {
        "cpu": _cpu_model(),
        "cpu_vendor": _cpu_vendor(),
        "simd": _simd(),
        "arch": platform.machine(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu_capability": _cpu_capability(),
        "threads": torch.get_num_threads(),
        "torch": str(torch.__version__),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "libraries": _libraries(),
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "env": {k: os.environ[k] for k in KERNEL_ENV if k in os.environ},
        "device": str(device),
        "kernels": int(kernels),
        "kernel_path": kernel_path or choose(int(kernels)).path,
    }
    if torch.version.cuda:
        fp["cuda"] = str(torch.version.cuda)
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        if cudnn:
            fp["cudnn"] = str(cudnn)
    if str(device).startswith("cuda") and torch.cuda.is_available():
        index = torch.device(device).index or 0
        major, minor = torch.cuda.get_device_capability(index)
        fp["gpu"] = torch.cuda.get_device_name(index)
        fp["gpu_capability"] = f"{major}.{minor}"
        fp["tf32_matmul"] = bool(torch.backends.cuda.matmul.allow_tf32)
    return fp


def _cpu_capability() -> str:
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except (AttributeError, RuntimeError):
        return ""


def _libraries() -> dict[str, str]:
    try:
        config = torch.__config__.show()
    except RuntimeError:
        return {}
    found = {name: m.group(1) for name, pattern in _CONFIG_LIBRARIES.items() if (m := pattern.search(config))}
    return found


def _cpuinfo_field(name: str) -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == name:
                    return value.strip()
    except OSError:
        pass
    return ""


#: CPU feature flags that select different kernels (x86 /proc/cpuinfo names, then ARM ones).
_SIMD_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile",
               "amx_bf16", "neon", "asimd", "sve", "sve2", "bf16", "i8mm")


def _simd() -> list[str]:
    flags = set((_cpuinfo_field("flags") or _cpuinfo_field("Features")).split())
    return [f for f in _SIMD_FLAGS if f in flags]


def _cpu_model() -> str:
    return _cpuinfo_field("model name") or _cpuinfo_field("Model") or platform.processor() or "unknown CPU"


def _cpu_vendor() -> str:
    return _cpuinfo_field("vendor_id") or _cpuinfo_field("CPU implementer") or ""
