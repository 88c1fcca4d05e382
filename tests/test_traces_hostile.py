"""A trace from someone else is safe to open: every hostile trace of tests/hostile.py is refused in one
sentence with exit status 2 by `info`, `info --check`, `export` of every view, the writer's append,
`explain` and the app's open; nothing another file holds is read, no other file is written, and no
command waits on a FIFO (each command runs in a child process with a time limit)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import SECRET, hostile_traces
from paths import EXAMPLE, ROOT

from inspector.specs.registry import SPECS
from traces import TraceError, TraceWriter, open_trace, validate

#: Seconds a refusal may take (a wait on a FIFO would last for ever).
LIMIT_S = 60
#: Hostile traces refused as the file opens (its lock file, its groups, its root metadata).
REFUSED_AT_OPEN = frozenset({"lock-symlink", "lock-fifo", "deep-nesting", "many-members", "engine-experts"})


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> dict[str, Path]:
    return hostile_traces(tmp_path_factory.mktemp("hostile"))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cli(*args: str) -> subprocess.CompletedProcess:
    """Every command of one trace in one child process: `args` lists the command lines, `;`-separated."""
    code = ("import sys, contextlib, io\nfrom inspector.cli import main\n"
            "for argv in sys.argv[1].split(';'):\n"
            "    print('>>>', argv, flush=True)\n"
            "    print('rc', main(argv.split('|')), flush=True)\n")
    return subprocess.run([sys.executable, "-c", code, ";".join(args)], capture_output=True, text=True,
                          timeout=LIMIT_S, cwd=ROOT)


def test_every_hostile_trace_is_refused_by_every_command(folder, tmp_path):
    """info, info --check and export of every view: exit 2 and one sentence naming what is refused."""
    other = folder["vocab-external-link"].parent / "other.h5"
    secret = other.parent / "secret.txt"
    before = _digest(other), _digest(secret)
    views = sorted(SPECS)
    for name, path in folder.items():
        # info summarises a run without reading its rows: a run's prompt is checked by --check and views
        commands = [f"info|--check|{path}"] + ([f"info|{path}"] if name != "prompt-mismatch" else [])
        # refused when the file opens, before any view reads it: one view stands for all
        some = views[:1] if name in REFUSED_AT_OPEN else views
        commands += [f"export|--view|{v}|-o|{tmp_path / f'{name}-{v}.csv'}|{path}" for v in some]
        done = _cli(*commands)
        out = done.stdout + done.stderr
        assert SECRET not in out, name
        blocks = done.stdout.split(">>> ")[1:]
        assert len(blocks) == len(commands), (name, done.stderr[-500:])
        for argv, block in zip(commands, blocks, strict=True):
            status = int(block.rstrip().rsplit("rc ", 1)[1])
            assert status == 2, (name, argv, block[-300:])
        errors = [line for line in done.stderr.splitlines() if line.strip()]
        assert all(line.startswith("moe-inspector ") and ": error: " in line for line in errors), errors[:3]
        assert "Traceback" not in done.stderr, (name, done.stderr[-800:])
        assert not list(tmp_path.glob(f"{name}-*")), name  # no export written
    assert (_digest(other), _digest(secret)) == before
    assert Path(f"{folder['lock-symlink']}.lock").is_symlink()  # a lock file not ours is left as found


def test_the_validator_lists_each_one_as_an_error(folder):
    for name, path in folder.items():
        problems = validate(path, read_data=True)
        errors = [p for p in problems if p.severity == "error"]
        assert errors, name
        assert not any(SECRET in p.message for p in problems), name


@pytest.mark.parametrize("name", ["tables-external-link", "vocab-external-link", "offsets-virtual",
                                  "links-in-links", "fifo", "lock-symlink", "lock-fifo", "deep-nesting"])
def test_the_writer_never_writes_through_them(folder, name):
    """The writer's append refuses what reaches outside the file where it writes (the root, the
    tables, the run list); it never writes into an existing run."""
    other, secret = folder[name].parent / "other.h5", folder[name].parent / "secret.txt"
    before = _digest(other), _digest(secret)
    with pytest.raises(TraceError), TraceWriter.append(folder[name]) as writer:
        writer.write_table("x", {"a": [1]}, {})
    assert (_digest(other), _digest(secret)) == before


def test_soft_links_inside_the_file_keep_working(folder, tmp_path):
    import shutil

    import h5py

    path = tmp_path / "soft.h5"
    shutil.copy(folder["vocab-external-link"].parent / "base.h5", path)
    with h5py.File(path, "r+") as f:
        f.move("vocab", "vocab_stored")
        f["vocab"] = h5py.SoftLink("/vocab_stored")
    with open_trace(path) as trace:
        assert len(trace.vocab) == 64
        trace.check_contained()


def test_explain_never_writes_into_the_file_a_link_names(tmp_path):
    """`explain` of the shipped example whose /tables is an external link to another file: refused
    before the model loads, the other file untouched."""
    import h5py

    example = EXAMPLE
    trace, other = tmp_path / "example.h5", tmp_path / "other.h5"
    trace.write_bytes(example.read_bytes())
    other.write_bytes(example.read_bytes())
    with h5py.File(trace, "r+") as f:
        del f["tables"]
        f["tables"] = h5py.ExternalLink(str(other), "/tables")
    before = _digest(other)
    done = _cli(f"explain|--limit|1|{trace}")
    assert done.stdout.rstrip().endswith("rc 2"), done.stdout[-500:] + done.stderr[-500:]
    assert done.stderr.strip().count("\n") == 0 and "external link" in done.stderr
    assert _digest(other) == before


@pytest.mark.parametrize("name", ["vocab-external-link", "offsets-virtual", "fifo",
                                  "tokens-external-storage"])
def test_the_app_shows_the_sentence(qtbot, make_window, monkeypatch, folder, name):
    from inspector.qt import QtWidgets

    shown = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "critical",
                        staticmethod(lambda parent, title, text, *a, **k: shown.append(text)
                                     or QtWidgets.QMessageBox.StandardButton.Ok))
    window = make_window()
    with qtbot.waitSignal(window.open_finished, timeout=20000):
        window.open_path(str(folder[name]))
    if name == "tokens-external-storage":  # the trace opens; its run is greyed out, the sentence its reason
        model = window.browser.model
        qtbot.waitUntil(lambda: "r000" in model.unusable, timeout=20000)
        assert "external raw storage" in model.unusable["r000"] and SECRET not in model.unusable["r000"]
        assert not shown and window.state.run.name == "r001"
        return
    assert len(shown) == 1 and "Traceback" not in shown[0] and SECRET not in shown[0]
    assert ("external" in shown[0] or "virtual" in shown[0] or "FIFO" in shown[0]), shown[0]


@pytest.mark.parametrize("name, words", [("lock-fifo", "FIFO"), ("lock-symlink", "symbolic link"),
                                         ("deep-nesting", "nested at most"), ("many-members", "members"),
                                         ("engine-experts", "engine.experts")])
def test_the_app_shows_the_sentence_of_the_new_cases(qtbot, make_window, monkeypatch, folder, name, words):
    from inspector.qt import QtWidgets

    shown = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "critical",
                        staticmethod(lambda parent, title, text, *a, **k: shown.append(text)
                                     or QtWidgets.QMessageBox.StandardButton.Ok))
    window = make_window()
    with qtbot.waitSignal(window.open_finished, timeout=20000):
        window.open_path(str(folder[name]))
    assert len(shown) == 1 and words in shown[0] and "Traceback" not in shown[0], shown


def _example_copy(tmp_path: Path, **meta) -> Path:
    """The shipped example in `tmp_path` with the root metadata `meta` set."""
    from hostile import set_meta

    trace = tmp_path / "example.h5"
    trace.write_bytes(EXAMPLE.read_bytes())
    for name, value in meta.items():
        set_meta(trace, name, value)
    return trace


def _one_line_refusal(done: subprocess.CompletedProcess) -> str:
    assert done.stdout.rstrip().endswith("rc 2"), done.stdout[-500:] + done.stderr[-800:]
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr, done.stderr[-800:]
    return done.stderr


def test_explain_never_writes_into_the_file_a_lock_link_names(tmp_path):
    """The sidecar lock a symbolic link to another file: refused, that file and the link untouched."""
    trace = _example_copy(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text(SECRET)
    Path(f"{trace}.lock").symlink_to(victim)
    assert "symbolic link" in _one_line_refusal(_cli(f"explain|--limit|1|{trace}"))
    assert victim.read_text() == SECRET and Path(f"{trace}.lock").is_symlink()


def test_explain_refuses_a_named_checkpoint_it_cannot_use_instead_of_the_shipped_one(tmp_path):
    trace = _example_copy(tmp_path, checkpoint="model.pt")
    (tmp_path / "model.pt").write_bytes(b"not a checkpoint this tool loads")
    assert "model.pt" in _one_line_refusal(_cli(f"explain|--limit|1|{trace}"))


def test_the_checkpoint_folder_rule_holds_whatever_the_engine_attribute_says(tmp_path):
    """A trace naming a model folder outside its own folder and assets/ is refused by explain, engine
    attribute or not; the same folder named with --checkpoint is the user's choice."""
    outside = tmp_path / "elsewhere" / "model"
    outside.mkdir(parents=True)
    (outside / "config.json").write_text("{}")
    folder = tmp_path / "traces"
    folder.mkdir()
    trace = _example_copy(folder, checkpoint=str(outside), engine={"name": "an engine", "version": "1"})
    assert "outside its own folder" in _one_line_refusal(_cli(f"explain|--limit|1|{trace}"))


def test_the_recorded_thread_count_is_clamped_to_this_machines_cpus(tmp_path):
    from inspector.commands.explain import _recorded_threads

    trace = _example_copy(tmp_path, machine={"threads": 100000})
    assert 1 <= _recorded_threads(str(trace)) <= len(os.sched_getaffinity(0))


#: A shared library that leaves a file where PLUGIN_MARKER says when it is loaded (and looks like an
#: HDF5 filter plugin from outside).
PLUGIN = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void loaded(void) {
    const char *marker = getenv("PLUGIN_MARKER");
    FILE *f = marker ? fopen(marker, "w") : NULL;
    if (f) { fputs("loaded", f); fclose(f); }
}
int H5PLget_plugin_type(void) { return 0; }
const void *H5PLget_plugin_info(void) { return 0; }
"""


def test_a_filter_hdf5_lacks_never_loads_a_library_from_a_plugin_folder(tmp_path):
    """A run compressed by a filter HDF5 does not build in, read with a plugin folder holding a
    library: `info --check` reports the run unreadable and the library is never loaded."""
    import shutil

    from hostile import unknown_filter

    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the library")
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (tmp_path / "plugin.c").write_text(PLUGIN)
    library = plugins / "libfilter.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(tmp_path / "plugin.c")], check=True,
                   timeout=120)
    trace, marker = unknown_filter(tmp_path), tmp_path / "loaded"
    env = {**os.environ, "HDF5_PLUGIN_PATH": str(plugins), "PLUGIN_MARKER": str(marker)}
    done = subprocess.run([sys.executable, "-m", "inspector.cli", "info", "--check", str(trace)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=LIMIT_S)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-800:]
    assert "/runs/r000" in done.stdout and "plugin" in done.stdout
    assert not marker.exists()
