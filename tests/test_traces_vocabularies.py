"""The closed vocabularies (causes, mechanisms, proof, event and difference kinds, reproduction levels,
engines, kernel modes) are `str` enums: their members are the spellings on disk, every table of words
covers every member, their names are spelled nowhere but in the module that declares them, and no
value of theirs is compared with a literal."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import re
from pathlib import Path

import h5py
import numpy as np
import pytest

from model.engines import EngineName
from traces.analysis.cause_table import CAUSE_TABLE, CauseName, Mechanism, colour, meaning
from traces.analysis.explain_table import ExplainRecord, from_columns, to_columns
from traces.analysis.proof import EVENT_WORDS, ROUTER_EVENTS, EventKind, ProofKind, proof_sentence
from traces.analysis.reproduction import Level
from traces.analysis.verdict_record import DIFFERENCE_KINDS, KIND_WORDS, DifferenceKind
from traces.records import KernelMode
from traces.vocabulary import Vocabulary
from traces.writer import _attr_value

ROOT = Path(__file__).resolve().parents[1]
VOCABULARIES = (CauseName, Mechanism, ProofKind, EventKind, DifferenceKind, Level, EngineName, KernelMode)


@pytest.mark.parametrize("vocabulary", VOCABULARIES, ids=lambda v: v.__name__)
def test_members_are_their_spelling_in_text_json_numpy_and_hdf5(vocabulary, tmp_path):
    members = list(vocabulary)
    for m in members:
        assert isinstance(m, str) and str(m) == f"{m}" == m.value and f"{m:>3}" == f"{m.value:>3}"
        assert vocabulary(m.value) is m and vocabulary.read(m.value) is m and m == m.value
    assert json.loads(json.dumps(members)) == [m.value for m in members]
    column = np.array(members, dtype=np.str_)
    assert column.tolist() == list(vocabulary.names())
    with h5py.File(tmp_path / "v.h5", "w") as f:
        for i, m in enumerate(members):
            f.attrs[f"m{i}"] = _attr_value(f"m{i}", m)   # as the trace writer stores an attribute
        f.create_dataset("column", data=column.astype(h5py.string_dtype()))
    with h5py.File(tmp_path / "v.h5", "r") as f:
        read = [f.attrs[f"m{i}"] for i in range(len(members))]
        stored = [x.decode() for x in f["column"][()]]
    assert [vocabulary(x) for x in read] == [vocabulary(x) for x in stored] == members


def test_a_new_vocabulary_is_one_subclass():
    class Colour(Vocabulary):
        RED = "red"
        DARK_BLUE = "dark-blue"

    assert Colour.names() == ("red", "dark-blue") and f"{Colour.DARK_BLUE}!" == "dark-blue!"
    assert Colour.read("green", None) is None
    with pytest.raises(ValueError):
        Colour.read("green")


def test_a_level_is_not_a_cause():
    # Spelled alike on disk (a pair whose runs were not reproduced gets the cause of that name), but
    # two members of two vocabularies.
    assert Level.NOT_REPRODUCED is not CauseName.NOT_REPRODUCED
    assert not isinstance(Level.NOT_REPRODUCED, CauseName) and not isinstance(CauseName.NOT_REPRODUCED, Level)
    assert {type(m) for m in Level} == {Level}


def test_intervention_spellings_read_as_event_kinds():
    assert EventKind("remove_rows") is EventKind.WITHDRAW
    assert EventKind.read("router_logits") is EventKind.LOGITS
    (back,) = from_columns(to_columns([_record(cause=CauseName.CAPACITY, proof_how="remove_rows")]))
    assert back.proof_how is EventKind.WITHDRAW and back.cause == CauseName.CAPACITY
    (kept,) = from_columns(to_columns([_record(proof_how="a_later_kind")]))   # a newer table's word
    assert kept.proof_how == "a_later_kind"


def _record(**given) -> ExplainRecord:
    blank = {"str": "", "int": 0, "float": 0.0, "bool": False, "bool | None": None}
    fields = dataclasses.fields(ExplainRecord)
    return ExplainRecord(**{f.name: given.get(f.name, blank[f.type]) for f in fields})


def test_every_member_has_its_words():
    # A member added to a vocabulary without its words fails here (and a cause without its row in the
    # cause table fails on import): the words are keyed by the enum, never by a copy of its names.
    assert list(CAUSE_TABLE) == list(CauseName)
    for name, cause in CAUSE_TABLE.items():
        assert cause.name is name and isinstance(cause.kind, Mechanism)
        assert meaning(name) and re.fullmatch(r"#[0-9a-f]{6}", colour(name))
    assert set(EVENT_WORDS) == set(EventKind) and set(KIND_WORDS) == set(DifferenceKind)
    assert tuple(DifferenceKind) == DIFFERENCE_KINDS
    assert tuple(k for k in EventKind if k.changes_router) == ROUTER_EVENTS
    for how in EventKind:
        sentence = proof_sentence("an edit", 1, ProofKind.CAPACITY, 9, 2, "b", "a", how)
        assert f"({EVENT_WORDS[how]})" in sentence and "makes run b give run a's tokens" in sentence
    for kind in ProofKind:
        assert kind.cause in CAUSE_TABLE


def test_every_engine_is_a_choice_of_record():
    from lab.experiments.cli import add_arguments
    from lab.experiments.engine import ENGINES

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    action = next(a for a in parser._actions if "--engine" in a.option_strings)
    assert tuple(action.choices) == ENGINES == EngineName.names() and action.default == EngineName.PROJECT
    assert [e.serving for e in EngineName] == [False, True, True]


# -- the names are spelled once -----------------------------------------------------------------------

#: The modules that declare a vocabulary (they spell its names).
DECLARING = {"traces/vocabulary.py", "traces/analysis/cause_table.py", "traces/analysis/proof.py",
             "traces/analysis/reproduction.py", "traces/analysis/verdict_record.py", "model/engines.py"}

#: Names that are also the words of the trace format (the `logits` and `capacity` datasets, CSV
#: columns, routing attributes): spelled freely, but never compared with a cause, event or engine.
SHARED_WITH_THE_FORMAT = {"logits", "capacity"}

#: The names policed: causes, events (with the interventions' old spelling) and engines.
POLICED = {*CauseName.names(), *EventKind.names(), "remove_rows", *EngineName.names()}
POLICED -= SHARED_WITH_THE_FORMAT

#: Literals equal to a policed name that mean something else, with how often each file spells them.
#: A new one is either a vocabulary member (use the enum) or another word that happens to be spelled
#: alike (add it here, with what it is).
OTHER_WORDS = {
    ("inspector/figure_data/pair.py", "identical"): 1,   # a cell kind of the pair's heatmap
    ("lab/counterfactual/search.py", "cell"): 1,         # a proof's scope
    ("model/vllm/offline.py", "vllm"): 2,                # the vllm package and its logger
    ("model/vllm/server.py", "vllm"): 1,                 # the vllm package
    # The glossary's terms as a reader sees them (words, `inspector.figure_data.words.as_words`).
    ("inspector/views/glossary.py", "mixed"): 1,
    ("inspector/views/glossary.py", "renormalization"): 1,
    ("inspector/views/glossary.py", "unconfirmed"): 1,
    ("inspector/views/glossary.py", "unexplained"): 1,
}

#: Names whose value is a cause, event, engine or level: never compared with a literal but ''.
_VOCABULARY_NAME = re.compile(r"(^|_)(cause|how|engine|level|reproduction|proof_kind|first_kind|guess)$")
#: Names that may hold a kernel mode (or another mode): never compared with a kernel mode's spelling.
_MODE_NAME = re.compile(r"(^|_)modes?$")


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, nodes) and n.body and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)}


def _last_name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _last_name(node.func)
    return ""


def _named(node: ast.AST, pattern: re.Pattern = _VOCABULARY_NAME) -> bool:
    """Whether `node`, or an element of a tuple, list or set it is, has a name that `pattern` matches."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_named(e, pattern) for e in node.elts)
    return bool(pattern.search(_last_name(node)))


def _literals(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [v for e in node.elts for v in _literals(e)]
    return []


def spelled_names(source: str) -> tuple[list[str], list[str]]:
    """(policed names spelled as string literals, comparisons of a vocabulary-valued name with a
    literal, or of a mode with a kernel mode's spelling) in `source`; docstrings and comments do not
    count."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    spelled = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
               and id(n) not in docs and n.value in POLICED]
    compared = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare):
            sides = [n.left, *n.comparators]
            literals = [v for s in sides for v in _literals(s)]
            if any(_named(s) for s in sides) and any(literals) or \
                    any(_named(s, _MODE_NAME) for s in sides) and set(literals) & set(KernelMode.names()):
                compared.append(ast.unparse(n))
    return spelled, compared


def test_the_check_catches_a_spelled_name_and_a_compared_literal():
    source = ('"""capacity in a docstring"""\n'
              '# "capacity" in a comment\n'
              'if v.cause == "capacity_drop" or e.how in ("keep",):\n'
              '    engine = "vllm"\n'
              'if record.confirmed_cause == "" and v.cause == CauseName.CAPACITY:\n'
              '    pass\n'
              'if mode == "batch_invariant" or "native" in (a.kernel_mode, b.kernel_mode):\n'
              '    pass\n'
              'if run.kernel_mode == KernelMode.NATIVE and mode != "" and marker_mode == "cross":\n'
              '    pass\n')
    spelled, compared = spelled_names(source)
    assert sorted(spelled) == ["keep", "vllm"]
    assert sorted(compared) == ["'native' in (a.kernel_mode, b.kernel_mode)", "e.how in ('keep',)",
                                "mode == 'batch_invariant'", "v.cause == 'capacity_drop'"]


def test_no_cause_event_or_engine_name_is_spelled_outside_its_vocabulary():
    counts: dict[tuple[str, str], int] = {}
    compared = []
    for package in ("inspector", "lab", "traces", "model"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            names, comparisons = spelled_names(path.read_text(encoding="utf-8"))
            compared += [f"{rel}: {c}" for c in comparisons]
            if rel in DECLARING:
                continue
            for name in names:
                counts[(rel, name)] = counts.get((rel, name), 0) + 1
    assert compared == [], "compare with the vocabulary's members, not with literals"
    spelled = {key: n for key, n in counts.items() if OTHER_WORDS.get(key) != n}
    assert spelled == {}, ("spell a cause, event or engine with its enum (CauseName, EventKind, EngineName); "
                           "a word that only looks alike goes into OTHER_WORDS")


def test_a_cause_added_as_one_row_reaches_the_summaries_meaning_and_colour(monkeypatch):
    """What docs/api.md "Adding a cause" promises: the row (with its `CauseName` member, here a plain
    spelling, as an enum cannot grow at run time) is all the summaries, the unexplained share, the
    meaning and the colour read."""
    from traces.analysis import cause_table
    from traces.analysis.summary import summarize_causes

    row = cause_table.Cause("cosmic_ray", "a bit of the router's input flipped",
                            cause_table.Mechanism.NUMERIC, "#123456", explained=False, observed=True)
    monkeypatch.setitem(cause_table.CAUSE_TABLE, "cosmic_ray", row)
    assert cause_table.meaning("cosmic_ray") == "a bit of the router's input flipped"
    assert cause_table.colour("cosmic_ray") == "#123456"
    assert "cosmic_ray" in cause_table.first_difference_causes() and "cosmic_ray" in cause_table.unexplained()
    assert "cosmic_ray" in cause_table.router_numeric()
    summary = summarize_causes(["cosmic_ray", "capacity", "identical"], [True, True, False])
    assert summary.counts["cosmic_ray"] == 1
    assert summary.unexplained_share == 0.5
    assert "cosmic_ray 1 (50%)" in summary.describe()
