"""The compiled MoE kernels of kernel version 3 (`moe_step.cpp`): built once per instruction-set path by
the set-up, loaded if present and runnable here, never built at run time.

A path is the vector instructions a build targets, chosen explicitly (`simd.h`): `avx512`, `avx2`
(with FMA) or `generic` (the compiler's baseline for the architecture). Each path has its own bits, so
the machine fingerprint records the path that ran (`3-avx512`). The build's name holds its path and a
digest of its sources, flags, torch and Python: a `build/` shared between machines never loads a path
this CPU lacks (its flags are checked before anything is loaded), nor a stale build.

`load()` returns the best path built for this CPU, or None with one warning (not built here, built from
another source, no compiler at set-up): the model then runs its pure-PyTorch path, kernel version 2,
and says so in every trace's machine fingerprint. `python -m model.native` builds the paths this CPU
runs (`model.native.build`); the app never needs it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import platform
import warnings
from pathlib import Path
from types import ModuleType

import torch

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
#: The sources of one build, the translation unit first.
SOURCES = ("moe_step.cpp", "experts.h", "simd.h")
#: Paths, best first, and the flags that select each one's instructions.
ISA_FLAGS = {
    "avx512": ("-DMOE_ISA_AVX512", "-mavx512f", "-mavx2", "-mfma"),
    "avx2": ("-DMOE_ISA_AVX2", "-mavx2", "-mfma"),
    "generic": (),
}
#: Flags of every path: no contraction of a multiply and an add the source did not fuse itself;
#: OpenMP, so `at::parallel_for` runs over torch's intra-op threads.
CFLAGS = ("-O3", "-std=c++17", "-ffp-contract=off", "-fopenmp")
#: CPU flags (Linux /proc/cpuinfo names) each x86 path needs.
_X86_NEEDS = {"avx512": ("avx512f", "avx2", "fma"), "avx2": ("avx2", "fma")}


def build_dir() -> Path:
    """Where builds live: build/native in a source checkout, else the user's cache folder (an installed
    package's folder may not be writable); MOE_INSPECTOR_BUILD_DIR overrides both."""
    if os.environ.get("MOE_INSPECTOR_BUILD_DIR"):
        return Path(os.environ["MOE_INSPECTOR_BUILD_DIR"])
    root = HERE.parents[1]
    if (root / "pyproject.toml").is_file():
        return root / "build" / "native"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "moe-inspector" / "native"


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return set(value.split())
    except OSError:
        pass
    return set()


@functools.cache
def runnable() -> tuple[str, ...]:
    """The paths this CPU runs, best first (`generic` always; the AVX ones on x86-64 where the CPU and
    the OS enable them: Linux lists only the flags it supports; elsewhere torch's own dispatch says)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return ("generic",)
    flags = _cpu_flags()
    if not flags:  # no /proc/cpuinfo: what torch's kernels dispatch to on this CPU
        capability = getattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")()
        flags = {"AVX512": {"avx512f", "avx2", "fma"}, "AVX2": {"avx2", "fma"}}.get(capability, set())
    return tuple(isa for isa, needs in _X86_NEEDS.items() if flags.issuperset(needs)) + ("generic",)


def module_name(isa: str) -> str:
    """A build's name: its path and a digest of its sources, flags, torch and Python."""
    digest = hashlib.sha256()
    for source in SOURCES:
        digest.update((HERE / source).read_bytes())
    digest.update(" ".join(CFLAGS + ISA_FLAGS[isa]).encode())
    digest.update(f"{torch.__version__} {platform.python_version()} {platform.machine()}".encode())
    return f"moe_step_{isa}_{digest.hexdigest()[:16]}"


def library(name: str) -> Path | None:
    """The built library of build `name`, or None."""
    for suffix in (*importlib.machinery.EXTENSION_SUFFIXES, ".so"):
        path = build_dir() / name / f"{name}{suffix}"
        if path.is_file():
            return path
    return None


def _import(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a loadable extension")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def load_path(isa: str) -> ModuleType | None:
    """The build of path `isa`, or None where this CPU cannot run it, it is not built, or it does not
    load (said at debug level; `load` speaks for the model)."""
    if isa not in runnable():
        return None
    try:
        name = module_name(isa)
        path = library(name)
        if path is None:
            log.debug("compiled MoE kernels (%s) not built: no %s in %s", isa, name, build_dir())
            return None
        return _import(path, name)
    except Exception as exc:  # noqa: BLE001 - a build that does not load: the pure-PyTorch path runs
        log.debug("compiled MoE kernels (%s) do not load: %s: %s", isa, type(exc).__name__, exc)
        return None


@functools.cache
def load() -> ModuleType | None:
    """The best path built for this CPU, or None, said once in a warning."""
    for isa in runnable():
        module = load_path(isa)
        if module is not None:
            return module
    warnings.warn(f"the compiled MoE kernels are not built for this CPU ({', '.join(runnable())}) in "
                  f"{build_dir()}: the model runs its pure-PyTorch path (kernel version 2); "
                  "`python -m model.native` builds them", RuntimeWarning, stacklevel=2)
    return None


def paths_available() -> tuple[str, ...]:
    """The paths built and runnable here, best first."""
    return tuple(isa for isa in runnable() if load_path(isa) is not None)
