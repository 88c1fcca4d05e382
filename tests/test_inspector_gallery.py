"""docs/figures is what `scripts/export_gallery.py` makes now: the script runs exactly the commands
docs/export.md lists, every picture has the page its command asks for, and one picture made again
here looks like the one committed (its size, and its layout at a coarse scale: renderers of other
machines differ in the last pixel)."""

from __future__ import annotations

import re

import numpy as np
from paths import ROOT
from png_pixels import png_gray
from project_scripts import load_script

from inspector.cli import main
from inspector.export.output import DEFAULT_DPI, default_page
from inspector.qt import QtGui
from inspector.specs.registry import SPECS

BLOCK = 16


def gallery():
    return load_script("export_gallery")


def test_the_gallery_runs_the_commands_docs_export_lists():
    docs = (ROOT / "docs" / "export.md").read_text(encoding="utf-8")
    listed = [line.split()[1:] for line in docs.splitlines()
              if re.match(r"moe-inspector export traces/examples/example\.h5 .*-o docs/figures/", line)]
    commands = gallery().commands()
    assert listed == commands and len(commands) == len(SPECS)
    for argv in commands:  # every picture docs/export.md shows is one of them
        assert f"({argv[-1].removeprefix('docs/')})" in docs


def test_every_gallery_picture_has_the_page_its_command_asks_for():
    for argv in gallery().commands():
        view, path = argv[argv.index("--view") + 1], ROOT / argv[-1]
        image = QtGui.QImage(str(path))
        assert not image.isNull(), path
        page = default_page(view, DEFAULT_DPI, size="column")
        assert image.width() == page.width, path
        assert round(image.dotsPerMeterX() * 0.0254) == DEFAULT_DPI, path
        if not SPECS[view].fit_height:  # the text strip's page is as tall as its text
            assert image.height() == page.height, path


def _blocks(gray: np.ndarray) -> np.ndarray:
    h, w = (gray.shape[0] // BLOCK) * BLOCK, (gray.shape[1] // BLOCK) * BLOCK
    return gray[:h, :w].reshape(h // BLOCK, BLOCK, w // BLOCK, BLOCK).mean(axis=(1, 3))


def test_a_gallery_picture_made_again_looks_like_the_committed_one(qapp, tmp_path, monkeypatch):
    argv = next(a for a in gallery().commands() if a[a.index("--view") + 1] == "load")
    monkeypatch.chdir(ROOT)
    out = tmp_path / "load-column.png"
    assert main([*argv[:-1], str(out)]) == 0
    made, committed = png_gray(out.read_bytes()), png_gray((ROOT / argv[-1]).read_bytes())
    assert made.shape == committed.shape
    a, b = _blocks(made).ravel(), _blocks(committed).ravel()
    assert np.corrcoef(a, b)[0, 1] >= 0.97
