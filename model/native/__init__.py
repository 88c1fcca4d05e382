"""The compiled MoE kernels of kernel version 3 (`moe_step.cpp`): built once by the set-up, loaded if
present, never built at run time.

`load()` returns the extension module built from this very source for this torch and Python, or None
(not built, built from another source, no compiler at set-up): the model then runs its pure-PyTorch
path, kernel version 2, and says so in every trace's machine fingerprint. `python -m model.native`
builds it into build/native/ (the set-up runs it); the app never needs it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import logging
import platform
import sys
from pathlib import Path
from types import ModuleType

import torch

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("moe_step.cpp")
BUILD_DIR = Path(__file__).resolve().parents[2] / "build" / "native"
#: Compiler flags: this machine's vector instructions (the build runs on the machine that uses it).
CFLAGS = ("-O3", "-march=native", "-std=c++17")


def module_name() -> str:
    """The extension's name: a digest of its source, flags, torch and Python, so a stale build is
    never loaded."""
    digest = hashlib.sha256(SOURCE.read_bytes())
    digest.update(" ".join(CFLAGS).encode())
    digest.update(f"{torch.__version__} {platform.python_version()} {platform.machine()}".encode())
    return f"moe_step_{digest.hexdigest()[:16]}"


def _library(name: str) -> Path | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = BUILD_DIR / name / f"{name}{suffix}"
        if path.is_file():
            return path
    path = BUILD_DIR / name / f"{name}.so"
    return path if path.is_file() else None


@functools.cache
def load() -> ModuleType | None:
    """The built extension, or None when it is not built for this source, torch and Python."""
    name = module_name()
    path = _library(name)
    if path is None:
        log.info("compiled MoE kernels not built (%s); the pure-PyTorch path runs", name)
        return None
    spec = importlib.util.spec_from_file_location(name, path)
    try:
        if spec is None or spec.loader is None:
            raise ImportError("not a loadable extension")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError as exc:
        log.warning("compiled MoE kernels at %s do not load (%s); the pure-PyTorch path runs", path, exc)
        return None
    return module


def build(verbose: bool = False) -> Path:
    """Compile the extension into build/native/<name>/ and return the library's path."""
    from torch.utils import cpp_extension

    name = module_name()
    where = BUILD_DIR / name
    where.mkdir(parents=True, exist_ok=True)
    cpp_extension.load(name=name, sources=[str(SOURCE)], extra_cflags=list(CFLAGS),
                       build_directory=str(where), verbose=verbose)
    path = _library(name)
    if path is None:
        raise RuntimeError(f"the build left no library in {where}")
    return path


def main(argv: list[str]) -> int:
    verbose = "--verbose" in argv
    try:
        path = build(verbose)
    except Exception as exc:  # noqa: BLE001 - any build failure: the pure-PyTorch path stays
        print(f"compiled MoE kernels not built ({type(exc).__name__}: {str(exc).strip()[:400]}); "
              "the model runs its pure-PyTorch path (kernel version 2)", file=sys.stderr)
        return 1
    print(f"compiled MoE kernels: {path}")
    return 0

