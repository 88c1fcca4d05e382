"""The app's document without Qt: the selection, its changes, the memoised data and the shared
divergence source, all dropped in one place when the trace changes."""

import subprocess
import sys

import pytest
from paths import ROOT

from inspector.state.document import CHANGES, Document
from traces import open_trace
from traces.synthetic import write_synthetic_trace


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "doc.h5"
    write_synthetic_trace(path, 3, L=3, E=4, K=2, V=64, B=3, T=12, R=2, capacity_factor=0.5)
    with open_trace(path) as t:
        yield t


def test_document_loads_no_qt():
    code = ("import sys, inspector.state.document; "
            "print(any(m.startswith(('PySide6', 'pyqtgraph')) for m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_changes_are_told_once_each(trace):
    d = Document()
    heard: list[str] = []
    d.subscribe(heard.append)
    d.set_trace(trace)
    d.set_run(trace.run_names[0])
    d.set_row(1)
    d.set_row(1)            # no change, nothing told
    d.set_layer(2)
    d.set_layer(99)         # clamped to the last layer: no change
    d.set_position(4)
    d.set_reference(trace.run_names[1])
    assert heard == ["trace", "run", "row", "layer", "position", "reference"]
    assert set(heard) == set(CHANGES)


def test_a_new_trace_drops_everything_but_the_layer(trace):
    d = Document()
    d.set_trace(trace)
    d.set_run(trace.run_names[0])
    d.set_layer(1)
    d.set_position(3)
    data, source = d.routing_data(), d.divergence()
    assert d.routing_data() is data and d.divergence() is source  # memoised, shared
    d.set_trace(trace)
    assert (d.run, d.row, d.position, d.reference) == (None, 0, None, None) and d.layer == 1
    assert d.divergence() is not source
    d.set_run(trace.run_names[0])
    assert d.routing_data() is not data
    d.set_trace(None)
    assert d.divergence() is None and d.names == []


def test_a_row_is_read_once_for_its_routing_layers_and_text(trace, monkeypatch):
    from inspector.state import document

    reads = []
    real = document.row_trace

    def counted(run, b, **kw):
        reads.append((run.name, b))
        return real(run, b, **kw)

    monkeypatch.setattr(document, "row_trace", counted)
    d = Document()
    d.set_trace(trace)
    d.set_run(trace.run_names[0], row=1)
    for layer in range(3):   # a layer switch reads nothing again
        d.set_layer(layer)
        routing = d.routing_data()
        assert (routing.layer, routing.row) == (layer, 1)
    assert d.layers_data().row == d.text_data().row == 1
    assert reads == [(trace.run_names[0], 1)]
    d.set_row(2)
    assert d.routing_data().row == 2 and reads[-1] == (trace.run_names[0], 2)


def test_a_run_selected_with_a_layer_and_a_preferred_layer_are_told_as_the_run(trace):
    """A reload selects its run at the layer it showed in one change; a saved layer waits for a run."""
    from inspector.state.restore import ShownPlace

    d = Document()
    heard: list[str] = []
    d.subscribe(heard.append)
    d.prefer_layer(2)         # no run yet: nothing shown, nothing told
    assert heard == [] and d.layer == 2
    d.set_trace(trace)
    heard.clear()
    d.set_run(trace.run_names[1], 2, layer=9)  # kept within the run's 3 layers
    assert (d.run.name, d.row, d.layer) == (trace.run_names[1], 2, 2)
    assert heard == ["run"]
    d.prefer_layer(1)         # a run is shown: the layer changes as any layer change does
    assert d.layer == 1 and heard[-1] == "layer"
    kept = ShownPlace(str(trace.path), trace.run_names[1], 2, 1, 0)
    assert kept.of(str(trace.path)) is kept and kept.of("/elsewhere.h5") is None
