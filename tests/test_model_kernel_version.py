"""A trace recorded with older kernels (no `kernels` field in its machine fingerprint, batch-invariant
experts as one bmm over all experts per tile slot) reruns under today's kernels and reports how far its
runs reproduce, naming the kernel version among the differences, instead of failing."""

import json

import h5py
import pytest
import torch
from test_lab_explain import COMPOSITIONS, CONDITIONS, record_trace

from lab.counterfactual import NOT_REPRODUCED, explain_trace
from lab.counterfactual.report import describe
from model import moe as moe_module
from model.checkpoint import load_checkpoint, save_checkpoint
from model.fingerprint import machine_fingerprint
from model.kernels import KERNEL_VERSION, TORCH_KERNEL_VERSION
from traces import fingerprint, open_trace


def test_the_fingerprint_names_the_kernel_version():
    fp = machine_fingerprint()
    assert fp["kernels"] == KERNEL_VERSION
    old = {k: v for k, v in fp.items() if k != "kernels"}
    assert fingerprint.differences(old, fp) == [f"kernel version none -> {KERNEL_VERSION}"]
    assert f"kernel version: {KERNEL_VERSION}" in fingerprint.lines(fp)


@pytest.fixture
def old_trace(tmp_path, tiny_model, monkeypatch):
    """A checkpoint and a trace recorded with the version-1 batch-invariant experts."""
    stem = tmp_path / "tiny"
    save_checkpoint(tiny_model(0), stem)
    model, _ = load_checkpoint(stem)
    model.use_kernels(1)  # the pure-PyTorch path, its tiled experts as version 1 ran them
    path = tmp_path / "old.h5"
    tiled = moe_module.MoE._experts_tiled
    with monkeypatch.context() as m:  # version 1: one bmm over all E experts per slot, always
        m.setattr(moe_module.MoE, "_experts_tiled",
                  lambda self, xs, counts, tile, grouped: tiled(self, xs, counts, tile, False))
        record_trace(path, model, CONDITIONS[:1])
    with h5py.File(path, "r+") as f:  # written before the fingerprint named its kernels
        machine = json.loads(f.attrs["machine"])
        del machine["kernels"]
        f.attrs["machine"] = json.dumps(machine)
    return stem, path, model


def test_an_old_trace_reruns_and_reports_its_level(old_trace):
    stem, path, model = old_trace
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as recorded (test_model_explain records on one thread)
    try:
        result = explain_trace(path, model, checkpoint=str(stem))
    finally:
        torch.set_num_threads(threads)
    with open_trace(path) as trace:
        runs = list(trace.run_names)
    assert len(runs) == len(COMPOSITIONS)
    # every run has a level; a run that does not reproduce is named, never an exception
    assert set(result.levels) == set(runs)
    assert set(result.levels.values()) <= {"bitwise", "decisions", NOT_REPRODUCED}
    assert sorted(result.not_reproduced) == sorted(r for r, v in result.levels.items() if v == NOT_REPRODUCED)
    # the reruns ran the pure-PyTorch path, the closest this build has to version 1
    assert "kernels" not in result.recorded_machine
    assert result.rerun_machine["kernels"] == TORCH_KERNEL_VERSION
    text = describe(result)
    assert f"kernel version none -> {TORCH_KERNEL_VERSION}" in text
    assert "Reruns as recorded:" in text
