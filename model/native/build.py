"""Build the compiled MoE kernels: one library per instruction-set path (`python -m model.native`).

    python -m model.native [--isa avx512|avx2|generic ...] [--verbose]

Without `--isa` it builds every path this CPU runs (the model runs the best one; the tests compare
them all), one compiler process per path at a time, up to the number of CPUs, and prints the time the
build took. Each build goes to <build dir>/<name>/ (`model.native.build_dir`); a path already built for
these sources, flags, torch and Python is kept.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from model import native


def build(isa: str, verbose: bool = False) -> Path:
    """Compile path `isa` and return its library's path (kept where already built)."""
    from torch.utils import cpp_extension

    name = native.module_name(isa)
    built = native.library(name)
    if built is not None:
        return built
    where = native.build_dir() / name
    where.mkdir(parents=True, exist_ok=True)
    cpp_extension.load(name=name, sources=[str(native.HERE / native.SOURCES[0])],
                       extra_cflags=[*native.CFLAGS, *native.ISA_FLAGS[isa]], extra_ldflags=["-fopenmp"],
                       extra_include_paths=[str(native.HERE)], build_directory=str(where), verbose=verbose)
    path = native.library(name)
    if path is None:
        raise RuntimeError(f"the build left no library in {where}")
    return path


def _build_one(isa: str, verbose: bool) -> tuple[str, str | None, str | None]:
    """(isa, the library's path, None) or (isa, None, one line saying why it was not built)."""
    try:
        return isa, str(build(isa, verbose)), None
    except Exception as exc:  # noqa: BLE001 - any build failure: said in one line, the others go on
        return isa, None, f"{type(exc).__name__}: {' '.join(str(exc).split())[-300:]}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m model.native", description=__doc__.splitlines()[0])
    parser.add_argument("--isa", nargs="+", choices=list(native.ISA_FLAGS),
                        help="the paths to build (default: every path this CPU runs)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    wanted = args.isa or list(native.runnable())
    todo = [isa for isa in wanted if native.library(native.module_name(isa)) is None]
    start = time.perf_counter()
    results: dict[str, tuple[str, str | None, str | None]] = {
        isa: (isa, str(native.library(native.module_name(isa))), None) for isa in wanted if isa not in todo}
    if len(todo) > 1:
        # a fresh process per compiler: each imports torch itself (no fork of a process with threads)
        workers = min(len(todo), os.cpu_count() or 1)
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            for isa, path, why in pool.map(_build_one, todo, [args.verbose] * len(todo)):
                results[isa] = (isa, path, why)
    else:
        results.update({isa: _build_one(isa, args.verbose) for isa in todo})
    failed = 0
    for isa in wanted:
        _, path, why = results[isa]
        if path is None:
            print(f"compiled MoE kernels ({isa}) not built: {why}", file=sys.stderr)
            failed += 1
        else:
            print(f"compiled MoE kernels ({isa}): {path}")
    kept = f"; {len(wanted) - len(todo)} built already" if len(todo) < len(wanted) else ""
    print(f"compiled {len(todo)} path(s) in {time.perf_counter() - start:.0f} s, "
          f"{max(1, min(len(todo), os.cpu_count() or 1))} at a time{kept}")
    if failed == len(wanted):
        print("the model runs its pure-PyTorch path (kernel version 2)", file=sys.stderr)
    return 1 if failed else 0
