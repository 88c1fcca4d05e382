"""No code from a trace: a checkpoint folder a trace names is used only inside the trace's folder or
assets/, a folder with custom model code never runs it (not even answering "y" on a terminal), and a
pickled payload is one sentence, exit 2."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import pytest
from paths import EXAMPLES, MIXTRAL_EXAMPLE, ROOT

TINY = ROOT / "assets" / "tiny-mixtral"


def _custom_code_folder(folder: Path, marker: Path) -> Path:
    """A model folder whose config asks for its own code (`auto_map`); that code writes `marker`."""
    folder.mkdir(parents=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TINY / name, folder / name)
    config = json.loads((TINY / "config.json").read_text())
    config.update(model_type="evil_moe", auto_map={"AutoConfig": "evil.EvilConfig",
                                                   "AutoModelForCausalLM": "evil.EvilModel"})
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n"
                                    "from transformers import MixtralConfig as EvilConfig\n"
                                    "from transformers import MixtralForCausalLM as EvilModel\n")
    return folder


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _pickle_folder(folder: Path, marker: Path) -> Path:
    """The tiny Mixtral's config and tokenizer with weights as a pickle whose loading runs a command."""
    folder.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(TINY / name, folder / name)
    with open(folder / "pytorch_model.bin", "wb") as f:
        pickle.dump({"model.embed_tokens.weight": _Payload(marker)}, f)
    return folder


def _trace_naming(tmp_path: Path, checkpoint: str) -> Path:
    trace = tmp_path / "traces" / "tiny.h5"
    trace.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(MIXTRAL_EXAMPLE, trace)
    with h5py.File(trace, "r+") as f:
        f.attrs["checkpoint"] = checkpoint
    return trace


def _explain(*argv: str, stdin: str = "y\ny\ny\n") -> subprocess.CompletedProcess:
    code = "import sys; from inspector.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, "explain", "--limit", "1", *argv], input=stdin,
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_a_folder_the_trace_names_outside_its_place_is_refused(tmp_path):
    marker = tmp_path / "ran"
    folder = _custom_code_folder(tmp_path / "elsewhere" / "model", marker)
    done = _explain(str(_trace_naming(tmp_path, str(folder))))
    assert done.returncode == 2, done.stderr[-800:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "outside its own folder and assets/" in lines[0] and "--checkpoint" in lines[0]
    assert not marker.exists()


def test_custom_model_code_never_runs_even_when_the_user_names_the_folder(tmp_path):
    marker = tmp_path / "ran"
    folder = _custom_code_folder(tmp_path / "model", marker)
    done = _explain("--checkpoint", str(folder), str(_trace_naming(tmp_path, "assets/tiny-mixtral")))
    assert done.returncode == 2, done.stderr[-800:]
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not marker.exists()


@pytest.mark.hf
def test_a_pickled_payload_is_one_sentence_and_never_runs(tmp_path):
    pytest.importorskip("transformers")
    marker = tmp_path / "ran"
    folder = _pickle_folder(tmp_path / "pickled", marker)
    done = _explain("--checkpoint", str(folder), str(_trace_naming(tmp_path, "assets/tiny-mixtral")))
    assert done.returncode == 2, done.stderr[-800:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "could not be loaded" in lines[0], lines
    assert not marker.exists()


def test_a_folder_beside_the_trace_is_allowed(tmp_path):
    """The trace's own folder may hold its checkpoint (copied there by whoever sent it)."""
    from lab.counterfactual.source import allowed

    trace = _trace_naming(tmp_path, "model")
    assert allowed(trace.parent / "model", trace)
    assert allowed(TINY, trace)
    assert not allowed(tmp_path / "elsewhere", trace)
    (tmp_path / "traces" / "link").symlink_to(tmp_path / "elsewhere")
    assert not allowed(trace.parent / "link", trace)  # a link out of the folder is where it points


@pytest.mark.parametrize("name", ["example.h5", "tiny-mixtral-bf16.h5"])
def test_no_shipped_trace_names_a_path_of_the_machine_that_made_it(name):
    found = []

    def visit(where, obj):
        for key, value in obj.attrs.items():
            text = value.decode() if isinstance(value, bytes) else str(value)
            if any(root in text for root in ("/work/", "/home/", "/tmp/", "/root/", "/Users/", ":\\\\")):
                found.append((where, key))

    with h5py.File(EXAMPLES / name, "r") as f:
        visit("/", f)
        f.visititems(visit)
    assert not found
