"""Every markdown file the project points to is in the repository, and so is every `#anchor` of it.

Scans the code (comments, docstrings, help texts), the tests and the docs for references to markdown files,
markdown links and in-page `](#anchor)` links. A reference resolves against the referring file's
folder (markdown links), the repository root (`docs/routing.md` in a docstring) or `docs/` (a bare
page name in code). Design notes kept
outside the repository, and their "measure N" labels, must not be cited at all: users never get them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from paths import ROOT

SCANNED = {".py", ".md", ".toml", ".sh", ".txt", ".cfg"}
SKIPPED_DIRS = {"__pycache__", "node_modules", "build", "dist", "assets"}

URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+")
MD_REFERENCE = re.compile(r"(?<![\w/.-])((?:\.\./|\./)?[\w.-]+(?:/[\w.-]+)*\.md)(?:#([\w-]+))?(?![\w])")
PAGE_ANCHOR = re.compile(r"\]\(#([\w-]+)\)")
#: Notes the project was designed from; never shipped, so never cited (built up so this file does not
#: match itself).
DESIGN_NOTES = re.compile(r"\b(?:" + "|".join(("ROUTING", "EXPERIMENTS", "ENVIRONMENT", "TRACE_FORMAT",
                                               "ARCHITECTURE")) + r")\.md\b")
MEASURE_LABEL = re.compile(r"\bmeasures? [0-9]", re.IGNORECASE)


def scanned_files() -> list[Path]:
    out = []
    for path in sorted(ROOT.rglob("*")):
        parts = path.relative_to(ROOT).parts
        if any(p.startswith(".") or p in SKIPPED_DIRS or p.endswith(".egg-info") for p in parts[:-1]):
            continue
        if path.is_file() and path.suffix in SCANNED:
            out.append(path)
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Anchors of the headings of a markdown file (outside code blocks), with GitHub's -1, -2 suffixes."""
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = re.match(r"#{1,6}\s+(.*)", line)
        if fenced or match is None:
            continue
        base = slug(match[1])
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def references(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, target, anchor) of every `.md` reference in a file, URLs left out."""
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for match in MD_REFERENCE.finditer(URL.sub("", line)):
            out.append((number, match[1], match[2]))
    return out


def resolve(path: Path, target: str) -> Path | None:
    for base in (path.parent, ROOT, ROOT / "docs"):
        candidate = (base / target).resolve()
        if candidate.is_file() and ROOT in candidate.parents:
            return candidate
    return None


FILES = scanned_files()


def test_the_scan_sees_code_tests_and_docs():
    names = {p.relative_to(ROOT).as_posix() for p in FILES}
    assert {"README.md", "docs/routing.md", "docs/experiments.md", "model/routing.py",
            "lab/experiments/cli.py", "tests/test_docs.py"} <= names
    # The scan finds the references this page relies on.
    found = {(p.relative_to(ROOT).as_posix(), target) for p in FILES for _, target, _ in references(p)}
    assert ("model/routing.py", "docs/routing.md") in found
    assert ("docs/README.md", "experiments.md") in found


def test_slugs_follow_githubs_rule():
    assert slug("E1: unique completions in N runs") == "e1-unique-completions-in-n-runs"
    assert slug("First divergence t\\*") == "first-divergence-t"
    assert slug("`norm`: the weights of the kept candidates") == "norm-the-weights-of-the-kept-candidates"


def test_every_referenced_markdown_file_and_anchor_exists():
    missing = []
    for path in FILES:
        rel = path.relative_to(ROOT).as_posix()
        for number, target, anchor in references(path):
            found = resolve(path, target)
            if found is None:
                missing.append(f"{rel}:{number}: {target} is not in the repository")
            elif anchor is not None and anchor not in anchors(found):
                missing.append(f"{rel}:{number}: {target} has no heading #{anchor}")
        if path.suffix == ".md":
            own = anchors(path)
            text = path.read_text(encoding="utf-8")
            missing += [f"{rel}: no heading #{a}" for a in PAGE_ANCHOR.findall(text) if a not in own]
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("pattern", [DESIGN_NOTES, MEASURE_LABEL], ids=["design notes", "measure labels"])
def test_nothing_cites_the_design_notes(pattern):
    hits = [f"{p.relative_to(ROOT).as_posix()}:{n}: {line.strip()}"
            for p in FILES for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if pattern.search(line)]
    assert not hits, "\n".join(hits)


def test_the_docs_index_lists_every_page():
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name != "README.md")
    assert [p for p in pages if f"]({p})" not in index] == []
