"""Seeded corruption of a trace and a reader of the results that cannot hang its caller.

`fuzz(src, n, seed)` writes `n` damaged copies of `src` (4 KiB zeroed at a random offset, the
damage a lost disk block does; short zeroed or random runs; flipped bytes; truncation; and, one copy
in LINK_EVERY, a random object turned into an external link, a dataset kept in external raw storage
or a virtual dataset of another file: a trace made to reach outside itself; and one in HOSTILE_EVERY
made hostile otherwise: its lock file, its nesting, its steering metadata) and reads
each one the way a viewer and `info --check` do, in one worker process. The worker arms a
watchdog per file (`faulthandler.dump_traceback_later(exit=True)`): HDF5 looping inside C cannot be
interrupted by a signal handler, but the watchdog thread ends the process, and the parent reports
that file as a hang. Outcomes: "ok" (read as data), "TraceError", "hang", or "<Exception>: message".
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BLOCK = 4096
KINDS = ("zero-block", "zero-run", "random-run", "flips", "truncate")
#: Ways a copy is made to reach outside itself (`reach_outside`), one copy in LINK_EVERY.
LINK_KINDS = ("external-link", "external-storage", "virtual")
LINK_EVERY = 5
#: Ways a copy is made hostile besides (`make_hostile`), one copy in HOSTILE_EVERY: a sidecar lock file
#: that is a link to another file or a FIFO, groups nested past the walk's depth limit or a group past
#: its member limit, and root metadata that would steer what a reader does (`traces/steering.py`).
HOSTILE_KINDS = ("lock-symlink", "lock-fifo", "deep-nesting", "crowded-group", "engine-experts",
                 "machine-threads")
HOSTILE_EVERY = 10
#: What `engine.experts` says in a copy of kind "engine-experts".
BAD_EXPERTS = (0, -1, 2.5, 3e6, 1e9, 10**30, "8", True, None)


@dataclass(frozen=True)
class Outcome:
    """What reading one damaged copy gave."""

    file: str
    damage: str
    result: str  # "ok", "TraceError", "hang" or "<Exception>: message"
    seconds: float


def corrupt(data: bytes, rng: np.random.Generator) -> tuple[bytes, str]:
    """A damaged copy of `data` and a description of the damage."""
    kind = KINDS[int(rng.integers(len(KINDS)))]
    out = bytearray(data)
    n = len(out)
    if kind == "zero-block":
        at = int(rng.integers(0, max(1, n // 512))) * 512
        out[at:at + BLOCK] = bytes(len(out[at:at + BLOCK]))
        return bytes(out), f"{kind} at {at}"
    if kind in ("zero-run", "random-run"):
        at, size = int(rng.integers(n)), int(rng.integers(1, 257))
        fill = bytes(size) if kind == "zero-run" else rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        out[at:at + size] = fill[:len(out[at:at + size])]
        return bytes(out), f"{kind} of {size} at {at}"
    if kind == "flips":
        where = rng.integers(0, n, size=int(rng.integers(1, 9)))
        for i in where:
            out[int(i)] ^= int(rng.integers(1, 256))
        return bytes(out), f"{kind} at {sorted(int(i) for i in where)}"
    cut = int(rng.integers(1, n))
    return bytes(out[:cut]), f"{kind} to {cut}"


def reach_outside(path: str | os.PathLike, rng: np.random.Generator, outside: str | os.PathLike) -> str:
    """Turn a random object of the trace at `path` into one that reaches `outside` (another trace, an
    HDF5 file with the same paths): an external link to it, or a dataset stored in it as external
    raw storage, or a virtual dataset of it; a description of the change."""
    import h5py  # the fuzzer's parent process edits HDF5 only here

    kind = LINK_KINDS[int(rng.integers(len(LINK_KINDS)))]
    with h5py.File(path, "r+") as f:
        names: list[str] = []
        f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
        where = names[int(rng.integers(len(names)))]
        shape, dtype = f[where].shape, f[where].dtype
        del f[where]
        if kind == "external-link":
            f[where] = h5py.ExternalLink(os.fspath(outside), where)
        elif kind == "external-storage":
            external = [(os.fspath(outside), 0, h5py.h5f.UNLIMITED)]
            f.create_dataset(where, shape=shape, dtype=dtype, external=external)
        else:
            layout = h5py.VirtualLayout(shape=shape, dtype=dtype)
            layout[...] = h5py.VirtualSource(os.fspath(outside), where, shape=shape)
            f.create_virtual_dataset(where, layout)
    return f"{kind} at /{where}"


def make_hostile(path: str | os.PathLike, rng: np.random.Generator, outside: str | os.PathLike) -> str:
    """Make the trace at `path` hostile in one of the HOSTILE_KINDS ways (`outside`: the file a lock
    link names); a description of the change. All but "machine-threads" (a thread count a rerun
    clamps) must be refused."""
    import json as json_text

    import h5py

    from traces.h5walk import MAX_DEPTH, MAX_GROUP_LINKS

    kind = HOSTILE_KINDS[int(rng.integers(len(HOSTILE_KINDS)))]
    lock = f"{os.fspath(path)}.lock"
    if kind == "lock-symlink":
        os.symlink(os.path.abspath(outside), lock)
        return kind
    if kind == "lock-fifo":
        os.mkfifo(lock)
        return kind
    with h5py.File(path, "r+") as f:
        if kind == "deep-nesting":
            depth = int(rng.integers(MAX_DEPTH + 1, 4 * MAX_DEPTH))
            group = f.require_group(["tables", "requests", "deep"][int(rng.integers(3))])
            for _ in range(depth):
                group = group.create_group("g")
            return f"{kind} of {depth} under {group.name.split('/')[1]}"
        if kind == "crowded-group":
            group = f.create_group("crowd")
            first = group.create_dataset("0", data=[0])
            for i in range(1, MAX_GROUP_LINKS + 1):
                group[str(i)] = first
            return kind
        if kind == "engine-experts":
            experts = BAD_EXPERTS[int(rng.integers(len(BAD_EXPERTS)))]
            if experts is None:
                f.attrs["engine"] = "not a JSON object"
            else:
                f.attrs["engine"] = json_text.dumps({"name": "an engine", "version": "1", "experts": experts})
            return f"{kind} {experts!r}"
        f.attrs["machine"] = json_text.dumps({"threads": int(rng.choice([0, -3, 100000, 2**40]))})
        return kind


def read_everything(path: str | os.PathLike) -> None:
    """Everything a viewer and `info --check` do with a file: open, list, read every run and table,
    summarise, validate with data."""
    from traces import open_trace, validate
    from traces.summary import describe

    with open_trace(path) as trace:
        len(trace.vocab), trace.requests.text
        for r in range(len(trace.requests)):
            trace.requests.prompt_tokens(r)
        for name in trace.run_names + trace.incomplete_runs:
            run = trace.run(name)
            for array in run.arrays.values():
                array[...]
        for name in trace.table_names:
            trace.read_table(name)
        describe(trace)
    validate(path, read_data=True)


#: Damaged files read by one worker process before a fresh one takes over.
WORKER_FILES = 25


def fuzz(src: str | os.PathLike, n: int, seed: int, workdir: str | os.PathLike,
         limit_s: float = 20.0) -> tuple[list[Outcome], int]:
    """Outcomes of reading `n` damaged copies of `src`, and the worker's peak resident KiB."""
    data = Path(src).read_bytes()
    rng = np.random.default_rng(seed)
    jobs = []
    outside = Path(workdir) / "outside.h5"
    outside.write_bytes(data)
    for i in range(n):
        path = Path(workdir) / f"fuzz{i:04d}.h5"
        if i % LINK_EVERY == LINK_EVERY - 1:
            path.write_bytes(data)
            damage = reach_outside(path, rng, outside)
        elif i % HOSTILE_EVERY == 2:
            path.write_bytes(data)
            damage = make_hostile(path, rng, outside)
        else:
            damaged, damage = corrupt(data, rng)
            path.write_bytes(damaged)
        jobs.append({"file": str(path), "damage": damage})
    outcomes: list[Outcome] = []
    peak = 0
    while len(outcomes) < len(jobs):  # a hang ends the worker: restart it after that file
        # At most WORKER_FILES per worker: HDF5 keeps some memory of every damaged file it refused, so
        # one long-lived worker's peak would grow with the number of files, not with any one of them.
        rest = jobs[len(outcomes):len(outcomes) + WORKER_FILES]
        proc = subprocess.run([sys.executable, "-m", "traces.fuzz", str(limit_s)], input=json.dumps(rest),
                              capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        for line in lines:
            if "peak_kib" in line:
                peak = max(peak, line["peak_kib"])
            else:
                outcomes.append(Outcome(**line))
        if len(outcomes) < len(jobs) and proc.returncode != 0:
            job = jobs[len(outcomes)]
            why = "hang" if "Timeout" in proc.stderr else f"worker died (rc {proc.returncode})"
            outcomes.append(Outcome(job["file"], job["damage"], why, limit_s))
    return outcomes, peak


def _worker(limit_s: float) -> None:
    import faulthandler
    import time

    from traces import TraceError

    for job in json.loads(sys.stdin.read()):
        faulthandler.dump_traceback_later(limit_s, exit=True)
        start = time.perf_counter()
        try:
            read_everything(job["file"])
            result = "ok"
        except TraceError:
            result = "TraceError"
        except Exception as exc:  # the finding this tool exists for
            result = f"{type(exc).__name__}: {exc}"[:300]
        faulthandler.cancel_dump_traceback_later()
        sys.stdout.write(json.dumps({**job, "result": result, "seconds": time.perf_counter() - start}) + "\n")
        sys.stdout.flush()
    sys.stdout.write(json.dumps({"peak_kib": _peak_kib()}) + "\n")


def _peak_kib() -> int:
    """This process's peak resident KiB since it started its program. Linux's VmHWM belongs to the
    address space exec made; `ru_maxrss` would also count the parent's size at the fork (a test
    runner's gigabyte), since Linux keeps that high-water mark across exec."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


if __name__ == "__main__":
    _worker(float(sys.argv[1]))
