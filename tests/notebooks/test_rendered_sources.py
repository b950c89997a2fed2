"""Every committed rendered notebook (``outputs/reports/*/*.ipynb``) was executed from its source as it stands: its
markdown and code cells equal those of ``notebooks/<name>.py`` read as the study reads it
(``kbstudy.pipeline.render.read_percent_notebook``), papermill's injected-parameters cell aside. nbval re-executes the code and
compares outputs, but never the markdown, so a source whose prose changed after the last render would otherwise go
unnoticed (``make study`` would then leave the tree dirty)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from kbstudy.pipeline.render import read_percent_notebook

REPO = Path(__file__).resolve().parents[2]
RENDERED = sorted((REPO / "outputs" / "reports").glob("*/*.ipynb"))


def _cells(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in nb.cells
            if "injected-parameters" not in c.get("metadata", {}).get("tags", [])]


def test_every_rendered_notebook_has_a_source():
    assert len(RENDERED) >= 8
    for path in RENDERED:
        assert (REPO / "notebooks" / f"{path.stem}.py").exists(), path


@pytest.mark.parametrize("path", RENDERED, ids=[str(p.relative_to(REPO / "outputs" / "reports")) for p in RENDERED])
def test_rendered_notebook_cells_equal_its_source(path):
    rendered = nbformat.read(path, as_version=4)
    source = read_percent_notebook(REPO / "notebooks" / f"{path.stem}.py")
    assert _cells(rendered) == _cells(source), f"{path} is stale: re-render it (make render)"
