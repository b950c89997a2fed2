"""Rendering the notebooks: a jupytext percent source executed by papermill into ``.ipynb``, then HTML by nbconvert.

For each notebook of a study: ``jupytext.read`` the percent source into a notebook (kernelspec ``python3``), execute it
with papermill (``kernel_name="python3"``, ``language="python"``, ``cwd`` = the notebook's folder) into
``<reports>/<notebook stem>.ipynb``, then write ``<notebook stem>.html`` beside it with nbconvert.
**HTML choice:** code cells stay visible (reviewers see exactly which ``kbstudy`` call produced each number; the
notebooks are thin), input and output prompts (``In [3]:``) are removed so re-renders do not differ by counts.

papermill, jupytext, nbformat and nbconvert are the ``notebooks`` extra, absent on the GPU image: they are imported
where a notebook is rendered, so that evaluations run without them.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from kbstudy.pipeline.environ import scoped_environ
from kbstudy.pipeline.paths import find_project_root, relative_to_root
from kbstudy.pipeline.study_config import Study, notebook_parameters

#: Per-cell papermill timeout (s): the analysis notebooks only read records, a cell never needs minutes.
NOTEBOOK_CELL_TIMEOUT_S = 600


def read_percent_notebook(path: Path):
    """``jupytext.read`` a percent ``.py`` into a notebook carrying kernelspec ``python3`` and language ``python``
    (papermill's ``kernel_name`` does not rewrite the stored kernelspec, and nbval later reads it)."""
    import jupytext  # the notebooks extra: absent on the GPU image

    nb = jupytext.read(path)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata.setdefault("language_info", {"name": "python"})
    nb.metadata.pop("jupytext", None)  # the executed copy is not paired with the source
    return nb


def render_notebook(notebook: str | os.PathLike, output: str | os.PathLike, parameters: dict | None = None, *,
                    root: str | os.PathLike | None = None, html: bool = True,
                    cell_timeout_s: int = NOTEBOOK_CELL_TIMEOUT_S) -> dict[str, Path]:
    """Execute one jupytext percent notebook with papermill into ``output`` (``.ipynb``) and, with ``html``, write
    ``<output stem>.html`` beside it. The kernel runs in the notebook's folder with the repository on its
    ``PYTHONPATH``. Returns ``{"ipynb": path, "html": path}``.

    Raises ``papermill.PapermillExecutionError`` when a cell fails (the partial notebook is still written).
    """
    import nbformat  # the notebooks extra: absent on the GPU image
    import papermill as pm  # the notebooks extra: absent on the GPU image

    notebook = Path(notebook).resolve()
    output = Path(output).resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    root = Path(root).resolve() if root is not None else find_project_root(Path(__file__).parent)
    nb = read_percent_notebook(notebook)
    for index, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{index}"  # jupytext draws random ids: fixed ones keep re-renders diff-free
    pythonpath = os.pathsep.join([str(root), *[str(Path(p).resolve()) for p in
                                               os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])
    with tempfile.TemporaryDirectory(prefix="kbstudy-nb-") as tmp:
        source = Path(tmp) / f"{notebook.stem}.ipynb"
        nbformat.write(nb, source)
        with scoped_environ(PYTHONPATH=pythonpath, MPLBACKEND="Agg"):
            pm.execute_notebook(str(source), str(output), parameters=parameters or {}, kernel_name="python3",
                                language="python", cwd=str(notebook.parent), progress_bar=False,
                                execution_timeout=cell_timeout_s)
    strip_run_metadata(output, notebook, root)
    written = {"ipynb": output}
    if html:
        written["html"] = write_html(output)
    return written


def strip_run_metadata(ipynb: Path, notebook: Path, root: Path) -> None:
    """Drop what changes on every render but says nothing about the analysis: per-cell execution timestamps, random
    cell ids, and the temporary input path papermill records (replaced by the notebook source's repo-relative path);
    and merge consecutive stream outputs of one cell (nbconvert's ``CoalesceStreamsPreprocessor``): how a cell's
    printed text is cut into stream messages depends on when the kernel flushed, so an unmerged rendering differs from
    run to run (a cell printing before a slow step came out as one block or two)."""
    import nbformat  # the notebooks extra: absent on the GPU image
    from nbconvert.preprocessors import CoalesceStreamsPreprocessor  # the notebooks extra

    nb = nbformat.read(ipynb, as_version=4)
    nb, _ = CoalesceStreamsPreprocessor().preprocess(nb, {})
    for index, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{index}"  # papermill's injected-parameters cell arrives with a random id
        cell.metadata.pop("execution", None)
        cell.metadata.pop("papermill", None)
    meta = nb.metadata.get("papermill", {})
    for key in ("start_time", "end_time", "duration", "exception"):
        meta.pop(key, None)
    meta["input_path"] = relative_to_root(notebook, root)
    meta["output_path"] = relative_to_root(ipynb, root)
    nbformat.write(nb, ipynb)


def write_html(ipynb: str | os.PathLike) -> Path:
    """nbconvert HTML of an executed notebook, beside it: code visible, no ``In [n]:``/``Out [n]:`` prompts."""
    import nbformat  # the notebooks extra: absent on the GPU image
    from nbconvert import HTMLExporter  # the notebooks extra

    ipynb = Path(ipynb)
    exporter = HTMLExporter(exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(nbformat.read(ipynb, as_version=4))
    html = ipynb.with_suffix(".html")
    html.write_text(body)
    return html


def render_notebooks(study: Study) -> dict[str, dict[str, str]]:
    """Render every notebook of the study into ``study.reports`` (parameters: :func:`notebook_parameters`, the
    study's KernelBench data folder included); returns ``{stem: {"ipynb": rel, "html": rel}}``."""
    out = {}
    for spec in study.notebooks:
        target = study.reports / f"{spec.stem}.ipynb"
        written = render_notebook(spec.notebook, target, notebook_parameters(spec, study), root=study.root)
        out[spec.stem] = {k: relative_to_root(v, study.root) for k, v in written.items()}
    return out
