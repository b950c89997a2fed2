"""The main job: run the evaluations a study file lists that are not yet recorded, then render every notebook.

A *study file* (``params/study/*.yaml``; JSON-compatible YAML) names evaluation runs and notebooks::

    name: cpu-default                      # reports go to outputs/reports/<name>/ unless `reports` says otherwise
    kernelbench_dir: data/kernelbench      # optional (default: kbstudy.pipeline.data.resolve_kernelbench_dir)
    runs:
      - run: cpu-default                   # EvaluationRecord.run
        problems: {path: "{kernelbench_dir}/kernelbench_levels_1-3.jsonl", levels: [1]}   # + problem_ids, version
        candidates:                        # null:reference | null:zeros | null:mean | {path, model_config,
          - null:reference                 #   model_configs, levels, problem_ids} for a folder or a JSONL file
          - {path: "{kernelbench_dir}/leaderboard_kernels.jsonl", model_configs: [claude-3.5-sonnet], levels: [1]}
        precision: fp32
        device: auto                       # auto: cuda when torch sees a GPU, else cpu
        size_scale: 0.0625
        records: outputs/records/kernelbench/cpu/study
        eval: {compile_baseline: false}    # any other kbstudy.harness.orchestrator.EvalConfig field
    notebooks:
      - notebook: notebooks/01_kernelbench_level1.py    # jupytext percent source
        params: params/01_kernelbench_level1.cpu-default.yaml
        parameters: {}                     # optional overrides on top of the params file

Relative paths in a study file resolve against the repository root (``root``). Paths *inside notebook params files*
are also relative to the repository root, not to the notebook: the notebook resolves them with
:func:`project_path`, which finds the root by walking up from the working directory. That is what lets the same
executed notebook re-run under papermill (working directory ``notebooks/``) and under nbval (working directory
``outputs/reports/<name>/``).

Steps of :func:`run_study`:

1. for each run: load problems and candidates, call :func:`kbstudy.harness.orchestrator.evaluate_batch` on the run's store
   (it skips keys already recorded, so only missing evaluations run). On a CPU, CUDA candidates are recorded by
   ``evaluate_batch`` as ``skipped`` (not dropped) and Triton candidates run under ``TRITON_INTERPRET=1``, which is
   also set here for the duration of a CPU run;
2. for each notebook: ``jupytext.read`` the percent source into a notebook (kernelspec ``python3``), execute it
   with papermill (``kernel_name="python3"``, ``language="python"``, ``cwd`` = the notebook's folder) into
   ``<reports>/<notebook stem>.ipynb``, then write ``<notebook stem>.html`` beside it with nbconvert.
   **HTML choice:** code cells stay visible (reviewers see exactly which ``kbstudy`` call produced each number; the
   notebooks are thin), input and output prompts (``In [3]:``) are removed so re-renders do not differ by counts;
3. append to ``<reports>/study_provenance.jsonl``: the study file, resolved settings, per-run batch summaries, git
   commit and library versions.

Which study runs by default (:func:`default_study_file`): ``params/study/h200_level1_fp32.yaml`` when torch sees a
GPU, else the embedded CPU default ``params/study/cpu_default.yaml`` (CPU, size_scale 0.0625, level-1 problems,
null candidates, kbstudy's Triton examples under the interpreter, and the leaderboard's CUDA candidates, recorded as
skipped).
"""

import contextlib
import dataclasses
import datetime as _dt
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

from kbstudy.harness.config import NoGPUError, resolve_device
from kbstudy.pipeline.data import resolve_kernelbench_dir
from kbstudy.records.provenance import REPO_ROOT

STUDY_DIR = Path("params") / "study"
CPU_DEFAULT_STUDY = STUDY_DIR / "cpu_default.yaml"
GPU_DEFAULT_STUDY = STUDY_DIR / "h200_level1_fp32.yaml"
NULL_PREFIX = "null:"
#: Per-cell papermill timeout (s): the analysis notebooks only read records, a cell never needs minutes.
NOTEBOOK_CELL_TIMEOUT_S = 600


class StudyError(ValueError):
    """A study file or params file that cannot be used (message says which field and why)."""


# ------------------------------------------------------------------------------------------------ paths


def find_project_root(start: str | os.PathLike | None = None) -> Path:
    """The repository root: the nearest folder at or above ``start`` (default: the working directory) holding a
    ``pyproject.toml`` that names ``kbstudy``; falls back to the folder above the installed package."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and 'name = "kbstudy"' in pyproject.read_text(errors="replace"):
            return folder
    return REPO_ROOT


def project_path(path: str | os.PathLike, root: str | os.PathLike | None = None) -> Path:
    """``path`` if absolute, else ``root / path`` (``root`` default: :func:`find_project_root`). What notebooks use
    to read the repository-relative paths of their parameters."""
    path = Path(path)
    if path.is_absolute():
        return path
    return (Path(root) if root is not None else find_project_root()) / path


def _load_mapping(path: Path) -> dict:
    """Read a YAML (or JSON) mapping. Raises ``FileNotFoundError`` or :class:`StudyError`."""
    if not path.is_file():
        raise FileNotFoundError(f"not found: {path}")
    text = path.read_text()
    try:
        import yaml

        data = yaml.safe_load(text)
    except ImportError:  # the GPU image may lack PyYAML; JSON-compatible files still load
        data = json.loads(text)
    if not isinstance(data, dict):
        raise StudyError(f"{path}: expected a mapping at the top level")
    return data


# ------------------------------------------------------------------------------------------------ study model


@dataclasses.dataclass
class RunSpec:
    """One evaluation run of a study: problems x candidates at one precision, device and size scale."""

    run: str
    problems: dict
    candidates: list
    records: Path
    precision: str = "fp32"
    device: str = "auto"
    size_scale: float = 1.0
    eval: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class NotebookSpec:
    """One notebook to render: its jupytext source, its params file and optional overrides."""

    notebook: Path
    params: Path | None
    parameters: dict = dataclasses.field(default_factory=dict)

    @property
    def stem(self) -> str:
        return self.notebook.stem


@dataclasses.dataclass
class Study:
    name: str
    path: Path
    root: Path
    kernelbench_dir: Path
    reports: Path
    runs: list[RunSpec]
    notebooks: list[NotebookSpec]
    raw: dict


def _expand(value: str, variables: dict) -> str:
    try:
        return value.format(**variables)
    except (KeyError, IndexError) as exc:
        raise StudyError(f"unknown placeholder in {value!r} (known: {sorted(variables)})") from exc


def load_study(study_file: str | os.PathLike, *, root: str | os.PathLike | None = None,
               kernelbench_dir: str | os.PathLike | None = None) -> Study:
    """Parse and validate a study file (format in the module docstring).

    ``root`` (default: the repository root) anchors relative paths; ``kernelbench_dir`` overrides the file's
    (default: :func:`kbstudy.pipeline.data.resolve_kernelbench_dir`). Raises ``FileNotFoundError`` or
    :class:`StudyError`.
    """
    root = Path(root).resolve() if root is not None else find_project_root(Path(__file__).parent)
    path = project_path(study_file, root)
    data = _load_mapping(path)
    name = data.get("name")
    if not name or not isinstance(name, str):
        raise StudyError(f"{path}: a study needs a string `name`")
    kb_dir = resolve_kernelbench_dir(kernelbench_dir or data.get("kernelbench_dir"), root=root,
                                     required=bool(data.get("runs")))  # a study without runs may not read it
    variables = {"kernelbench_dir": str(kb_dir), "name": name}
    runs = []
    for i, run in enumerate(data.get("runs") or []):
        where = f"{path}: runs[{i}]"
        missing = {"run", "problems", "candidates", "records"} - set(run)
        if missing:
            raise StudyError(f"{where} lacks {sorted(missing)}")
        problems = run["problems"]
        if isinstance(problems, str):
            problems = {"path": problems}
        if "path" not in problems:
            raise StudyError(f"{where}.problems needs a `path`")
        problems = {**problems, "path": project_path(_expand(str(problems["path"]), variables), root)}
        candidates = []
        for spec in run["candidates"]:
            if isinstance(spec, str) and spec.startswith(NULL_PREFIX):
                candidates.append(spec)
            else:
                spec = {"path": spec} if isinstance(spec, str) else dict(spec)
                if "path" not in spec:
                    raise StudyError(f"{where}.candidates: {spec!r} is neither null:<kind> nor a mapping with `path`")
                spec["path"] = project_path(_expand(str(spec["path"]), variables), root)
                candidates.append(spec)
        extra = dict(run.get("eval") or {})
        runs.append(RunSpec(run=str(run["run"]), problems=problems, candidates=candidates,
                            records=project_path(_expand(str(run["records"]), variables), root),
                            precision=str(run.get("precision", "fp32")), device=str(run.get("device", "auto")),
                            size_scale=float(run.get("size_scale", 1.0)), eval=extra))
    notebooks = []
    for i, nb in enumerate(data.get("notebooks") or []):
        if "notebook" not in nb:
            raise StudyError(f"{path}: notebooks[{i}] lacks `notebook`")
        notebooks.append(NotebookSpec(notebook=project_path(nb["notebook"], root),
                                      params=project_path(nb["params"], root) if nb.get("params") else None,
                                      parameters=dict(nb.get("parameters") or {})))
    reports = project_path(_expand(str(data.get("reports") or f"outputs/reports/{name}"), variables), root)
    return Study(name=name, path=path, root=root, kernelbench_dir=kb_dir, reports=reports, runs=runs,
                 notebooks=notebooks, raw=data)


def default_study_file(root: str | os.PathLike | None = None) -> Path:
    """The GPU study when torch sees a CUDA device, else the embedded CPU default (both under ``params/study``)."""
    import torch

    root = Path(root) if root is not None else find_project_root(Path(__file__).parent)
    return root / (GPU_DEFAULT_STUDY if torch.cuda.is_available() else CPU_DEFAULT_STUDY)


# ------------------------------------------------------------------------------------------------ evaluations


def load_run_inputs(spec: RunSpec) -> tuple[list, list]:
    """The problems and candidates of one run (candidates restricted to the run's problems). Raises the loaders'
    errors, or ``KeyError`` for an unknown null candidate kind."""
    from kbstudy.harness.candidates import NULL_CANDIDATES, load_candidates, null_candidates
    from kbstudy.harness.problems import load_problems

    p = spec.problems
    problems = load_problems(p["path"], levels=p.get("levels"), problem_ids=p.get("problem_ids"),
                             version=p.get("version"))
    wanted = {(pr.level, pr.problem_id) for pr in problems}
    candidates = []
    for source in spec.candidates:
        if isinstance(source, str):
            kind = source[len(NULL_PREFIX):]
            if kind not in NULL_CANDIDATES:
                raise KeyError(f"unknown null candidate {source!r} (known: {[NULL_PREFIX + k for k in NULL_CANDIDATES]})")
            candidates.extend(c for pr in problems for c in null_candidates(pr, [kind]))
            continue
        loaded = load_candidates(source["path"], model_config=source.get("model_config"),
                                 levels=source.get("levels"), model_configs=source.get("model_configs"))
        if source.get("problem_ids") is not None:
            keep = set(source["problem_ids"])
            loaded = [c for c in loaded if c.problem_id in keep]
        candidates.extend(c for c in loaded if (c.level, c.problem_id) in wanted)
    return problems, candidates


@contextlib.contextmanager
def _environ(**values: str | None) -> Iterator[None]:
    """Set (or, with ``None``, unset) environment variables for the duration of the block, then restore them."""
    old = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_evaluations(study: Study, *, progress: bool = True, dry_run: bool = False) -> dict[str, dict]:
    """Run each of the study's evaluation runs through :func:`kbstudy.harness.orchestrator.evaluate_batch` (missing keys only).

    Returns ``{run: {"problems": int, "candidates": int, "written": int, "already_done": int, "outcomes": {...},
    "seconds": float}}``; with ``dry_run`` only the counts of problems and candidates.
    """
    from kbstudy.harness.orchestrator import EvalConfig, evaluate_batch
    from kbstudy.records.store import RecordStore

    summaries: dict[str, dict] = {}
    for spec in study.runs:
        try:
            device = spec.device if dry_run else resolve_device(spec.device)
        except NoGPUError as exc:
            raise StudyError(f"{exc}; run a CPU study, or render the notebooks only (--only-notebooks) from records "
                             "made on a GPU") from exc
        problems, candidates = load_run_inputs(spec)
        info: dict[str, Any] = {"problems": len(problems), "candidates": len(candidates), "device": device,
                                "records": _rel(spec.records, study.root)}
        if dry_run:
            summaries[spec.run] = info
            continue
        fields = {f.name for f in dataclasses.fields(EvalConfig)}
        unknown = set(spec.eval) - fields
        if unknown:
            raise StudyError(f"{study.path}: run {spec.run!r}: unknown EvalConfig fields {sorted(unknown)}")
        cfg = EvalConfig(run=spec.run, precision=spec.precision, device=device, size_scale=spec.size_scale,
                         **{"progress": progress, **spec.eval})
        store = RecordStore(spec.records)
        interpret = "1" if device == "cpu" else os.environ.get("TRITON_INTERPRET")
        with _environ(TRITON_INTERPRET=interpret):
            batch = evaluate_batch(problems, candidates, store, cfg)
        info.update(written=batch.written, already_done=batch.already_done, unmatched=len(batch.unmatched),
                    outcomes=dict(batch.outcomes), seconds=round(batch.seconds, 1))
        summaries[spec.run] = info
    return summaries


# ------------------------------------------------------------------------------------------------ notebooks


def _rel(path: Path, root: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def notebook_parameters(spec: NotebookSpec) -> dict:
    """The papermill parameters of one notebook: its params file, then the study's overrides."""
    params = _load_mapping(spec.params) if spec.params is not None else {}
    return {**params, **spec.parameters}


def read_percent_notebook(path: Path):
    """``jupytext.read`` a percent ``.py`` into a notebook carrying kernelspec ``python3`` and language ``python``
    (papermill's ``kernel_name`` does not rewrite the stored kernelspec, and nbval later reads it)."""
    import jupytext

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
    import nbformat
    import papermill as pm

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
        with _environ(PYTHONPATH=pythonpath, MPLBACKEND="Agg"):
            pm.execute_notebook(str(source), str(output), parameters=parameters or {}, kernel_name="python3",
                                language="python", cwd=str(notebook.parent), progress_bar=False,
                                execution_timeout=cell_timeout_s)
    _strip_run_metadata(output, notebook, root)
    written = {"ipynb": output}
    if html:
        written["html"] = write_html(output)
    return written


def _strip_run_metadata(ipynb: Path, notebook: Path, root: Path) -> None:
    """Drop what changes on every render but says nothing about the analysis: per-cell execution timestamps, random
    cell ids, and the temporary input path papermill records (replaced by the notebook source's repo-relative path);
    and merge consecutive stream outputs of one cell (nbconvert's ``CoalesceStreamsPreprocessor``): how a cell's
    printed text is cut into stream messages depends on when the kernel flushed, so an unmerged rendering differs from
    run to run (a cell printing before a slow step came out as one block or two)."""
    import nbformat
    from nbconvert.preprocessors import CoalesceStreamsPreprocessor

    nb = nbformat.read(ipynb, as_version=4)
    nb, _ = CoalesceStreamsPreprocessor().preprocess(nb, {})
    for index, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{index}"  # papermill's injected-parameters cell arrives with a random id
        cell.metadata.pop("execution", None)
        cell.metadata.pop("papermill", None)
    meta = nb.metadata.get("papermill", {})
    for key in ("start_time", "end_time", "duration", "exception"):
        meta.pop(key, None)
    meta["input_path"] = _rel(notebook, root)
    meta["output_path"] = _rel(ipynb, root)
    nbformat.write(nb, ipynb)


def write_html(ipynb: str | os.PathLike) -> Path:
    """nbconvert HTML of an executed notebook, beside it: code visible, no ``In [n]:``/``Out [n]:`` prompts."""
    import nbformat
    from nbconvert import HTMLExporter

    ipynb = Path(ipynb)
    exporter = HTMLExporter(exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(nbformat.read(ipynb, as_version=4))
    html = ipynb.with_suffix(".html")
    html.write_text(body)
    return html


def render_notebooks(study: Study) -> dict[str, dict[str, str]]:
    """Render every notebook of the study into ``study.reports``; returns ``{stem: {"ipynb": rel, "html": rel}}``."""
    out = {}
    for spec in study.notebooks:
        target = study.reports / f"{spec.stem}.ipynb"
        written = render_notebook(spec.notebook, target, notebook_parameters(spec), root=study.root)
        out[spec.stem] = {k: _rel(v, study.root) for k, v in written.items()}
    return out


# ------------------------------------------------------------------------------------------------ the job


def run_study(study_file: str | os.PathLike | None = None, *, only_notebooks: bool = False,
              only_evaluations: bool = False, root: str | os.PathLike | None = None,
              kernelbench_dir: str | os.PathLike | None = None, progress: bool = True) -> dict:
    """Run the study: missing evaluations (unless ``only_notebooks``), then every notebook (unless
    ``only_evaluations``), then, if it wrote records (or the history is new), one line appended to
    ``<reports>/study_provenance.jsonl``. ``study_file`` ``None`` picks :func:`default_study_file`. Returns the
    provenance dict of this invocation (written or not).

    Raises ``FileNotFoundError``/:class:`StudyError` for a bad study file, :class:`StudyError` for a GPU run on a
    machine without a GPU, and papermill's ``PapermillExecutionError`` if a notebook fails.
    """
    if only_notebooks and only_evaluations:
        raise StudyError("only_notebooks and only_evaluations exclude each other")
    study = load_study(study_file if study_file is not None else default_study_file(root), root=root,
                       kernelbench_dir=kernelbench_dir)
    runs = {} if only_notebooks else run_evaluations(study, progress=progress)
    notebooks = {} if only_evaluations else render_notebooks(study)
    from kbstudy.records import provenance

    record = {
        "study": study.name,
        "study_file": _rel(study.path, study.root),
        "only_notebooks": only_notebooks,
        "runs": runs,
        "notebooks": notebooks,
        "git_commit": provenance.git_commit(),
        "kbstudy_version": __import__("kbstudy").__version__,
        **provenance.library_versions(),
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    study.reports.mkdir(parents=True, exist_ok=True)
    # one line per invocation that wrote records (or the first one): a later run that finds nothing missing does not
    # erase the record of the run that made the records, and a pure re-render leaves the committed history unchanged
    history = study.reports / "study_provenance.jsonl"
    if not history.exists() or any(info.get("written") for info in runs.values()):
        with history.open("a") as fh:
            fh.write(json.dumps(record, sort_keys=True) + "\n")
    return record


# ------------------------------------------------------------------------------------------------ command line


def register(app) -> None:
    """Mount ``kbstudy study`` on the main typer app (``kbstudy/cli/app.py``): ``study.register(app)``.

    (``app.add_typer(make_app(), name="study")`` would also work but nests the command: ``kbstudy study study``.)
    """
    app.command("study")(cli_command())


def make_app():
    """A standalone typer app whose only command is ``study`` (what ``python -m kbstudy.pipeline.study`` runs)."""
    import typer

    app = typer.Typer(help="Run a study: missing evaluations, then every notebook through papermill.",
                      add_completion=False)
    app.command("study")(cli_command())
    return app


def cli_command():
    """The typer command function of ``kbstudy study`` (typer is imported here only)."""
    from typing import Annotated, Optional

    import typer

    def study(
        study_file: Annotated[Optional[str], typer.Argument(help="study file, params/study/*.yaml (default: "
                                                                  "the GPU study with a GPU, else cpu_default)")] = None,
        only_notebooks: Annotated[bool, typer.Option(help="render the notebooks from the records already present")] = False,
        only_evaluations: Annotated[bool, typer.Option(help="run the missing evaluations, render nothing")] = False,
        kernelbench_dir: Annotated[Optional[str], typer.Option(help="KernelBench data folder (default: "
                                                                    "$KBSTUDY_KERNELBENCH_DIR, else data/kernelbench "
                                                                    "from `kbstudy data fetch`, else "
                                                                    "../shared/kernelbench)")] = None,
        dry_run: Annotated[bool, typer.Option(help="list what each run would evaluate, run nothing")] = False,
        progress: Annotated[bool, typer.Option(help="progress bars")] = True,
    ) -> None:
        """Run STUDY_FILE: missing evaluations, then every notebook, writing outputs/reports/<name>/."""
        code = study_command(study_file, only_notebooks=only_notebooks, only_evaluations=only_evaluations,
                             kernelbench_dir=kernelbench_dir, dry_run=dry_run, progress=progress, echo=typer.echo)
        if code:
            raise typer.Exit(code)

    return study


def study_command(study_file: str | None = None, *, only_notebooks: bool = False, only_evaluations: bool = False,
                  kernelbench_dir: str | None = None, dry_run: bool = False, progress: bool = True,
                  echo=print) -> int:
    """The typer-free body of ``kbstudy study``: runs the study, prints a JSON summary, returns the exit status
    (0 success, 2 a bad study file or a GPU study without a GPU). ``argparse``-based CLIs can call this directly."""
    import sys

    try:
        if dry_run:
            study = load_study(study_file or default_study_file(), kernelbench_dir=kernelbench_dir)
            echo(json.dumps(run_evaluations(study, dry_run=True), indent=2))
            return 0
        record = run_study(study_file, only_notebooks=only_notebooks, only_evaluations=only_evaluations,
                           kernelbench_dir=kernelbench_dir, progress=progress)
    except (StudyError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    echo(json.dumps({k: record[k] for k in ("study", "runs", "notebooks")}, indent=2))
    return 0


def main(argv: list[str] | None = None) -> None:
    """``python -m kbstudy.pipeline.study [STUDY_FILE] [--only-notebooks] ...``"""
    make_app()(args=argv, prog_name="kbstudy study")


if __name__ == "__main__":
    main()
