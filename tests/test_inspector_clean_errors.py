"""Bad values the command line used to answer with a traceback (or a wrong message) are one line
and exit status 2; SIGTERM stops `record` like Ctrl-C, saying what was kept."""

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from paths import ROOT

from inspector.cli import main
from lab.experiments import cli as record_cli
from model.checkpoint import save_checkpoint
from model.config import ModelConfig
from model.transformer import MoETransformer
from traces import open_trace


@pytest.mark.parametrize("options, message", [
    (["--dpi", "nan"], "--dpi must be"),
    (["--dpi", "inf"], "--dpi must be"),
    (["--height", "-1"], "--height must be"),
    (["--width", "0"], "--width must be"),
    (["--levels", "-inf:inf"], "--levels needs finite LO < HI"),
    (["--levels", "nan:1"], "--levels needs finite LO < HI"),
])
def test_bad_export_values_are_one_line(small_trace_path, tmp_path, capsys, options, message):
    assert main(["export", str(small_trace_path), *options, "-o", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("moe-inspector export: error: ") and message in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "x.png").exists()


def test_negative_levels_are_read_as_a_value(small_trace_path, tmp_path):
    assert main(["export", str(small_trace_path), "--levels", "-0.5:0.5", "-o", str(tmp_path / "x.csv")]) == 0


def test_sigterm_stops_record_keeping_complete_runs(tmp_path, capsys):
    torch.manual_seed(0)
    model = MoETransformer(ModelConfig(d_model=32, n_layers=2, n_heads=2, n_experts=4, expert_d_ff=32,
                                       context=128))
    save_checkpoint(model, tmp_path / "tiny", {"kind": "test"})
    out = tmp_path / "e1.h5"
    parser = argparse.ArgumentParser()
    record_cli.add_arguments(parser)
    args = parser.parse_args(["--checkpoint", str(tmp_path / "tiny"), "-n", "3", "--new-tokens", "6",
                              "--repeats", "1", "--capacity-factors", "1.0",
                              "--kernel-mode", "batch_invariant", "-o", str(out)])

    def terminate_after_two(done: int, total: int, label: str) -> None:
        if done == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    assert record_cli.run(args, progress=terminate_after_two) == 143
    assert "record: terminated: 2 complete runs kept in" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is before
    with open_trace(out) as trace:
        assert len(trace.run_names) == 2


def test_view_without_a_display_is_one_line_and_exit_2(small_trace_path, monkeypatch, capsys):
    for name in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    assert main(["view", str(small_trace_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("moe-inspector view: error: no display") and err.count("\n") == 1


@pytest.mark.parametrize("env, says", [({"DISPLAY": ":99"}, "no X server answers at DISPLAY=:99"),
                                       ({"QT_QPA_PLATFORM": "xcb"}, "neither DISPLAY nor WAYLAND_DISPLAY"),
                                       ({"QT_QPA_PLATFORM": "xcb", "DISPLAY": ":98"}, "DISPLAY=:98"),
                                       ({"WAYLAND_DISPLAY": "wl-nowhere"}, "has no socket")])
def test_view_with_a_display_nobody_answers_is_one_line_and_exit_2(small_trace_path, monkeypatch, capsys, env,
                                                                    says):
    """Qt would abort the process (SIGABRT) on an unreachable X server: the display is probed first."""
    for name in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(small_trace_path.parent))
    monkeypatch.setattr("sys.platform", "linux")
    if env.get("DISPLAY") and os.path.exists(f"/tmp/.X11-unix/X{env['DISPLAY'][1:]}"):
        pytest.skip(f"an X server may run at {env['DISPLAY']} on this machine")
    assert main(["view", str(small_trace_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("moe-inspector view: error: no ") and says in err and err.count("\n") == 1


def test_version_is_the_distributions(capsys):
    from importlib import metadata

    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out.strip() == f"moe-inspector {metadata.version('moe-inspector')}"


@pytest.mark.parametrize("argv", [["infoo", "t.h5"], ["expot"], ["nonsense"]])
def test_unknown_command_is_an_error_not_a_file(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "unknown command" in err and "Traceback" not in err


def test_a_file_without_a_command_is_still_opened(small_trace_path, monkeypatch, tmp_path):
    opened = []
    monkeypatch.setattr("inspector.commands.view.run", lambda args: opened.append(args.files) or 0)
    plain = tmp_path / "trace-without-suffix"
    plain.write_bytes(small_trace_path.read_bytes())
    for argv in ([str(small_trace_path)], [str(plain)], ["not-there-yet.h5"]):
        assert main(argv) == 0
    assert opened == [[str(small_trace_path)], [str(plain)], ["not-there-yet.h5"]]


@pytest.mark.parametrize("reply", [None, b"HTTP/1.1 400 Bad Request\r\n\r\n"])
def test_view_with_something_else_at_the_display_is_one_line_and_exit_2(small_trace_path, monkeypatch, capsys,
                                                                         reply):
    """A socket that accepts but is no X server (silent, or speaking another protocol): Qt would abort;
    the probe's X handshake finds out first (within its timeout)."""
    import socket
    import threading

    listener = socket.socket()
    for number in range(60, 100):  # a free display number's port, 6000 + N
        try:
            listener.bind(("127.0.0.1", 6000 + number))
            break
        except OSError:
            continue
    else:
        pytest.skip("no free port for a display")
    listener.listen(4)
    held = []

    def serve():
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                held.append(conn)
                if reply is not None:
                    conn.recv(12)
                    conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    for name in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DISPLAY", f"127.0.0.1:{number}")
    monkeypatch.setattr("sys.platform", "linux")
    try:
        assert main(["view", str(small_trace_path)]) == 2
    finally:
        listener.close()
        for conn in held:
            conn.close()
    err = capsys.readouterr().err
    assert f"no X server answers at DISPLAY=127.0.0.1:{number}" in err and err.count("\n") == 1


def test_the_display_probe_recognises_an_x_server():
    import shutil

    from inspector.commands.view import _x11_reachable

    if shutil.which("Xvfb") is None:
        pytest.skip("no Xvfb")
    number = next((n for n in range(140, 180) if not os.path.exists(f"/tmp/.X11-unix/X{n}")), None)
    server = subprocess.Popen(["Xvfb", f":{number}", "-screen", "0", "640x480x24"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(f"/tmp/.X11-unix/X{number}") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _x11_reachable(f":{number}")
    finally:
        server.terminate()
        server.wait(timeout=30)


def _child(code: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_command_line_starts_is_one_line(small_trace_path, signum):
    """The command line's module notes the signals on its first line: one arriving during the imports
    that follow ends the process with one line and 128 + the signal's number."""
    code = (f"import os, signal, sys\nsys.argv[0] = 'moe-inspector'\nimport inspector.cli\n"
            f"os.kill(os.getpid(), {int(signum)})\nimport torch\n")
    done = _child(code, "info", str(small_trace_path))
    assert done.returncode == 128 + signum, done.stderr[-800:]
    assert done.stderr == "moe-inspector: interrupted\n"


@pytest.mark.parametrize("signum, says", [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated")])
def test_a_signal_while_a_command_runs_is_one_line(small_trace_path, signum, says):
    code = ("import os, signal, sys\nfrom inspector import cli\nimport inspector.commands.info as info\n"
            "run = info.run\n"
            f"info.run = lambda args: (os.kill(os.getpid(), {int(signum)}), run(args))[1]\n"
            "sys.exit(cli.main())\n")
    done = _child(code, "info", str(small_trace_path))
    assert done.returncode == 128 + signum, done.stderr[-800:]
    assert done.stderr == f"moe-inspector info: {says}\n" and done.stdout == ""
