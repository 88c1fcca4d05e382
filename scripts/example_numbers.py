"""The shipped examples' explanation numbers in the docs, written from their stored tables.

    python scripts/example_numbers.py           # rewrite every block between the markers
    python scripts/example_numbers.py --check   # exit 1 when a block differs

A block is `<!-- numbers: NAME -->` ... `<!-- /numbers -->` in README.md or traces/examples/README.md;
it states what `moe-inspector explain` stored for traces/examples/NAME (how many pairs are proven,
by what, their root events, alternatives, specificity and chains), so the prose cannot go stale:
tests/test_example_numbers.py runs the check.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.counterfactual import TABLE  # noqa: E402
from traces import open_trace  # noqa: E402
from traces.analysis.explain_table import from_columns  # noqa: E402
from traces.analysis.root_summary import map_summary  # noqa: E402

EXAMPLES = ROOT / "traces" / "examples"
DOCS = (ROOT / "README.md", EXAMPLES / "README.md")
BLOCK = re.compile(r"<!-- numbers: (?P<name>[\w.-]+) -->\n.*?<!-- /numbers -->", re.S)


def numbers(path: Path) -> str:
    """The lines: proofs and causal maps of the trace's stored explanation table."""
    with open_trace(path) as trace:
        columns, _ = trace.read_table(TABLE)
    records = from_columns(columns)
    divergent = [r for r in records if r.diverged]
    proven = [r for r in divergent if r.proven]
    single = sum(1 for r in proven if r.proof_size == 1)
    sets = sorted(r.proof_size for r in proven if r.proof_size > 1)
    causes: dict[str, int] = {}
    for r in divergent:
        causes[r.confirmed_cause or "not explained"] = causes.get(r.confirmed_cause or "not explained", 0) + 1
    said = ", ".join(f"{n} `{cause}`" for cause, n in sorted(causes.items(), key=lambda kv: -kv[1]))
    at_first = sum(1 for r in proven if (r.proof_position, r.proof_layer) == (r.position, r.layer))
    necessary = sum(1 for r in proven if r.necessary)
    whole = sum(1 for r in proven if r.reach_of >= 0 and r.reach >= r.reach_of)
    sizes = f"{sets[0]}-{sets[-1]}" if sets and sets[0] != sets[-1] else str(sets[0]) if sets else ""
    set_text = f" and {len(sets)} by a 1-minimal set of {sizes} events" if sets else ""
    lines = [
        f"Of {len(divergent)} divergent pairs: {said}. {len(proven)} are proven: {single} by a single "
        f"event{set_text}; {at_first} at the first difference; {necessary} also necessary; {whole} "
        f"restore the whole completion alone.",
        map_summary(divergent).describe(),
    ]
    return "\n".join(line for line in lines if line)


def filled(text: str) -> str:
    """`text` with every block rewritten from its trace."""
    def fill(match: re.Match) -> str:
        name = match["name"]
        return f"<!-- numbers: {name} -->\n{numbers(EXAMPLES / name)}\n<!-- /numbers -->"

    return BLOCK.sub(fill, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a block differs")
    args = parser.parse_args(argv)
    stale = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        new = filled(text)
        if new != text:
            stale.append(doc.relative_to(ROOT))
            if not args.check:
                doc.write_text(new, encoding="utf-8")
    if args.check and stale:
        print(f"{', '.join(map(str, stale))}: the example numbers differ from the stored tables; run "
              f"python scripts/example_numbers.py", file=sys.stderr)
        return 1
    for doc in stale:
        print(f"wrote {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
