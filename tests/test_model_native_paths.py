"""Every instruction-set path of the compiled kernels this CPU runs (AVX-512, AVX2 with FMA, generic), the
choice among them, and their threads.

Each path built here is tested against the pure-PyTorch experts (within a stated tolerance, the same
decisions), for a row's bits alone and in a batch, and at 1, 2 and 4 intra-op threads: the threads
split the experts and their rows, never a sum, so the bits do not change. A path this CPU lacks is
never loaded (its build may sit in a shared build folder); a trace's path that does not run here is
said in a sentence; without a usable build the model constructs with one warning.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model import experts as backends
from model import native
from model.fingerprint import machine_fingerprint
from model.kernels import KERNEL_VERSION, TORCH_KERNEL_VERSION
from model.moe import MoE
from model.routing import RoutingPolicy

PATHS = [pytest.param(isa, marks=pytest.mark.skipif(
    native.load_path(isa) is None, reason=f"the {isa} path is not built or not runnable here "
    f"(this CPU runs {', '.join(native.runnable())}; `python -m model.native` builds them)"))
    for isa in native.ISA_FLAGS]


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32)


def _block(C: int = 64, E: int = 8, F: int = 96, seed: int = 0) -> MoE:
    torch.manual_seed(seed)
    moe = MoE(C, E, F).eval()
    for p in (moe.router, moe.w_in, moe.w_out):
        torch.nn.init.normal_(p, std=0.1)
    return moe


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("mode", ["native", "batch_invariant"])
def test_each_path_agrees_with_the_torch_experts_and_keeps_a_rows_bits_in_any_batch(isa, mode):
    moe = _block()
    policy = RoutingPolicy.preset("gshard", capacity_factor=1.0)
    x = torch.randn(1, 300, 64, generator=torch.Generator().manual_seed(1))
    valid = torch.ones(1, 300, dtype=torch.bool)
    with torch.no_grad():
        assert moe.use_kernels(KERNEL_VERSION, isa) == KERNEL_VERSION and moe.kernels.path == f"3-{isa}"
        y3, r3 = moe(x, valid, policy, mode=mode)
        d = r3.decision
        alone = moe.combine(x[:, 7:8], d.expert[:, 7:8], d.kept[:, 7:8], d.gate[:, 7:8], mode, 4)
        moe.use_kernels(TORCH_KERNEL_VERSION)
        y2, r2 = moe(x, valid, policy, mode=mode)
    assert torch.equal(r3.decision.kept, r2.decision.kept) and torch.equal(r3.router_logits, r2.router_logits)
    # sums of 64 and 96 products of unit-scale terms in another order: a few ulps of the largest sum
    assert (y3 - y2).abs().max().item() <= 1e-5 * max(y2.abs().max().item(), 1.0)
    assert torch.equal(_bits(alone), _bits(y3[:, 7:8]))


@pytest.mark.parametrize("isa", PATHS)
def test_each_paths_activation_is_within_4_ulp_of_silu(isa):
    kernel = native.load_path(isa)
    C = F = kernel.lanes
    g = torch.linspace(-30, 30, 60001)
    w_in, w_out = torch.zeros(1, 2 * F, C), torch.zeros(1, C, F)
    w_in[0, 0, 0] = w_in[0, F, C - 1] = w_out[0, 0, 0] = 1.0
    x = torch.zeros(len(g), C)
    x[:, 0], x[:, C - 1] = g, 1.0
    one = torch.ones(len(g), 1)
    y = kernel.experts(x, kernel.pack(w_in, True), kernel.pack(w_out, False), F,
                       torch.zeros(len(g), 1, dtype=torch.int64), one.bool(), one)[:, 0].double()
    want = torch.nn.functional.silu(g.double())
    ulp = torch.from_numpy(np.spacing(np.abs(want.float().numpy()))).double()
    assert ((y - want).abs() / ulp).max().item() <= 4


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("tokens", [8, 64, 700])
def test_a_rows_bits_do_not_depend_on_the_thread_count(isa, tokens, threads):
    """The experts (three parallel phases) and the one-call step at 1, 2 and 4 threads, at sizes whose
    work splits into many items (the 8-token step of a 256-wide block still runs in parallel)."""
    moe = _block(C=128, F=256, seed=2)
    moe.use_kernels(KERNEL_VERSION, isa)
    policy = RoutingPolicy.preset("dropless")
    x = torch.randn(2, tokens // 2, 128, generator=torch.Generator().manual_seed(tokens))
    valid = torch.ones(2, tokens // 2, dtype=torch.bool)
    out = {}
    with torch.no_grad():
        for n in (1, 2, 4):
            threads(n)
            y, routing = moe(x, valid, policy)
            d = routing.decision
            out[n] = (y, moe.combine(x, d.expert, d.kept, d.gate, "native", 4))
    for n in (2, 4):
        for a, b in zip(out[1], out[n], strict=True):
            assert torch.equal(_bits(a), _bits(b)), n


def test_a_path_this_cpu_lacks_is_never_loaded(monkeypatch):
    """A build folder holding an AVX-512 build (shared with another machine) on a CPU without AVX-512:
    only the paths the CPU's flags allow are loaded; a trace of the lacking path says so."""
    monkeypatch.setattr(native, "_cpu_flags", lambda: {"sse2", "avx", "avx2", "fma"})
    for cached in (native.runnable, native.load_path, native.load):
        cached.cache_clear()
    try:
        assert native.runnable() == ("avx2", "generic") or native.runnable() == ("generic",)
        assert native.load_path("avx512") is None
        chosen = backends.choose(KERNEL_VERSION, "avx512")
        assert chosen.isa != "avx512"
        note = backends.unavailable("3-avx512")
        assert note is not None and "lacks its instructions" in note and chosen.path in note
    finally:
        monkeypatch.undo()
        for cached in (native.runnable, native.load_path, native.load):
            cached.cache_clear()
    assert backends.unavailable(f"3-{native.load().isa}") is None if native.load() else True
    assert backends.unavailable("2-torch") is None


def test_a_package_without_its_sources_constructs_the_model_with_one_warning(monkeypatch, tmp_path):
    """An install that lost the C++ sources (or cannot build them): `load` never raises."""
    monkeypatch.setattr(native, "HERE", tmp_path)
    for cached in (native.load_path, native.load):
        cached.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="pure-PyTorch path") as caught:
            moe = MoE(64, 8, 96)
            MoE(64, 8, 96)
        assert len([w for w in caught if issubclass(w.category, RuntimeWarning)]) == 1
        assert moe.kernels.path == "2-torch"
    finally:
        monkeypatch.undo()
        for cached in (native.load_path, native.load):
            cached.cache_clear()


def test_the_fingerprint_records_the_path_that_ran(tiny_model):
    model = tiny_model(seed=0)
    for isa in native.paths_available():
        model.use_kernels(KERNEL_VERSION, isa)
        fp = machine_fingerprint(kernels=model.kernel_version, kernel_path=model.kernel_path)
        assert fp["kernels"] == KERNEL_VERSION and fp["kernel_path"] == f"3-{isa}"
    model.use_kernels(TORCH_KERNEL_VERSION)
    assert model.kernel_path == "2-torch"
    assert machine_fingerprint(kernels=TORCH_KERNEL_VERSION)["kernel_path"] == "2-torch"


def test_a_rerun_on_another_path_names_it_among_the_machines_differences():
    from traces import fingerprint

    here = machine_fingerprint()
    recorded = {**here, "kernel_path": "3-avx512" if here["kernel_path"] != "3-avx512" else "3-avx2"}
    said = f"kernel path {recorded['kernel_path']} -> {here['kernel_path']}"
    assert said in fingerprint.differences(recorded, here)


@pytest.mark.parametrize("isa", PATHS)
def test_compiled_attention_keeps_its_bits_at_any_thread_count(isa, threads):
    kernel = native.load_path(isa)
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 4, n, 32, generator=g) for n in (64, 600, 600))
    q_pos = torch.arange(536, 600).expand(2, 64)
    out = {}
    for n in (1, 2, 4):
        threads(n)
        out[n] = kernel.attention(q, k, v, q_pos)
    assert torch.equal(_bits(out[1]), _bits(out[2])) and torch.equal(_bits(out[1]), _bits(out[4]))


def test_a_copied_model_runs_the_same_kernels():
    import copy
    import pickle

    moe = _block()
    for isa in native.paths_available():
        moe.use_kernels(KERNEL_VERSION, isa)
        assert copy.deepcopy(moe).kernels == moe.kernels
        assert pickle.loads(pickle.dumps(moe)).kernels.path == f"3-{isa}"
    moe.use_kernels(TORCH_KERNEL_VERSION)
    assert copy.deepcopy(moe).kernels.path == "2-torch"
