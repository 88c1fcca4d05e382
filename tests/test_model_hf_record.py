"""`record --model` end to end on a tiny random model saved with `save_pretrained`, and its errors."""

from __future__ import annotations

import json

import pytest
import torch
from hf_tiny import save_tiny, transformers

from inspector.cli import main
from traces import open_trace, validate


@pytest.fixture(scope="module")
def e1(tmp_path_factory):
    """The done-when recording: `record -e e1 --model DIR -n 4 --new-tokens 16`."""
    tmp_path = tmp_path_factory.mktemp("hf-e1")
    folder, trace = tmp_path / "tiny-mixtral", tmp_path / "e1.h5"
    model, tok = save_tiny(folder, "mixtral")
    assert main(["record", "-e", "e1", "--model", str(folder), "-n", "4", "--new-tokens", "16",
                 "-o", str(trace), "-q"]) == 0
    return folder, trace, model, tok


def test_record_e1_with_a_saved_model_checks_explains_and_exports(e1, tmp_path, capsys):
    folder, trace, model, tok = e1
    assert [p for p in validate(trace) if p.severity == "error"] == []
    assert main(["info", "--check", str(trace)]) == 0
    assert "0 errors" in capsys.readouterr().out
    assert main(["explain", str(trace), "-q"]) == 0
    assert "Unexplained share" in capsys.readouterr().out
    png = tmp_path / "text.png"
    assert main(["export", str(trace), "--view", "text", "-o", str(png)]) == 0 and png.stat().st_size > 0
    with open_trace(trace) as t:
        meta = t.meta
        assert meta["model_source"] == "huggingface" and meta["checkpoint"] == str(folder.resolve())
        assert set(meta["kernel_coverage"]) == {"native", "batch_invariant"}
        vocab = list(t.vocab)
        assert len(vocab) == model.config.vocab_size and vocab[:3] == ["<s>", "</s>", "<pad>"]
        assert any(len(v) > 1 and v.startswith(" ") for v in vocab)  # subword tokens, spaces legible
        run = next(t.run(n) for n in t.run_names if t.run(n).attrs["condition"] == "MoE dropless, native")
        row = int(run.attrs["probe_row"])
        tokens = [int(x) for x in run.tokens[row] if x >= 0]
        probe_len = int(run.prompt_len[row])
        probe = t.requests.text[0]
    ids = tok(probe)["input_ids"]
    assert tokens[:probe_len] == ids
    with torch.no_grad():
        hf = model.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False,
                            pad_token_id=tok.pad_token_id)[0, len(ids):].tolist()
    if tok.eos_token_id in hf:  # both stop after the end-of-sequence token
        hf = hf[:hf.index(tok.eos_token_id) + 1]
    assert tokens[probe_len:] == hf


def _error(capsys, *args) -> str:
    assert main(["record", "-e", "e1", "-n", "1", "--new-tokens", "2", "-q", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_model_errors_are_one_line_with_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # an empty cache: nothing is there
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "no such path" in _error(capsys, "--model", str(tmp_path / "absent"))
    assert "pass a local folder" in _error(capsys, "--model", "someone/no-such-model")
    dense = tmp_path / "dense"
    transformers.LlamaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                             intermediate_size=32, vocab_size=300).save_pretrained(dense)
    assert "not an MoE model" in _error(capsys, "--model", str(dense))
    other = tmp_path / "phimoe"
    transformers.PhimoeConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                              intermediate_size=32, vocab_size=300).save_pretrained(other)
    err = _error(capsys, "--model", str(other))
    assert "'phimoe' is not supported" in err and "mixtral" in err and "gpt_oss" in err
    assert "--checkpoint" in _error(capsys, "--model", str(dense), "--checkpoint", "x")


@pytest.mark.parametrize("experiment,extra", [("e3", ["--batch-sizes", "2", "--capacity-factors", "1.0"]),
                                              ("e4", ["-n", "1", "--batch-sizes", "1,2"]),
                                              ("e7", ["-n", "1", "--repeats", "1"]),
                                              ("example", ["-n", "2"])])
def test_every_experiment_records_a_hf_model(tmp_path, capsys, experiment, extra):
    folder, trace = tmp_path / "tiny-qwen", tmp_path / f"{experiment}.h5"
    save_tiny(folder, "qwen2_moe")
    assert main(["record", "-e", experiment, "--model", str(folder), "--new-tokens", "4",
                 "--dtype", "float32",
                 "-o", str(trace), "-q", *extra]) == 0, capsys.readouterr().err
    assert [p for p in validate(trace) if p.severity == "error"] == []
    with open_trace(trace) as t:
        if experiment == "e7":  # timings only: a table, no runs
            return
        routing = t.run(t.run_names[0]).attrs["routing"]
        routing = json.loads(routing) if isinstance(routing, str) else routing
        assert routing["top_k"] == 2 and routing["score_fn"] == "softmax"


def test_the_app_opens_the_hf_trace_with_subword_labels(e1, qtbot, tmp_path):
    from inspector.app.main_window import MainWindow
    from inspector.app.settings import Settings
    from inspector.qt import QtCore

    ini = QtCore.QSettings.Format.IniFormat
    w = MainWindow(Settings(QtCore.QSettings(str(tmp_path / "settings.ini"), ini)))
    qtbot.addWidget(w)
    w.show()
    with qtbot.waitSignal(w.open_finished, timeout=20000) as blocker:
        w.open_path(str(e1[1]))
    assert blocker.args == [True]
    shown = w.tabs.currentWidget()
    qtbot.waitUntil(lambda: shown.data is not None and not shown._dirty, timeout=10000)
    from inspector.views.routing import RoutingView

    routing = next(v for v in w.views if isinstance(v, RoutingView))
    qtbot.waitUntil(lambda: routing.data is not None, timeout=10000)
    tok = e1[3]
    probe = tok.convert_ids_to_tokens(tok("The result is a new list of")["input_ids"])
    assert len(routing.data.labels) > len(probe)  # one label per subword token of the row
    assert any(len(label.strip()) > 1 for label in routing.data.labels)
    w.close()
    w.wait_for_jobs()
