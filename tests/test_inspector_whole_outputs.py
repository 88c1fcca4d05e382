"""Exports are written whole or not at all: an interrupted export (SIGINT, SIGTERM) stops cleanly
with no partial file and no segmentation fault, and an export that cannot finish writing (a full
disk, here a file-size limit) leaves the previous file byte for byte."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from paths import EXAMPLE, ROOT

CODE = "import sys; from inspector.cli import main; sys.exit(main())"  # as the program: its signals


def _export(out: Path, *options: str, limit_bytes: int | None = None) -> subprocess.Popen:
    def limit():
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG

    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-c", CODE, "export", str(EXAMPLE), "-o", str(out), *options],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
                            preexec_fn=limit)


def _wait_for_line(proc: subprocess.Popen, start: str) -> None:
    """Until the export prints a line starting with `start` (it says which run it picked once the
    trace is read, before it draws, and what it wrote once the file is in place), or ends."""
    for line in proc.stdout:
        if line.startswith(start):
            return


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("name, options, signum", [
    ("big.png", ("--width", "6000", "--height", "4000"), signal.SIGINT),
    ("figure.pdf", (), signal.SIGINT),
    ("big.png", ("--width", "6000", "--height", "4000"), signal.SIGTERM),
])
def test_an_interrupted_export_leaves_the_previous_file_and_no_part(tmp_path, name, options, signum):
    """A signal while the export draws: the previous file and exit 130/143 (or, had it finished first,
    the new file and 0). A signal once it has said what it wrote: the new file and exit 0, whatever
    Qt's teardown is doing then."""
    out = tmp_path / name
    for moment in ("picked", "wrote"):
        out.write_bytes(b"the previous file")
        proc = _export(out, *options)
        _wait_for_line(proc, moment)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=240)
        assert proc.returncode in (0, 128 + signum), (proc.returncode, err[-800:])  # never -SIGSEGV
        assert "Traceback" not in err and not _leftovers(tmp_path)
        if moment == "wrote":
            assert proc.returncode == 0, err[-800:]
        if proc.returncode == 0:   # finished before the signal: the new file, whole
            assert out.stat().st_size > 1000
        else:
            assert out.read_bytes() == b"the previous file"
            assert err.strip().count("\n") == 0 and "nothing written" in err


def test_an_export_keeps_the_mode_of_the_file_it_replaces_and_names_its_other_links(tmp_path):
    out, other = tmp_path / "table.csv", tmp_path / "other-name.csv"
    out.write_bytes(b"the previous file")
    out.chmod(0o600)
    os.link(out, other)
    proc = _export(out, "--view", "pair")
    stdout, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-800:]
    assert out.stat().st_mode & 0o777 == 0o600 and out.stat().st_nlink == 1
    assert other.read_bytes() == b"the previous file" and "1 other name" in stdout


def test_links_planted_under_temporary_names_are_never_written_through(tmp_path):
    """Links under every name of the form the temporaries once had (`.table.<pid>.part.csv`, the next
    process ids): the export writes its own file, the files the links name are untouched."""
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"another file")
    out = tmp_path / "table.csv"
    for pid in range(os.getpid(), os.getpid() + 2000):
        (tmp_path / f".table.{pid}.part.csv").symlink_to(victim)
    proc = _export(out, "--view", "pair")
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-800:]
    assert victim.read_bytes() == b"another file"
    assert out.is_file() and not out.is_symlink() and out.stat().st_size > 100


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
