"""Exports are written whole or not at all: an interrupted export (SIGINT, SIGTERM) stops cleanly
with no partial file and no segmentation fault, and an export that cannot finish writing (a full
disk, here a file-size limit) leaves the previous file byte for byte."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from paths import EXAMPLE, ROOT

CODE = "import sys; from inspector.cli import main; sys.exit(main(sys.argv[1:]))"


def _export(out: Path, *options: str, limit_bytes: int | None = None) -> subprocess.Popen:
    def limit():
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG

    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    return subprocess.Popen([sys.executable, "-c", CODE, "export", str(EXAMPLE), "-o", str(out), *options],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
                            preexec_fn=limit)


def _wait_until_drawing(proc: subprocess.Popen, timeout: float = 120.0) -> None:
    """Until the export has loaded Qt (it installs its signal handlers before that): a signal sent
    while the interpreter still starts would only test Python's default action. Where /proc is not
    there to tell, a fixed wait."""
    maps = Path(f"/proc/{proc.pid}/maps")
    if not maps.parent.exists():
        time.sleep(3.0)
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if "libQt6Gui" in maps.read_text():
                return
        except OSError:
            return
        time.sleep(0.05)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("name, options, signum", [
    ("big.png", ("--width", "6000", "--height", "4000"), signal.SIGINT),
    ("figure.pdf", (), signal.SIGINT),
    ("big.png", ("--width", "6000", "--height", "4000"), signal.SIGTERM),
])
def test_an_interrupted_export_leaves_the_previous_file_and_no_part(tmp_path, name, options, signum):
    out = tmp_path / name
    out.write_bytes(b"the previous file")
    for delay in (0.2, 1.5):
        proc = _export(out, *options)
        _wait_until_drawing(proc)
        time.sleep(delay)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=240)
        assert proc.returncode in (0, 128 + signum), (proc.returncode, err[-800:])  # never -SIGSEGV
        assert "Traceback" not in err and not _leftovers(tmp_path)
        if proc.returncode == 0:   # finished before the signal: the new file, whole
            assert out.stat().st_size > 1000
            out.write_bytes(b"the previous file")
        else:
            assert out.read_bytes() == b"the previous file"
            assert err.strip().count("\n") == 0 and "nothing written" in err


@pytest.mark.parametrize("name", ["full.png", "full.csv", "full.svg"])
def test_an_export_onto_a_full_disk_keeps_the_previous_file(tmp_path, name):
    out = tmp_path / name
    previous = b"x" * 100
    out.write_bytes(previous)
    proc = _export(out, "--view", "pair", limit_bytes=2000)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 2, err[-800:]
    assert out.read_bytes() == previous and not _leftovers(tmp_path)
    assert err.strip().count("\n") == 0 and name in err
