"""Write the CSV column lists of docs/export.md from the views' declarations (the columns each
view's table declares: `inspector.figure_data.table`), between its two marker lines.

    python scripts/csv_columns.py           # rewrite docs/export.md
    python scripts/csv_columns.py --check   # exit 1 when docs/export.md differs
"""

from __future__ import annotations

import sys
from pathlib import Path

from inspector.export.csv import DOC_MARKERS, columns_markdown, doc_columns
from inspector.specs.registry import SPECS

DOC = Path(__file__).resolve().parents[1] / "docs" / "export.md"


def main(argv: list[str]) -> int:
    text = DOC.read_text(encoding="utf-8")
    start, end = DOC_MARKERS
    if start not in text or end not in text:
        print(f"{DOC}: the marker lines are missing:\n{start}\n{end}", file=sys.stderr)
        return 2
    wanted = columns_markdown(SPECS)
    if doc_columns(text) == wanted:
        return 0
    if "--check" in argv:
        print(f"{DOC}: the CSV column lists differ from the declarations (python {__file__})",
              file=sys.stderr)
        return 1
    head, rest = text.split(start, 1)
    tail = rest.split(end, 1)[1]
    DOC.write_text(f"{head}{start}\n\n{wanted}\n{end}{tail}", encoding="utf-8")
    print(f"wrote the CSV columns of {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
