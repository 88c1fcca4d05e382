"""The layout in executable form: import-linter's contracts (the layers traces <- model <- lab <-
inspector, the layers inside inspector, no import circles) hold, counting imports inside functions and
under `if TYPE_CHECKING:`; and the acyclic contract does fail on a circle."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

PACKAGES = ("traces", "model", "lab", "inspector")


def _lint_imports() -> str:
    return shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")


def test_import_contracts_hold():
    result = subprocess.run(
        [_lint_imports(), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
    assert result.stdout.count(" KEPT") >= 2 and "layers" in result.stdout


def _importlinter() -> dict:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def test_the_contracts_count_every_import_and_forbid_circles():
    config = _importlinter()
    assert config["exclude_type_checking_imports"] is False
    acyclic = [c for c in config["contracts"] if c["type"] == "acyclic_siblings"]
    assert acyclic and set(acyclic[0]["ancestors"]) == set(PACKAGES)


CIRCLE = {
    "a.py": "def later():\n    from circle.b import B\n    return B\n",
    "b.py": ("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
             "    from circle.a import later\n\nB = 1\n"),
}


@pytest.mark.parametrize("closed", [True, False])
def test_a_circle_breaks_the_acyclic_contract(tmp_path, closed):
    """The project's own acyclic contract, on a package whose one circle closes through an import inside
    a function and one under `if TYPE_CHECKING:`: broken, and kept once the circle is open."""
    tomllib = pytest.importorskip("tomllib")
    config = _importlinter()
    (tmp_path / "circle").mkdir()
    (tmp_path / "circle" / "__init__.py").write_text("")
    for name, text in CIRCLE.items():
        (tmp_path / "circle" / name).write_text(text if closed or name != "b.py" else "B = 1\n")
    contract = next(c for c in config["contracts"] if c["type"] == "acyclic_siblings")
    toml = (f'[tool.importlinter]\nroot_packages = ["circle"]\n'
            f'exclude_type_checking_imports = {str(config["exclude_type_checking_imports"]).lower()}\n\n'
            f'[[tool.importlinter.contracts]]\nname = {contract["name"]!r}\ntype = "acyclic_siblings"\n'
            f'ancestors = ["circle"]\n')
    tomllib.loads(toml)
    (tmp_path / "pyproject.toml").write_text(toml)
    result = subprocess.run([_lint_imports(), "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    if closed:
        assert result.returncode != 0 and "BROKEN" in result.stdout, result.stdout + result.stderr
        assert "No cycles are allowed in circle" in result.stdout
    else:
        assert result.returncode == 0 and "0 broken" in result.stdout, result.stdout + result.stderr
