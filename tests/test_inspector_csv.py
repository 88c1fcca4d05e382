"""Every CSV `moe-inspector export` writes, read back as a reader would: parsed with the csv module,
every field of the type its column declares (integers as digits, booleans `true`/`false`, numbers
finite), empty only in a column that says when, and the header the very column list docs/export.md
gives. On the two shipped examples, a synthetic trace and a serving engine's runs (the arrays the
vLLM adapter writes: no router logits, gates or slots, no next-token logits for the prompt), whose
missing values are empty fields with `not_recorded` saying why, never 0."""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path

import numpy as np
import pytest
from engine_trace import PROMPT, write_engine_trace
from paths import EXAMPLES, ROOT

from inspector.cli import main
from inspector.export.csv import DOC_MARKERS, columns_markdown, csv_text, doc_columns
from inspector.figure_data.table import BOOLEAN, INTEGER, NUMBER, TEXT, Column, Table, TableError, missing
from inspector.specs.registry import SPECS

DOC = ROOT / "docs" / "export.md"

# -- reading the CSVs back --------------------------------------------------------------------------

TRACES = ("example", "tiny-mixtral-bf16", "synthetic", "engine")
#: The traces whose explanation tables hold causal maps (the shipped examples, explained).
MAPPED = ("example", "tiny-mixtral-bf16")


@pytest.fixture(scope="module")
def traces(trace_path, tmp_path_factory) -> dict[str, Path]:
    return {"example": EXAMPLES / "example.h5", "tiny-mixtral-bf16": EXAMPLES / "tiny-mixtral-bf16.h5",
            "synthetic": trace_path, "engine": write_engine_trace(tmp_path_factory.mktemp("engine") / "e.h5")}


@pytest.fixture(scope="module")
def exported(traces, tmp_path_factory) -> dict[tuple[str, str], Path]:
    """Every view of every trace as `export` writes it with no option (the most telling data)."""
    out = tmp_path_factory.mktemp("csv")
    paths = {}
    for name, trace in traces.items():
        for view in SPECS:
            path = out / f"{name}-{view}.csv"
            assert main(["export", str(trace), "--view", view, "-o", str(path)]) == 0, (name, view)
            paths[name, view] = path
    return paths


def read(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, strict=True))
    return rows[0], [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]


def documented() -> dict[str, list[tuple[str, str, str]]]:
    """(column, type, empty when) of each view, as docs/export.md lists them."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    view = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        heading = re.fullmatch(r"### `--view (\w+)`", line)
        if heading:
            view = heading[1]
            out[view] = []
        elif view and line.startswith("| `"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            out[view].append((cells[0].strip("`"), cells[1], cells[4]))
    return out


def is_of_type(text: str, kind: str) -> bool:
    if kind == INTEGER:
        return re.fullmatch(r"-?[0-9]+", text) is not None
    if kind == NUMBER:
        try:
            return math.isfinite(float(text)) and re.fullmatch(r"[-+0-9.e]+", text) is not None
        except ValueError:
            return False
    if kind == BOOLEAN:
        return text in ("true", "false")
    return kind == TEXT


@pytest.mark.parametrize("trace", TRACES)
@pytest.mark.parametrize("view", list(SPECS))
def test_every_field_is_of_its_documented_type(exported, trace, view):
    header, rows = read(exported[trace, view])
    listed = documented()[view]
    assert header == [name for name, _, _ in listed] == [c.name for c in SPECS[view].columns.columns]
    if view == "causal_map" and trace not in MAPPED:  # only `explain` stores maps: these hold none
        assert rows == []
        return
    assert rows, "a table with no row says nothing"
    for name, kind, empty in listed:
        values = [r[name] for r in rows]
        blank = [v for v in values if v == ""]
        assert not blank or empty != "never", f"{name} is empty in {len(blank)} rows but never may be"
        wrong = [v for v in values if v != "" and not is_of_type(v, kind)]
        assert not wrong, f"{name} ({kind}): {wrong[:3]}"


def test_docs_list_the_declared_columns():
    """docs/export.md's lists are the declarations, word for word (scripts/csv_columns.py writes them)."""
    text = DOC.read_text(encoding="utf-8")
    assert all(marker in text for marker in DOC_MARKERS)
    assert doc_columns(text) == columns_markdown(SPECS)


def test_a_fully_recorded_trace_leaves_nothing_unrecorded(exported):
    for view in ("routing", "pair", "text"):
        _, rows = read(exported["example", view])
        assert {r["not_recorded"] for r in rows} == {""}, view
    _, rows = read(exported["example", "routing"])
    assert all(r["probability"] != "" for r in rows)
    assert all((r["gate"] == "") == (r["choice"] == "") for r in rows)


def test_an_engine_trace_leaves_what_it_did_not_record_empty(exported, traces):
    _, rows = read(exported["engine", "routing"])
    assert {r["probability"] for r in rows} == {""} and {r["gate"] for r in rows} == {""}
    assert {r["slot"] for r in rows} == {""} and {r["capacity"] for r in rows} == {""}
    assert {r["dropless"] for r in rows} == {"true"}
    chosen = [r for r in rows if r["choice"]]
    assert chosen and {r["not_recorded"] for r in chosen} == {
        "routing/router_logits routing/gate routing/slot"}
    assert {r["not_recorded"] for r in rows if not r["choice"]} == {"routing/router_logits"}
    _, rows = read(exported["engine", "text"])
    assert {r["smallest_router_margin"] for r in rows} == {""}
    assert {r["not_recorded"] for r in rows} == {"routing/router_logits"}
    _, rows = read(exported["engine", "pair"])
    assert rows[0]["run_a"] == "alone" and rows[0]["exact_logits"] == "false"
    prompt = [r for r in rows if int(r["position"]) < len(PROMPT) - 1]  # the engine gives no logits there
    assert prompt and all(r["compared"] == "true" and r["not_recorded"] == "logits" for r in prompt)
    assert all(r["kl"] == r["max_logit_difference"] == r["logit_margin_a"] == "" for r in prompt)
    recorded = [r for r in rows if r["compared"] == "true" and int(r["position"]) >= len(PROMPT) - 1]
    assert recorded and all(r["not_recorded"] == "" and r["logit_margin_a"] != "" for r in recorded)
    assert all(float(r["logit_margin_a"]) == pytest.approx(0.15) for r in recorded)


def test_the_cause_is_fields_that_read_back_to_the_analysis(exported, traces):
    from inspector.export import Selection, read_export
    from traces import open_trace

    _, rows = read(exported["example", "pair"])
    first = rows[0]
    with open_trace(traces["example"]) as trace:
        data = read_export(trace, "pair", Selection(pair=(first["run_a"], first["run_b"]),
                                                    layer=int(first["layer"]))).data
    v, cause = data.verdict, data.cause
    assert (first["cause"], first["proven"], first["confirmed"]) == (cause.cause, "true", "true")
    assert (int(first["cause_position"]), int(first["cause_layer"])) == cause.event
    assert int(first["cause_model_layer"]) == data.cause_model_layer
    assert int(first["proof_events"]) == len(cause.cells)
    assert (int(first["first_difference_position"]), int(first["first_difference_layer"])) == \
        (v.position, v.layer)
    d = v.displacement
    assert (first["candidate_run"], int(first["candidate_expert"]), int(first["candidate_choice"]),
            int(first["candidate_slot"]), int(first["candidate_capacity"])) == \
        (d.run, d.expert, d.rank + 1, d.slot, d.capacity)
    _, rows = read(exported["example", "runs"])
    diverged = [r for r in rows if r["t_star"]]
    assert diverged and all(r["cause"] and r["proven"] in ("true", "false") for r in diverged)
    assert all(r["cause"] == r["confirmed"] == r["proven"] == "" for r in rows if not r["t_star"])
    proven = [r for r in diverged if r["proven"] == "true"]
    assert proven and all(int(r["proof_events"]) >= 1 and r["cause_position"] for r in proven)


# -- the writer -------------------------------------------------------------------------------------

COLUMNS = (Column("n", INTEGER, "a count"), Column("x", NUMBER, "a value", empty="none"))


@pytest.mark.parametrize("values, message", [
    ({"n": np.array([1, 2]), "x": np.array([0.5, np.nan])}, "where a missing value must be empty"),
    ({"n": np.array([1.0, 2.0]), "x": np.array([0.5, 1.5])}, "column n (integer) holds 1.0"),
    ({"n": missing(np.array([1, 2]), [False, True]), "x": np.array([0.5, 1.5])}, "declared never empty"),
    ({"x": np.array([0.5, 1.5]), "n": np.array([1, 2])}, "out of order"),
    ({"n": np.array([1, 2]), "x": np.array([0.5, 1.5]), "y": np.array([1, 2])}, "undeclared: y"),
])
def test_the_writer_refuses_a_table_that_breaks_its_declaration(values, message):
    with pytest.raises(TableError, match=re.escape(message)):
        csv_text(Table(COLUMNS, values))


def test_the_writer_writes_each_type_one_way():
    values = {"n": np.array([4, -1], np.int64), "x": missing(np.array([0.1, 2.0], np.float32), [False, True])}
    assert csv_text(Table(COLUMNS, values)) == "n,x\r\n4,0.1\r\n-1,\r\n"


def test_text_from_a_trace_reads_back_whatever_it_holds():
    """A run name or condition is the trace's text: line breaks, a lone carriage return, quotes,
    commas, escape sequences and NUL come back from the csv module as they went in."""
    texts = ["c\r", "a,b", 'say "hi"', "two\nlines", "\r\n", "\x1b[31mred\x00", "·↵"]
    table = Table((Column("name", TEXT, "a name"),), {"name": np.array(texts, dtype=object)})
    rows = list(csv.reader(io.StringIO(csv_text(table), newline=""), strict=True))
    assert rows == [["name"], *[[t] for t in texts]]


# -- one-line errors --------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, said", [
    (["export", "{t}", "--view", "rotuing", "-o", "{o}"],
     "--view must be one of routing, layers, load, pair, runs, compare, causal_map, text, overview, "
     "divergence, got "
     "'rotuing' (did you mean 'routing'?)"),
    (["export", "{t}", "--size", "colum", "-o", "{o}"],
     "--size must be one of column, page, slide, got 'colum' (did you mean 'column'?)"),
    (["export", "{t}", "--format", "jpg", "-o", "{o}"],
     "--format must be one of png, svg, pdf, csv, got 'jpg'"),
    (["export", "{t}", "--shade", "bright", "-o", "{o}"],
     "--shade must be one of drops, layer-drops, margin"),
    (["export", "{t}", "--layer", "two", "-o", "{o}"], "--layer expects a whole number, got 'two'"),
    (["export", "{t}", "--sise", "column", "-o", "{o}"], "unrecognized arguments: --sise column (did you "
                                                         "mean --size?)"),
    (["export", "{t}"],
     "the following arguments are required: -o/--output (see moe-inspector export --help)"),
    (["view", "--log-level", "LOUD"], "--log-level must be one of DEBUG, INFO, WARNING, ERROR, got 'LOUD'"),
    (["record", "-e", "e9"], "-e/--experiment must be one of e0, e1"),
    (["record", "--engine", "vlm"], "--engine must be one of project, vllm, vllm-server, got 'vlm'"),
    (["explain", "{t}", "--limit", "ten"], "--limit expects a whole number, got 'ten'"),
    (["info", "--bogus", "{t}"], "unrecognized arguments: --bogus (see moe-inspector info --help)"),
])
def test_a_bad_option_is_one_line_naming_the_choices(trace_path, tmp_path, capsys, argv, said):
    out = tmp_path / "x.png"
    argv = [a.format(t=trace_path, o=out) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"moe-inspector {argv[0]}: error: ") and said in err, err
    assert len(err.splitlines()) == 1 and "usage" not in err and not out.exists()
