"""The synthetic traces of many runs that the run browser and runs export benchmarks open: generated
once under /tmp (the 10,000-run one takes a few minutes) and reused, with the run summary table the
writer gives them or, as a trace written before the table, a copy without it."""

from __future__ import annotations

import os
import shutil
import time

import h5py

from traces.schema import RUN_SUMMARY_TABLE, RUN_SUMMARY_VERSION, TABLES
from traces.synthetic import write_synthetic_trace

#: Run shapes: a small recording of the shipped model (V = 259 bytes) per run.
SHAPE = {"L": 4, "E": 8, "K": 2, "V": 259, "B": 3, "T": 48, "R": 16}


def trace_of(n_runs: int, table: bool = True) -> str:
    """The synthetic trace of `n_runs` runs (with its run summary table, or a copy without it: a trace
    as written before the table), generated once."""
    path = f"/tmp/moe_inspector_browser_bench_{n_runs}_summaries{RUN_SUMMARY_VERSION}.h5"
    if not os.path.exists(path):
        print(f"generating {path} ...", flush=True)
        t0 = time.perf_counter()
        write_synthetic_trace(path + ".part", n_runs, seed=3, **SHAPE)
        os.replace(path + ".part", path)
        print(f"  {os.path.getsize(path) / 1e6:.0f} MB in {time.perf_counter() - t0:.0f} s", flush=True)
    if table:
        return path
    old = path.replace(".h5", "_without_table.h5")
    if not os.path.exists(old):
        shutil.copyfile(path, old + ".part")
        with h5py.File(old + ".part", "r+") as f:
            del f[f"{TABLES}/{RUN_SUMMARY_TABLE}"]
        os.replace(old + ".part", old)
    return old
