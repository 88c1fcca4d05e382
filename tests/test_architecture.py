"""The one-way data flow model -> traces <- inspector, checked by import-linter's contracts."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_hold():
    lint_imports = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    result = subprocess.run(
        [lint_imports, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_contracts_cover_all_three_packages():
    text = (ROOT / "pyproject.toml").read_text()
    for forbidden in ('source_modules = ["traces"]', 'source_modules = ["model"]',
                      'source_modules = ["inspector"]'):
        assert forbidden in text
