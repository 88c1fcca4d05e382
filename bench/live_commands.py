"""Commands run as processes on a trace while another process records it: `info`, `info --check` and
`export` (CSV) in turn, each a fresh `python -m inspector.cli`, for as long as it takes to run READS of
them; the recording goes on until they are done. Prints the reads, the failures (exit status not 0,
or a traceback) and the runs each saw.

    PYTHONPATH=$PWD python bench/live_commands.py [READS]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The recording: runs added one after another (a pause between them) until `stop` exists.
WRITER = """
import sys, time
from pathlib import Path
import numpy as np
from traces import TraceWriter
from traces.synthetic import byte_vocab, synthetic_meta, synthetic_routing, synthetic_run_arrays
L, E, K, V, B, T = 2, 8, 2, 259, 3, 40
path, stop, started = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
pause = float(sys.argv[4]) if len(sys.argv) > 4 else 3.0  # a slow model's pace: `info --check` reads
                                                          # every run, so the trace stays small
writer = TraceWriter(path, meta=synthetic_meta(L, E, K, V), vocab=byte_vocab(V), requests=["a", "b", "c"],
                     prompt_tokens=[[1, 2], [3], [4, 5, 6]])
i = 0
while not stop.exists() or i < 2:
    rng = np.random.default_rng(i)
    rids = np.arange(B) % 3
    arrays = synthetic_run_arrays(L, B, T, K, E, V, rng, prompt_len=3, request_ids=rids)
    arrays["tokens"][:, :3] = [7, 8, 9]
    writer.add_run(f"r{i:04d}", attrs={"request_ids": rids, "probe_row": 0, "batch_size": B,
                   "max_new_tokens": T - 3, "label": f"run {i}", "condition": "c", "experiment": "t",
                   "routing": synthetic_routing(), "kernel_mode": "native", "seed": i,
                   "wall_time_s": 0.0}, arrays=arrays)
    i += 1
    if i == 2:
        Path(started).touch()  # the trace holds runs: readers may start
    time.sleep(pause)
writer.close()
print(i)
"""


def commands(path: Path, out: Path) -> list[list[str]]:
    """The command lines read in turn during the recording."""
    cli = [sys.executable, "-m", "inspector.cli"]
    return [[*cli, "info", str(path)], [*cli, "info", "--check", str(path)],
            [*cli, "export", "--view", "routing", "-o", str(out), str(path)]]


def read_during_recording(folder: Path, reads: int) -> dict:
    """Run `reads` commands while a recording goes on in `folder`: what each gave."""
    path, stop, started = folder / "live.h5", folder / "stop", folder / "started"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(stop), str(started)], env=env,
                              stdout=subprocess.PIPE, text=True)
    results = []
    try:
        while not started.exists():
            if writer.poll() is not None:
                raise RuntimeError("the recording failed before it wrote a run")
            time.sleep(0.01)
        lines = commands(path, folder / "out.csv")
        for i in range(reads):
            argv = lines[i % len(lines)]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
            recording = writer.poll() is None
            results.append({"command": " ".join(argv[3:5]), "rc": done.returncode, "recording": recording,
                            "traceback": "Traceback" in done.stderr,
                            "stderr": done.stderr.strip().splitlines()[-1:] if done.stderr.strip() else []})
        stop.touch()
        runs = int(writer.communicate(timeout=120)[0])
    finally:
        stop.touch()
        writer.kill()
    failed = [r for r in results if r["rc"] != 0 or r["traceback"]]
    return {"reads": len(results), "during_recording": sum(r["recording"] for r in results),
            "failures": len(failed), "failed": failed[:5], "runs_recorded": runs}


def main() -> None:
    reads = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    with tempfile.TemporaryDirectory() as folder:
        start = time.monotonic()
        result = read_during_recording(Path(folder), reads)
    result["seconds"] = round(time.monotonic() - start, 1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
