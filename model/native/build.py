"""Build the compiled MoE kernels: one library per instruction-set path (`python -m model.native`).

    python -m model.native [--isa avx512|avx2|generic ...] [--verbose]

Without `--isa` it builds every path this CPU runs (the model runs the best one; the tests compare
them all). Each build goes to <build dir>/<name>/ (`model.native.build_dir`); a path already built for
these sources, flags, torch and Python is kept.
"""

from __future__ import annotations

import argparse
import sys
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


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m model.native", description=__doc__.splitlines()[0])
    parser.add_argument("--isa", nargs="+", choices=list(native.ISA_FLAGS),
                        help="the paths to build (default: every path this CPU runs)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    wanted = args.isa or list(native.runnable())
    failed = 0
    for isa in wanted:
        try:
            path = build(isa, args.verbose)
        except Exception as exc:  # noqa: BLE001 - any build failure: said in one line, the others go on
            reason = " ".join(str(exc).split())[-300:]
            print(f"compiled MoE kernels ({isa}) not built: {type(exc).__name__}: {reason}", file=sys.stderr)
            failed += 1
            continue
        print(f"compiled MoE kernels ({isa}): {path}")
    if failed == len(wanted):
        print("the model runs its pure-PyTorch path (kernel version 2)", file=sys.stderr)
    return 1 if failed else 0
