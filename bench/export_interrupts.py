"""SIGINT during `moe-inspector export`: how many of N tries of a large PNG and of a PDF end in a
segmentation fault, or leave a partial or changed file. Each try starts the export in a child
process, sends SIGINT after a random delay within the export's own duration, and looks at the folder.

    PYTHONPATH=$PWD .venv/bin/python bench/export_interrupts.py [--tries 20]
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "traces" / "examples" / "example.h5"
CODE = "import sys; from inspector.cli import main; sys.exit(main(sys.argv[1:]))"
KINDS = {"png 12000x8000": ("big.png", ["--width", "12000", "--height", "8000"]),
         "pdf": ("figure.pdf", [])}


def one(folder: Path, name: str, options: list[str], delay: float) -> str:
    out = folder / name
    out.write_bytes(b"previous")
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.Popen([sys.executable, "-c", CODE, "export", str(EXAMPLE), "-o", str(out), *options],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    proc.wait()
    others = [p.name for p in folder.iterdir() if p.name != name]
    if proc.returncode < 0:
        return f"killed by {signal.Signals(-proc.returncode).name}"
    if others:
        return "partial file left"
    if proc.returncode == 130:
        return "stopped, previous kept" if out.read_bytes() == b"previous" else "stopped, file changed"
    return "finished before the signal" if proc.returncode == 0 else f"exit {proc.returncode}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tries", type=int, default=20)
    args = parser.parse_args()
    rng = random.Random(0)
    for kind, (name, options) in KINDS.items():
        with tempfile.TemporaryDirectory() as folder:
            t0 = time.perf_counter()
            env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
            target = str(Path(folder) / name)
            subprocess.run([sys.executable, "-c", CODE, "export", str(EXAMPLE), "-o", target,
                            *options], capture_output=True, cwd=ROOT, env=env)
            full = time.perf_counter() - t0
            os.remove(Path(folder) / name)
            counts = collections.Counter(one(Path(folder), name, options, rng.uniform(0.3, full))
                                         for _ in range(args.tries))
        print(f"{kind}: {args.tries} tries (an export takes {full:.1f} s): "
              + ", ".join(f"{n} {what}" for what, n in counts.most_common()), flush=True)


if __name__ == "__main__":
    main()
