"""Fixtures shared by the test files: a small model, synthetic traces and main windows; and the markers
each test gets from its file (`pytest -m "not slow"` runs the quick part of the suite).

Qt and torch are imported inside the fixtures, so a test file that uses neither loads neither. The
repository's paths are in `tests/paths.py`.
"""

import os

import pytest

# Qt aborts the whole process without a platform; tests draw offscreen.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

#: Markers by file: a file whose name starts with a key gets the markers of its value.
FILE_MARKERS = {
    "test_model_hf_": ("hf",),  # Hugging Face models through the bridge (needs transformers)
    "test_model_vllm": ("vllm",),  # the vLLM engines, their outputs and recordings
}
#: Files whose tests take seconds each: reruns of `explain`, recordings, Hugging Face models, checkpoint
#: loads, subprocesses that fill a disk or read a trace while it is written, fuzzing, a thousand runs.
SLOW_FILES = frozenset({
    "test_inspector_live.py", "test_inspector_many_runs.py",
    "test_lab_experiments.py", "test_lab_explain.py", "test_lab_no_code_from_traces.py", "test_lab_search.py",
    "test_model_checkpoint.py", "test_model_hf_example.py", "test_model_hf_parity.py",
    "test_model_hf_record.py", "test_model_kernel_version.py", "test_model_quality.py",
    "test_model_record_safety.py", "test_model_vllm.py",
    "test_traces_diskfull.py", "test_traces_fuzz.py", "test_traces_live_reading.py",
})
#: A test that uses one of these fixtures draws Qt widgets: `gui`.
GUI_FIXTURES = frozenset({"qtbot", "qapp"})
#: Rough seconds of the longest files on one worker of a 2-core machine (BENCHMARKS.md, "The test
#: suite"); only their order matters: they go out first, the rest in collection order.
FILE_SECONDS = {
    "test_lab_explain.py": 400, "test_inspector_export_presets.py": 100, "test_inspector_export_print.py": 70,
    "test_inspector_csv.py": 50, "test_model_vllm.py": 50, "test_inspector_export_gui.py": 40,
    "test_inspector_divergence_views.py": 30, "test_lab_experiments.py": 30, "test_inspector_export.py": 20,
}
#: Rough seconds of the longest tests of those files whose tests go out one by one (`SPLIT_FILES`):
#: they go first, so that no long test starts last.
TEST_SECONDS = {
    "test_a_rerun_with_another_thread_count_confirms_at_the_decisions_level": 300,
    "test_the_shipped_example_reproduces_and_proves_each_capacity_verdict": 100,
    "test_redo_keeps_a_stronger_verdict_than_its_rerun": 75,
    "test_explain_confirms_every_capacity_divergence_and_leaves_nothing_unexplained": 70,
    "test_limit_and_request_fill_the_table_step_by_step": 55,
    "test_weights_other_than_the_recorded_ones_are_reported_not_reproduced": 55,
}
#: Files of long tests that share no costly module-scoped fixture: in parallel their tests go out one by one.
SPLIT_FILES = frozenset({"test_lab_explain.py", "test_inspector_export_presets.py",
                         "test_inspector_export_print.py"})


def pytest_collection_modifyitems(config, items):
    """Give each test the markers of its file (`FILE_MARKERS`, `SLOW_FILES`) and `gui` when it uses Qt;
    order the files longest first (`FILE_SECONDS`), each file's tests in their own order but for the
    longest (`TEST_SECONDS`)."""
    for item in items:
        name = item.path.name
        marks = [m for prefix, ms in FILE_MARKERS.items() if name.startswith(prefix) for m in ms]
        if name in SLOW_FILES:
            marks.append("slow")
        if GUI_FIXTURES & set(item.fixturenames):
            marks.append("gui")
        for mark in marks:
            item.add_marker(mark)
    items.sort(key=lambda item: (-FILE_SECONDS.get(item.path.name, 0),  # stable: else in their order
                                 -TEST_SECONDS.get(getattr(item, "originalname", item.name), 0)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`pytest -n N --dist loadgroup` (scripts/test.sh): the tests of a file go to one worker, so its
    module-scoped fixtures (models, recordings, exports, the vLLM engines) are built once, except the
    tests of `SPLIT_FILES`, which go out one by one. The work goes out in the items' order (longest
    first), and a worker takes the next part when it has two tests left."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return nodeid if file.rsplit("/", 1)[-1] in SPLIT_FILES else file

    config.option.loadscopereorder = False  # not by the number of tests: in the items' order
    return FileScheduling(config, log)


#: The small model of the model tests: 2 layers of 4 experts, top-2, a context of 64 positions.
TINY_MODEL = dict(d_model=32, n_layers=2, n_heads=2, n_experts=4, top_k=2, expert_d_ff=32, context=64,
                  init_std=0.2)


@pytest.fixture(scope="session")
def tiny_model():
    """`tiny_model(seed=0, **config)`: a fresh small MoE model in eval mode (config overrides
    `TINY_MODEL`), its weights drawn from `seed`."""
    import torch

    from model.config import ModelConfig
    from model.transformer import MoETransformer

    def make(seed: int = 0, **overrides):
        torch.manual_seed(seed)
        return MoETransformer(ModelConfig(**{**TINY_MODEL, **overrides})).eval()

    return make


#: The size of the test windows: the app's first-launch size on a 1600 x 1000 screen.
WINDOW_SIZE = (1472, 920)


@pytest.fixture(scope="session")
def trace_path(tmp_path_factory):
    """A synthetic trace of 4 runs (L=3, E=6, K=2, V=128, B=5, T=40, R=3) at capacity factor 0.5,
    written once for the session; tests only read it."""
    from traces.synthetic import write_synthetic_trace

    path = tmp_path_factory.mktemp("shared") / "synthetic.h5"
    write_synthetic_trace(path, 4, L=3, E=6, K=2, V=128, B=5, T=40, R=3, capacity_factor=0.5)
    return path


@pytest.fixture(scope="session")
def small_trace_path(tmp_path_factory):
    """A synthetic trace of 2 small runs (L=2, E=4, K=2, V=16, B=3, T=12, R=4) at full capacity,
    written once for the session; tests only read it."""
    from traces.synthetic import write_synthetic_trace

    path = tmp_path_factory.mktemp("small") / "small.h5"
    write_synthetic_trace(path, 2, L=2, E=4, K=2, V=16, B=3, T=12, R=4)
    return path


@pytest.fixture
def isolated_settings(tmp_path):
    """Qt's user settings in the test's own folder, not the user's."""
    from inspector.qt import QtCore

    ini, user = QtCore.QSettings.Format.IniFormat, QtCore.QSettings.Scope.UserScope
    QtCore.QSettings.setPath(ini, user, str(tmp_path))


@pytest.fixture
def make_window(qtbot, tmp_path, isolated_settings):
    """`make_window(path=None)`: a shown main window with its own settings file, having opened
    `path` when given; closed after the test."""
    from inspector.app.main_window import MainWindow
    from inspector.app.settings import Settings
    from inspector.qt import QtCore

    made = []

    def make(path=None):
        ini = QtCore.QSettings.Format.IniFormat
        w = MainWindow(Settings(QtCore.QSettings(str(tmp_path / "settings.ini"), ini)))
        qtbot.addWidget(w)
        w.resize(*WINDOW_SIZE)  # the offscreen screen is small: every plot in view, none scrolled away
        w.show()
        qtbot.waitExposed(w)
        made.append(w)
        if path is not None:
            with qtbot.waitSignal(w.open_finished, timeout=10000) as blocker:
                w.open_path(str(path))
            assert blocker.args == [True]
        return w

    yield make
    for w in made:
        w.close()
        w.wait_for_jobs()


@pytest.fixture
def window(make_window, trace_path):
    """A main window showing `trace_path`."""
    return make_window(trace_path)


@pytest.fixture
def empty_window(make_window):
    """A main window with no trace open."""
    return make_window()
