"""The route check of an engine's recording, end to end without vLLM: the trained Mixtral of
`assets/mixtral-docs` served by the project's Hugging Face path as an engine (`route_engines.LoopEngine`),
recorded through the engine recorder (`lab.experiments.engine.prepare`, `EngineRecording.record`),
and the same engine made to lie about its routes (`route_engines.Corrupting`). A clean recording is
written with every row replayed; corrupted routes are refused at record time or fail `info --check`,
every time; an all-[0, 0] trace fails `info --check` whatever its stored check says."""

from __future__ import annotations

from types import SimpleNamespace

import h5py
import numpy as np
import pytest
from paths import MIXTRAL_DOCS
from route_engines import Corrupting, LoopEngine

from inspector.cli import main
from lab.experiments.compositions import random_compositions, read_partners
from lab.experiments.engine import prepare
from lab.experiments.engine_recording import RoutesRefused
from lab.experiments.options import DEFAULT_PARTNERS, DEFAULT_PROBE
from lab.experiments.session import RequestPool
from model.vllm.route_check import RouterReference
from traces import open_trace, validate
from traces.route_check import RouteCheck, sample_rows
from traces.route_stats import upper_bound

pytestmark = pytest.mark.hf
transformers = pytest.importorskip("transformers")

MODEL = str(MIXTRAL_DOCS)
DTYPE = "bfloat16"
NEW = 8


@pytest.fixture(scope="module")
def setup():
    tok = transformers.AutoTokenizer.from_pretrained(MODEL, local_files_only=True)
    config = transformers.AutoConfig.from_pretrained(MODEL, local_files_only=True)
    pool = RequestPool.build(DEFAULT_PROBE, read_partners(DEFAULT_PARTNERS)[:12],
                             encode=lambda text: list(tok(text)["input_ids"]))
    engine = LoopEngine(MODEL, DTYPE)
    reference = RouterReference(MODEL, DTYPE)  # shared by the recordings: loaded once
    yield SimpleNamespace(tok=tok, config=config, pool=pool, engine=engine, reference=reference)
    reference.close()
    engine.close()


def record(path, setup, engine, seed: int = 0, runs: int = 3, route_check: bool = True, share: float = 1.0,
           shared: bool = True):
    """Record `runs` random compositions (batch 1-4, of the first 4 compositions of `seed % 4`) of
    `NEW` tokens through `engine` into `path`."""
    settings = SimpleNamespace(hf_model=MODEL, seed=seed, output=path, experiment="example")
    reference, rec = prepare(settings, engine, setup.pool, setup.tok, setup.config, route_check=route_check,
                             share=share, reference=setup.reference if shared else None)
    try:
        for i, comp in enumerate(random_compositions(seed % 4, runs, setup.pool.n_partners, (1, 2, 3, 4))):
            rec.record(f"c{i}", comp, NEW, seed)
    finally:
        rec.close()
        if reference is not None and not shared:
            reference.close()
    return path


def checks(path) -> dict[str, RouteCheck]:
    with open_trace(path) as t:
        return {name: RouteCheck.from_attr(t.run(name).attrs["route_check"]) for name in t.run_names}


def test_a_clean_recording_is_written_with_every_row_replayed(setup, tmp_path, capsys):
    path = record(tmp_path / "clean.h5", setup, setup.engine, runs=4)
    assert [p for p in validate(path, read_data=True) if p.severity == "error"] == []
    with open_trace(path) as t:
        for name in t.run_names:
            run = t.run(name)
            check = RouteCheck.from_attr(run.attrs["route_check"])
            assert check.replayed and check.share == 1 and check.rows == tuple(range(run.batch_size))
            assert check.checked == check.tokens == int((np.asarray(run.expert[...]) >= 0).all(-1).sum())
            assert not check.refusal() and check.dtype == DTYPE and check.seconds > 0
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "4 of 4 engine runs replayed through the router" in out and "rate <=" in out


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["row", "uniform-0.05"])
def test_corrupted_routes_are_refused_every_time(setup, tmp_path, kind):
    """20 of 20 seeded tries: the engine answers its first (probe) request truthfully, then lies."""
    for seed in range(20):
        path = tmp_path / f"{kind}-{seed}.h5"
        with pytest.raises(RoutesRefused) as refused:
            record(path, setup, Corrupting(setup.engine, kind, seed, 8, after=1), seed=seed)
        message = str(refused.value)
        assert len(message.splitlines()) == 1 and "away from a near tie (first at row" in message, message


@pytest.mark.parametrize("route_check", [True, False])
@pytest.mark.parametrize("kind", ["duplicate", "range", "zeros"])
def test_malformed_routes_are_refused_whatever_the_flags(setup, tmp_path, kind, route_check):
    for seed in range(3):
        with pytest.raises(RoutesRefused, match="name (one expert twice|an expert out of range)"):
            record(tmp_path / f"{kind}.h5", setup, Corrupting(setup.engine, kind, seed, 8, after=1),
                   seed=seed, route_check=route_check)


def test_two_percent_uniform_is_refused_or_fails_info_check(setup, tmp_path, capsys):
    for seed in range(5):
        path = tmp_path / f"two-{seed}.h5"
        try:
            record(path, setup, Corrupting(setup.engine, "uniform-0.02", seed, 8, after=1), seed=seed)
        except RoutesRefused:
            continue
        assert main(["info", "--check", str(path)]) == 2, capsys.readouterr().out


def test_a_server_stated_in_the_wrong_dtype_is_refused(setup, tmp_path):
    """An engine computing in bfloat16 that says float32 (a server's --dtype as stated)."""
    class Stated(Corrupting):
        def settings(self):
            return {**self.engine.settings(), "dtype": "float32"}

    with pytest.raises(RoutesRefused, match="differ from transformers' in float32 by up to .*the engine "
                                            "does not compute in float32"):
        record(tmp_path / "stated.h5", setup, Stated(setup.engine, "none", 0, 8, after=10**6), shared=False)


@pytest.mark.parametrize("stored", ["absent", "not replayed", "forged"])
def test_an_all_zero_trace_fails_info_check_whatever_its_check_says(setup, tmp_path, capsys, stored):
    path = record(tmp_path / "zeros.h5", setup, setup.engine, runs=2, route_check=stored == "forged")
    with h5py.File(path, "a") as f:
        for name in f["runs"]:
            expert = f[f"runs/{name}/routing/expert"]
            expert[...] = np.where(expert[...] >= 0, 0, -1)
            if stored == "absent":
                del f[f"runs/{name}"].attrs["route_check"]
    assert main(["info", "--check", str(path)]) == 2
    out = capsys.readouterr().out
    assert "error: /runs/c0/routing/expert: routes that cannot be a router's top-K:" in out
    assert "name one expert twice (e.g. [0, 0])" in out


def test_no_route_check_checks_structure_and_says_so(setup, tmp_path, capsys):
    path = record(tmp_path / "unreplayed.h5", setup, setup.engine, runs=2, route_check=False)
    assert main(["info", "--check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "routes: NONE of 2 engine runs replayed through the router" in out
    assert out.count("routes NOT replayed through the router (recorded with --no-route-check)") == 2
    assert "ROUTES NOT REPLAYED" in out.splitlines()[0:12].__str__()  # said at the top, beside the engine
    assert "0 errors, 2 warnings" in out
    for check in checks(path).values():
        assert not check.replayed and check.checked == 0 and check.tokens > 0
    from inspector.app.details import details_html

    with open_trace(path) as t:  # the app's run details say it first
        text = details_html(t, t.run("c0"), None, None)
        assert text.index("ROUTES NOT REPLAYED") < text.index("written by")
        assert "compilation_mode NONE" in text


def test_a_sampled_check_draws_fresh_rows_and_stores_its_bound(setup, tmp_path):
    a = checks(record(tmp_path / "a.h5", setup, setup.engine, runs=3, share=0.5))
    b = checks(record(tmp_path / "b.h5", setup, setup.engine, runs=3, share=0.5))
    assert len({c.draw for c in [*a.values(), *b.values()]}) == 6  # fresh entropy each run
    with open_trace(tmp_path / "a.h5") as t:
        for name, check in a.items():
            B = t.run(name).batch_size
            assert check.share == 0.5 and len(check.rows) == max(1, -(-B // 2))
            assert sample_rows(B, 0.5, np.random.default_rng(check.draw)) == check.rows  # repeatable
            assert check.rate_bound == upper_bound(check.unexplained, check.checked)
