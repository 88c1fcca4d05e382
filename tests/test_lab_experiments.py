"""The recorder (`moe-inspector record`): experiments, their measures, interrupts and option errors."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
import torch
from kernel_probe import skip_unless_native_varies

from inspector.cli import main
from lab.experiments import ExperimentError, cli, options
from lab.experiments.compositions import (
    Composition,
    crowding_order,
    place,
    random_compositions,
    read_partners,
    solo,
)
from lab.experiments.conditions import capacity, dropless
from lab.experiments.e0_kernels import run_e0
from lab.experiments.e1_table import run_e1
from lab.experiments.e3_capacity import run_e3
from lab.experiments.e4_near_tie import run_e4
from lab.experiments.e7_cost import run_e7
from lab.experiments.example import run_example
from lab.experiments.measures import completion_matrix, drop_counts, unique_completions
from lab.experiments.options import DEFAULT_CHECKPOINT, DEFAULT_PARTNERS, Settings, parse_int_list
from lab.experiments.progress import ProgressBar
from lab.experiments.session import Models, RequestPool, generate_batch, load_models
from model.checkpoint import load_checkpoint, save_checkpoint
from model.config import ModelConfig
from model.recorder import Recorder
from model.tokenizer import EOS
from model.transformer import MoETransformer
from traces import open_trace, validate
from traces.schema import MISSING

#: The small E1: in these compositions the shipped probe diverges within 16 tokens at cf 1.0.
E1_COMPOSITIONS = 4
E1_TOKENS = 16


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread, as the recorder uses: on a busy 2-core machine more threads only wait."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A small random-init MoE checkpoint (mechanics only: its completions are not meaningful)."""
    torch.manual_seed(0)
    model = MoETransformer(ModelConfig(d_model=32, n_layers=2, n_heads=2, n_experts=4, expert_d_ff=32,
                                       context=128))
    stem = tmp_path_factory.mktemp("ckpt") / "tiny"
    save_checkpoint(model, stem, {"kind": "test"})
    return stem


@pytest.fixture(scope="module")
def shipped() -> Models:
    return load_models(DEFAULT_CHECKPOINT, None, False, torch.device("cpu"), want_dense=False)


@pytest.fixture(scope="module")
def pool() -> RequestPool:
    return RequestPool.build(options.DEFAULT_PROBE, read_partners(DEFAULT_PARTNERS))


def settings(tmp_path: Path, experiment: str, **kw) -> Settings:
    base = {k: v for k, v in options.DEFAULTS[experiment].items()}
    base.update(kw)
    return Settings(experiment=experiment, output=tmp_path / f"{experiment}.h5", **base)


def args_for(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(list(argv))


# ---- the shipped checkpoint -------------------------------------------------------------------


def test_shipped_checkpoint_generates_deterministically(shipped, pool):
    comp = Composition((3, 0, 7), 1)
    cond = capacity("gshard", 1.0, "native")
    runs = []
    for _ in range(2):
        recorder = Recorder()
        result = generate_batch(shipped.moe, pool, comp, cond, 16, recorder)
        runs.append(recorder.arrays(result))
    for path in ("tokens", "routing/expert", "routing/kept", "routing/router_logits", "logits"):
        assert np.array_equal(runs[0][path], runs[1][path]), path
    new = runs[0]["tokens"][1, len(pool.tokens[0]):]
    assert (new >= 0).sum() == 16


def test_small_e1_diverges_under_batch_grouping_and_not_under_the_fixes(shipped, pool, tmp_path):
    s = settings(tmp_path, "e1", compositions=E1_COMPOSITIONS, batch_sizes=(2, 3, 4), capacity_factors=(1.0,),
                 new_tokens=(E1_TOKENS,), repeats=1)
    result = run_e1(s, shipped, pool)
    unique = {c.name: c.unique[E1_TOKENS][0] for c in result.conditions}
    assert unique["MoE gshard cf=1.0 per batch, native"] > 1
    assert unique["MoE gshard cf=1.0 per sequence, pads not counted, batch_invariant"] == 1
    assert unique["MoE dropless, batch_invariant"] == 1
    with open_trace(s.output) as trace:
        assert len(trace.run_names) == E1_COMPOSITIONS * len(result.conditions)
        assert "e1_unique_completions" in trace.table_names
    assert f"U({E1_COMPOSITIONS}) at {E1_TOKENS} tokens" in result.table()


def test_per_sequence_groups_depend_on_the_batch_when_pads_count(shipped, pool):
    """docs/routing.md, trap 4: a longer partner pads the probe's prefill; counted, the pads raise its
    capacity, so even per-sequence groups with batch-invariant kernels change the completion."""
    longer = max(range(1, len(pool.texts)), key=lambda r: len(pool.tokens[r]))
    assert len(pool.tokens[longer]) > len(pool.tokens[0])
    capacities, logits = {}, {}
    for counted in (True, False):
        cond = capacity("gshard", 1.0, "batch_invariant", group_by="sequence", pads_counted=counted)
        runs = []
        for comp in (solo(), Composition((0, longer), 0)):
            recorder = Recorder()
            runs.append(recorder.arrays(generate_batch(shipped.moe, pool, comp, cond, 4, recorder)))
        T = runs[0]["tokens"].shape[1]
        capacities[counted] = [r["load/capacity"][0, :, 0] for r in runs]  # prefill, every layer, row 0
        logits[counted] = [runs[0]["logits"][0], runs[1]["logits"][0, :T]]
    assert not np.array_equal(*capacities[True])
    assert np.array_equal(*capacities[False])
    assert np.array_equal(*logits[False])  # bitwise: nothing of the partner reaches the probe


# ---- recording mechanics (a tiny random model) ---------------------------------------------------


def test_interrupt_keeps_completed_runs(tiny, tmp_path, capsys):
    out = tmp_path / "e1.h5"
    # batch_invariant conditions only: no dense control, so every run goes to the one trace.
    args = args_for("--checkpoint", str(tiny), "-n", "3", "--new-tokens", "6", "--repeats", "1",
                    "--capacity-factors", "1.0", "--kernel-mode", "batch_invariant", "-o", str(out))

    def interrupt_after_two(done: int, total: int, label: str) -> None:
        if done == 2:
            raise KeyboardInterrupt

    assert cli.run(args, progress=interrupt_after_two) == 130
    assert "2 complete runs kept in" in capsys.readouterr().err
    with open_trace(out) as trace:
        assert len(trace.run_names) == 2
        assert trace.incomplete_runs == []
    assert not [p for p in validate(out) if p.severity == "error"]


def test_e1_dense_control_goes_to_its_own_trace(tiny, pool, tmp_path):
    torch.manual_seed(1)
    dense = MoETransformer(ModelConfig.dense_control(load_checkpoint(tiny)[0].config))
    save_checkpoint(dense, tmp_path / "dense", {"kind": "test"})
    models = load_models(tiny, tmp_path / "dense", True, torch.device("cpu"), want_dense=True)
    s = settings(tmp_path, "e1", compositions=2, capacity_factors=(1.0,), kernel_modes=("native",),
                 new_tokens=(3, 6), repeats=1)
    result = run_e1(s, models, pool)
    assert [c.name for c in result.conditions] == ["dense control", "MoE dropless, native",
                                                   "MoE gshard cf=1.0 per batch, native",
                                                   "MoE gshard cf=1.0 per sequence, pads not counted, native"]
    with open_trace(tmp_path / "e1-dense.h5") as trace:
        assert len(trace.run_names) == 2
        assert trace.moe_layers == []
    with open_trace(tmp_path / "e1.h5") as trace:
        assert len(trace.run_names) == 6
    assert not [p for f in ("e1.h5", "e1-dense.h5") for p in validate(tmp_path / f) if p.severity == "error"]
    assert "U(2) at 3 tokens" in result.table() and "U(2) at 6 tokens" in result.table()


def test_missing_default_dense_checkpoint_is_a_note(tiny, tmp_path):
    models = load_models(tiny, tmp_path / "absent", False, torch.device("cpu"), want_dense=True)
    assert models.dense is None and "dense control skipped" in models.dense_note
    with pytest.raises(ExperimentError, match="--dense-checkpoint"):
        load_models(tiny, tmp_path / "absent", True, torch.device("cpu"), want_dense=True)


@pytest.mark.parametrize(("argv", "flag"), [
    (["--batch-sizes", "0"], "--batch-sizes"),
    (["--batch-sizes", "4-2"], "--batch-sizes"),
    (["--capacity-factors", "-1"], "--capacity-factors"),
    (["--new-tokens", "many"], "--new-tokens"),
    (["--presets", "nonesuch"], "--presets"),
    (["--presets", "dropless"], "--presets"),
    (["-e", "e4", "--capacity-factors", "1.0"], "--capacity-factors"),
    (["--checkpoint", "/nonexistent/model"], "--checkpoint"),
    (["--partners", "/nonexistent/partners.txt"], "--partners"),
    (["--device", "warp-drive"], "--device"),
    (["--probe", " "], "--probe"),
    (["--new-tokens", "100000"], "--new-tokens"),
    (["-n", "0"], "-n/--compositions"),
    (["--logits", "full", "--logits-k", "8"], "--logits-k"),
    (["--logits-k", "1"], "--logits-k"),
    (["-e", "e0", "--logits", "topk"], "--logits"),
])
def test_bad_options_exit_2_naming_the_option(argv, flag, tiny, tmp_path, capsys):
    base = ["record", "-q", "-o", str(tmp_path / "x.h5")]
    if "--checkpoint" not in argv:
        base += ["--checkpoint", str(tiny)]
    if "--new-tokens" not in argv and "-e" not in argv:
        base += ["--new-tokens", "8"]
    assert main(base + argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("moe-inspector record: error: ")
    assert flag in err
    assert "Traceback" not in err
    assert not (tmp_path / "x.h5").exists()


def test_unparsable_numbers_exit_2_through_argparse(capsys):
    assert main(["record", "-n", "thirty"]) == 2
    err = capsys.readouterr().err
    assert err == "moe-inspector record: error: -n/--compositions expects a whole number, got 'thirty'\n"


def test_e0_batch_invariant_kernels_give_one_class(tiny, pool, tmp_path):
    models = load_models(tiny, None, False, torch.device("cpu"), want_dense=False)
    result = run_e0(settings(tmp_path, "e0", batch_sizes=(1, 2, 3, 17)), models, pool)
    assert result.invariant
    assert all(len(s.classes["batch_invariant"]) == 1 for s in result.shapes)
    with open_trace(tmp_path / "e0.h5") as trace:
        columns, _ = trace.read_table("e0_kernel_classes")
    assert set(columns["kernel_mode"].tolist()) == {"native", "batch_invariant"}
    # Where fp32 F.linear gives a row other bits at batch size 1 than at 2 or more, E0 must see it.
    skip_unless_native_varies(models.moe, sizes=(2, 3, 17))
    assert any(len(s.classes["native"]) > 1 for s in result.shapes)


def test_e3_more_capacity_never_drops_more_of_the_same_batch_at_prefill(tiny, pool, tmp_path):
    models = load_models(tiny, None, False, torch.device("cpu"), want_dense=False)
    s = settings(tmp_path, "e3", batch_sizes=(1, 4), capacity_factors=(1.0, 2.0),
                 priorities=("kmajor_position",), new_tokens=(6,))
    result = run_e3(s, models, pool)
    assert len(result.cells) == 2 * 1 * 2 * 2  # cf x B x priority x row x partners (1 random draw)
    crowd = {(c.cf, c.row): c for c in result.cells if c.partners == "crowding"}
    for row in ("first", "last"):
        # Same batch, same order: slots do not depend on C, so a larger C keeps a superset.
        assert crowd[(2.0, row)].probe.prefill_dropped <= crowd[(1.0, row)].probe.prefill_dropped
        assert crowd[(2.0, row)].batch.prefill_dropped <= crowd[(1.0, row)].batch.prefill_dropped
    assert "Batch size 1 left out" in result.table()


def test_e4_batch_invariant_kernels_leave_every_bit_of_the_probe_alone(tiny, pool, tmp_path):
    models = load_models(tiny, None, False, torch.device("cpu"), want_dense=False)
    s = settings(tmp_path, "e4", compositions=2, batch_sizes=(1, 2, 5), new_tokens=(6,),
                 kernel_modes=("native", "batch_invariant"))
    result = run_e4(s, models, pool)
    by = {(r.batch_size, r.kernel_mode): r for r in result.sizes}
    assert by[(1, "native")].bitwise_equal == 1  # the same batch twice: bitwise the same
    for B in (2, 5):
        assert by[(B, "batch_invariant")].bitwise_equal == 2
    assert result.unique["batch_invariant"][0] == 1
    # Where fp32 F.linear rounds a row differently at batch size 1 than at 2 and 5, E4 must see it.
    skip_unless_native_varies(models.moe, sizes=(2, 5))
    for B in (2, 5):
        assert by[(B, "native")].bitwise_equal == 0


def test_e7_reports_ratios_against_the_baseline(tiny, pool, tmp_path):
    models = load_models(tiny, None, False, torch.device("cpu"), want_dense=False)
    result = run_e7(settings(tmp_path, "e7", compositions=1, batch_sizes=(3,), new_tokens=(4,), repeats=2),
                    models, pool)
    assert result.ratios(result.conditions[0].name) == [1.0, 1.0]
    assert all(r > 0 for c in result.conditions for r in result.ratios(c.name))
    assert "batch-invariant kernels" in result.table()


def test_example_records_the_main_condition_and_every_control(tiny, pool, tmp_path):
    models = load_models(tiny, None, False, torch.device("cpu"), want_dense=False)
    s = settings(tmp_path, "example", compositions=3, new_tokens=(5,))
    result = run_example(s, models, pool)
    with open_trace(s.output) as trace:
        conditions = [trace.run(n).attrs["condition"] for n in trace.run_names]
    # alone, main, 4 controls (cf 1.25, dropless, batch_invariant per batch and per sequence)
    assert len(conditions) == 1 + 3 + 3 * 4
    assert conditions.count("MoE gshard cf=1.0 per sequence, pads not counted, batch_invariant") == 3
    assert result.rows[0][0].startswith("probe alone")


# ---- pure helpers ---------------------------------------------------------------------------------


def test_parse_int_list_reads_ranges_and_lists():
    assert parse_int_list("--x", "1-3, 8,2") == (1, 2, 3, 8)
    with pytest.raises(ExperimentError, match="--x"):
        parse_int_list("--x", "1-")


def test_random_compositions_are_seeded_distinct_and_hold_the_probe():
    a = random_compositions(3, 20, 10, [1, 2, 3, 4])
    assert a == random_compositions(3, 20, 10, [1, 2, 3, 4])
    assert a != random_compositions(4, 20, 10, [1, 2, 3, 4])
    assert len(set(a)) == 20
    for comp in a:
        assert comp.requests[comp.probe_row] == 0
        assert 0 not in comp.requests[: comp.probe_row] + comp.requests[comp.probe_row + 1:]
    with pytest.raises(ExperimentError, match="-n/--compositions"):
        random_compositions(0, 5, 1, [2])  # only 2 distinct: probe first or second


def test_place_and_solo():
    assert place(1, [4, 5]) == Composition((4, 0, 5), 1)
    assert solo().label == "B=1, probe in row 0, alone"


def test_crowding_order_ranks_partners_by_overlap_with_the_probes_experts():
    probe = np.array([[5, 5, 0, 0]])  # [L=1, E=4]: the probe uses experts 0 and 1
    partners = np.array([[[0, 0, 5, 5]], [[5, 5, 0, 0]], [[2, 2, 3, 3]]])  # [P, L, E]
    assert crowding_order(probe, partners).tolist() == [1, 2, 0]


def test_read_partners_skips_header_comments_and_keeps_indentation_and_code_comments(tmp_path):
    f = tmp_path / "p.txt"
    f.write_text("# header\n\n  # indented header\n    return self.\n# Compute the mean\nimport os\n",
                 encoding="utf-8")
    # '#' marks a comment only before the first prompt: a prompt of code may start with it
    assert read_partners(f) == ["    return self.", "# Compute the mean", "import os"]
    (tmp_path / "empty.txt").write_text("# nothing\n", encoding="utf-8")
    with pytest.raises(ExperimentError, match="--partners: .* holds no prompts"):
        read_partners(tmp_path / "empty.txt")
    with pytest.raises(ExperimentError, match="--partners: file .* not found"):
        read_partners(tmp_path / "missing.txt")


def test_read_probes_keeps_each_probe_once_and_code_comment_probes(tmp_path):
    f = tmp_path / "probes.txt"
    f.write_text("# probes\nThe result is\n# The result is\nThe result is\n", encoding="utf-8")
    assert options.read_probes(f) == ("The result is", "# The result is")


def test_unique_completions_count_an_early_eos_as_its_own_completion():
    P = 2
    rows = [np.array([1, 2, 10, 11, 12]), np.array([1, 2, 10, 11, 12]), np.array([1, 2, 10, EOS, MISSING])]
    assert completion_matrix(rows, P, 3).tolist() == [[10, 11, 12], [10, 11, 12], [10, EOS, MISSING]]
    u = unique_completions(rows, P, 3)
    assert (u.n_unique, u.mode_count) == (2, 2)
    assert unique_completions(rows, P, 1).n_unique == 1


def test_drop_counts_split_prefill_and_decode():
    step = np.array([[0, 0, 1, 2]])  # [B=1, T=4]
    expert = np.array([[[[0, 1], [2, 3], [0, 2], [-1, -1]]]])  # [L=1, B, T, K]
    kept = np.array([[[[True, False], [True, True], [False, False], [False, False]]]])
    d = drop_counts(step, expert, kept)
    assert (d.prefill_chosen, d.prefill_dropped, d.decode_chosen, d.decode_dropped) == (4, 1, 2, 2)
    assert d.decode_share == 1.0 and d.prefill_share == 0.25


def test_progress_bar_writes_plain_lines_off_a_terminal():
    import io

    stream = io.StringIO()
    bar = ProgressBar(stream, width=10, clock=iter(range(100)).__next__)
    for done in range(1, 21):
        bar(done, 20, f"run {done}")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 11  # the first run, then one line per tenth of the work
    assert lines[-1].startswith("[##########] 20/20")


def test_dropless_condition_never_drops(tiny, pool):
    model, _ = load_checkpoint(tiny)
    recorder = Recorder()
    result = generate_batch(model, pool, Composition((0, 1, 2, 3, 4, 5), 0), dropless("native"), 4, recorder)
    arrays = recorder.arrays(result)
    d = drop_counts(arrays["step"], arrays["routing/expert"], arrays["routing/kept"])
    assert d.prefill_chosen > 0 and d.prefill_dropped == 0 and d.decode_dropped == 0


# ---- statistics over probes, controls and floors -------------------------------------------------


def test_e1_runs_each_probe_into_its_own_trace_and_pools_them_with_intervals(tiny, pool, tmp_path):
    models = load_models(tiny, None, False, torch.device("cpu"), want_dense=False)
    probes = (options.DEFAULT_PROBE, "import os", "x = [1, 2, 3]")
    s = settings(tmp_path, "e1", compositions=3, batch_sizes=(2, 3), capacity_factors=(0.5,),
                 kernel_modes=("native",), new_tokens=(4, 8), repeats=2, probes=probes,
                 min_capacities=(0, 4))
    result = run_e1(s, models, pool)
    names = [c.name for c in result.conditions]
    assert names == ["MoE dropless, native", "MoE gshard cf=0.5 per batch, native",
                     "MoE gshard cf=0.5 per batch, floor 4, native",
                     "MoE gshard cf=0.5 per sequence, pads not counted, native"]
    assert result.paths == [tmp_path / "e1.h5", tmp_path / "e1-probe2.h5", tmp_path / "e1-probe3.h5"]
    for i, path in enumerate(result.paths):
        with open_trace(path) as trace:
            assert trace.requests.text[0] == probes[i]
            assert len(trace.run_names) == 2 * 3 * len(names)
            columns, attrs = trace.read_table("e1_unique_completions")
            assert attrs["probe"] == probes[i] and len(columns["unique"]) == len(names) * 2 * 2
    for c in result.conditions:
        assert sorted(c.cells) == [(p, r) for p in range(3) for r in range(2)]
        for n in (4, 8):
            lo, hi = c.interval(n)
            assert lo <= np.mean(c.unique[n]) <= hi
            assert set(c.by_probe(n)) == {0, 1, 2}
    dropless_row = result.conditions[0]
    assert all(u == 1 for u in dropless_row.unique[8]) and dropless_row.interval(8) == (1.0, 1.0)
    table = result.table()
    assert "3 probes" in table and "bootstrap 95% interval" in table and "U per probe" in table


def test_bootstrap_interval_spans_the_spread_and_needs_two_values():
    from lab.experiments.measures import bootstrap_interval

    assert bootstrap_interval({0: [5]}) is None
    assert bootstrap_interval({0: [3, 3], 1: [3]}) == (3.0, 3.0)
    narrow = bootstrap_interval({0: [10, 11], 1: [10, 11], 2: [11, 10]})
    wide = bootstrap_interval({0: [1, 2], 1: [20, 21], 2: [10, 12]})
    assert wide[1] - wide[0] > narrow[1] - narrow[0]
    assert 1 <= wide[0] <= wide[1] <= 21
    assert bootstrap_interval({0: [1, 2], 1: [20, 21]}) == bootstrap_interval({0: [1, 2], 1: [20, 21]})


def test_e3_sweeps_the_capacity_floor(tiny, pool, tmp_path):
    models = load_models(tiny, None, False, torch.device("cpu"), want_dense=False)
    s = settings(tmp_path, "e3", batch_sizes=(4,), capacity_factors=(0.5,), priorities=("kmajor_position",),
                 new_tokens=(6,), min_capacities=(0, 4))
    result = run_e3(s, models, pool)
    crowd = {(c.min_capacity, c.row): c for c in result.cells if c.partners == "crowding"}
    for row in ("first", "last"):
        # the same batch with a floor: capacity only grows, so slots kept before stay kept
        assert crowd[(4, row)].batch.decode_dropped <= crowd[(0, row)].batch.decode_dropped
    assert "floor" in result.table()


def test_quality_experiment_scores_every_condition_on_the_same_windows(tiny, pool, tmp_path):
    from lab.experiments.quality import run_quality

    models = load_models(tiny, None, False, torch.device("cpu"), want_dense=False)
    s = settings(tmp_path, "quality", compositions=1, batch_sizes=(4,), capacity_factors=(0.5,),
                 min_capacities=(0, 4), new_tokens=(8,))
    result = run_quality(s, models, pool)
    names = [r.condition.name for r in result.rows]
    assert names[0] == "MoE dropless, native" and len(names) == 4
    assert all(r.result.decode_bytes == 4 * 8 for r in result.rows)
    assert result.rows[-1].result.decode_dropped == 0  # per-sequence decode
    with open_trace(s.output) as trace:
        columns, attrs = trace.read_table("quality_bits_per_byte")
    assert list(columns["condition"]) == names and attrs["batch_size"] == 4
    assert not [p for p in validate(s.output) if p.severity == "error"]
    assert "vs dropless" in result.table()


def test_probes_file_and_floor_options(tmp_path):
    probes = tmp_path / "probes.txt"
    probes.write_text("# two probes\nfirst probe\n\nsecond probe\nfirst probe\n", encoding="utf-8")
    s = options.resolve(args_for("-e", "e1", "--probes", str(probes), "--min-capacities", "0,4"),
                        ("gshard",), ("kmajor_position",))
    assert s.all_probes == ("first probe", "second probe") and s.probe == "first probe"
    assert s.min_capacities == (0, 4)
    assert options.resolve(args_for("-e", "e1"), ("gshard",), ()).all_probes == (options.DEFAULT_PROBE,)
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n", encoding="utf-8")
    for argv, message in ((["--probes", str(empty)], "holds no prompts"),
                          (["--probes", str(tmp_path / "absent.txt")], "absent.txt not found"),
                          (["--probes", str(probes), "--probe", "other"], "not both"),
                          (["-e", "e4", "--probes", str(probes)], "does not apply"),
                          (["-e", "e7", "--min-capacities", "4"], "does not apply"),
                          (["--min-capacities", "-1"], "--min-capacities")):
        with pytest.raises(ExperimentError, match=message):
            options.resolve(args_for(*argv), ("gshard",), ("kmajor_position",))


def test_shipped_probes_file_is_read_and_distinct_from_the_partners():
    probes = options.read_probes(options.DEFAULT_PROBES)
    assert len(probes) >= 5 and probes[0] == options.DEFAULT_PROBE
    assert not set(probes) & set(read_partners(DEFAULT_PARTNERS))


def test_continuous_batching_admits_rows_while_the_probe_decodes(tiny, pool, tmp_path):
    from lab.experiments.continuous import run_continuous

    models = load_models(tiny, None, False, torch.device("cpu"), want_dense=False)
    s = settings(tmp_path, "continuous", compositions=2, batch_sizes=(1, 6), new_tokens=(8,),
                 capacity_factors=(0.5,), min_capacities=(0,))
    result = run_continuous(s, models, pool)
    by = {(c.condition, c.batch_size): c for c in result.cells}
    assert len(by) == 2 * 3  # dropless, cf per batch, per sequence; two sizes
    assert all(c.concurrency == [0.0, 0.0] for (_, B), c in by.items() if B == 1)
    with open_trace(s.output) as trace:
        assert len(trace.run_names) == 1 + 2 * 2 * 3
        late = [n for n in trace.run_names if n.startswith("B06")]
        firsts = [np.asarray(trace.run(n).step[:, 0]) for n in late]
    assert any(f.max() > 0 for f in firsts)  # some row was prefilled in a later step than the first
    per_sequence = by[("MoE gshard cf=0.5 per sequence, pads not counted, native", 6)]
    assert per_sequence.drops.decode_chosen > 0 and per_sequence.drops.decode_dropped == 0
    assert not [p for p in validate(s.output) if p.severity == "error"]
    assert "rows beside the probe" in result.table()


def test_explain_reruns_a_continuous_batch_with_its_arrivals(tiny, pool, tmp_path):
    from lab.counterfactual.reruns import Reruns
    from lab.experiments.continuous import run_continuous

    models = load_models(tiny, None, False, torch.device("cpu"), want_dense=False)
    s = settings(tmp_path, "continuous", compositions=1, batch_sizes=(5,), new_tokens=(6,),
                 capacity_factors=(0.5,), min_capacities=(0,))
    run_continuous(s, models, pool)
    with open_trace(s.output) as trace:
        reruns = Reruns(trace, models.moe)
        name = next(n for n in trace.run_names if n.startswith("B05"))
        assert reruns.settings(name).arrivals == np.asarray(trace.run(name).step[:, 0]).tolist()
        assert reruns.reproduction(name).level == "bitwise"
