"""One rule picks the reference run: the run browser, the runs view's export and `explain`'s pairs
agree on it for every request and condition of a shipped trace."""


from dataclasses import replace

from paths import EXAMPLE

from inspector.figure_data.browser import default_references, run_info
from inspector.specs.divergence import read_runs
from inspector.specs.selection import Selection
from lab.counterfactual.pairs import plan_groups
from traces import open_trace
from traces.analysis.reference import condition_of, reference_index
from traces.analysis.reference import default_references as first_runs
from traces.records import RunAttrs


def test_the_rule_by_hand():
    run = RunAttrs(request_ids=(0,), batch_size=1, max_new_tokens=1, condition="dropless")
    assert condition_of(run) == "dropless"
    assert condition_of(replace(run, condition="", routing={"b": 1, "a": 2})) == \
        'routing {"a": 2, "b": 1}, native'
    # A run without the attributes (an older trace) reads with the record's defaults.
    assert condition_of(RunAttrs.from_attrs({"request_ids": (0,), "batch_size": 1})) == "routing {}, native"
    runs = [("r0", 7, "c"), ("r1", 7, "d"), ("r2", 7, "c"), ("r3", 8, "c")]
    assert first_runs(runs) == {"r0": "r0", "r1": "r1", "r2": "r0", "r3": "r3"}
    assert reference_index(["a", "b", "c"]) == 0
    assert reference_index(["a", "b", "c"], None, "x", "c", "b") == 2


def test_browser_export_and_explain_pick_the_same_reference():
    with open_trace(EXAMPLE) as trace:
        infos = [run_info(trace.run(name)) for name in trace.run_names]
        browser = default_references(infos)
        groups = plan_groups(trace)
        assert groups
        focus = {i.name: i.focus_request for i in infos}
        for group in groups:
            ref, _ = group.reference
            for name, _ in group.members:
                if focus[name] == group.request:   # the browser shows each run's focus request
                    assert browser[name] == ref
        probe = [g for g in groups if all(focus[n] == g.request for n, _ in g.members)]
        assert probe
        for group in probe[:2]:
            data = read_runs(trace, Selection(request=group.request, condition=group.condition))
            assert data.reference_run == group.reference[0]
