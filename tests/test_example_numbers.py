"""The docs' numbers for the shipped examples are their stored tables' (scripts/example_numbers.py)."""

from project_scripts import load_script


def test_the_docs_state_the_shipped_examples_stored_numbers():
    script = load_script("example_numbers")
    names = []
    for doc in script.DOCS:
        text = doc.read_text(encoding="utf-8")
        assert script.filled(text) == text, f"{doc}: run python scripts/example_numbers.py"
        names += [m["name"] for m in script.BLOCK.finditer(text)]
    assert sorted(set(names)) == ["example.h5", "tiny-mixtral-bf16.h5"]
    assert "Causal maps of" in script.numbers(script.EXAMPLES / "example.h5")
