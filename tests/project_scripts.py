"""The scripts in scripts/ loaded as modules, for the tests that check what they write."""

import importlib.util

from paths import ROOT


def load_script(name: str):
    """scripts/<name>.py as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
