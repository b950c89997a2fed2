"""Study files: what a study runs (evaluation runs) and renders (notebooks), parsed and validated.

A *study file* (``params/study/*.yaml``; JSON-compatible YAML) names evaluation runs and notebooks::

    name: cpu-default                      # reports go to outputs/reports/<name>/ unless `reports` says otherwise
    kernelbench_dir: data/kernelbench      # optional, relative to the repository root (default:
                                           # kbstudy.pipeline.data.resolve_kernelbench_dir); expands in paths
    runs:
      - run: cpu-default                   # EvaluationRecord.run
        problems: {path: "{kernelbench_dir}/kernelbench_levels_1-3.jsonl", levels: [1]}   # + problem_ids, version
        candidates:                        # null:reference | null:zeros | null:mean | {path, model_config,
          - null:reference                 #   model_configs, levels, problem_ids} for a folder or a JSONL file
          - {path: "{kernelbench_dir}/leaderboard_kernels.jsonl", model_configs: [claude-3.5-sonnet], levels: [1]}
        precision: fp32
        device: auto                       # auto: cuda when torch sees a GPU, else cpu
        size_scale: 0.0625
        records: outputs/records/cpu-default
        eval: {compile_baseline: false}    # any other kbstudy.harness.orchestrator.EvalConfig field
        ray: false                         # optional: true (a local Ray cluster, or RAY_ADDRESS) or a cluster address
                                           # (auto, HOST:6379, ray://HOST:10001): one lane per GPU (kbstudy.pipeline.ray_batch)
    notebooks:
      - notebook: notebooks/01_kernelbench_level1.py    # jupytext percent source
        params: params/01_kernelbench_level1.cpu-default.yaml
        parameters: {}                     # optional overrides on top of the params file

Relative paths in a study file resolve against the repository root (``root``); paths inside notebook params files
too (:mod:`kbstudy.pipeline.paths`).

The study's KernelBench data folder (``kernelbench_dir``, or ``--kernelbench-dir`` on the command line) also reaches
every notebook that declares a ``kernelbench_dir`` parameter (:func:`notebook_parameters`), so the notebooks read the
data the evaluations read.

Which study runs by default (:func:`default_study_file`): ``params/study/h200_level1_fp32.yaml`` when torch sees a
GPU, else the embedded CPU default ``params/study/cpu_default.yaml`` (CPU, size_scale 0.0625, level-1 problems,
null candidates, kbstudy's Triton examples under the interpreter, and the leaderboard's CUDA candidates, recorded as
skipped).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
from pathlib import Path

from kbstudy.harness.config import resolve_device
from kbstudy.pipeline.data import resolve_kernelbench_dir
from kbstudy.pipeline.paths import find_project_root, project_path, relative_to_root

try:
    import yaml
except ImportError:  # the GPU image may lack PyYAML; JSON-compatible files still load
    yaml = None

STUDY_DIR = Path("params") / "study"
CPU_DEFAULT_STUDY = STUDY_DIR / "cpu_default.yaml"
GPU_DEFAULT_STUDY = STUDY_DIR / "h200_level1_fp32.yaml"
NULL_PREFIX = "null:"
#: The notebook parameter that names the KernelBench data folder (notebook 01 reads the leaderboard, the v0 problems
#: and KernelBench's baseline timings from it).
KERNELBENCH_DIR_PARAMETER = "kernelbench_dir"


class StudyError(ValueError):
    """A study file or params file that cannot be used (message says which field and why)."""


def load_mapping(path: Path) -> dict:
    """Read a YAML (or JSON) mapping. Raises ``FileNotFoundError`` or :class:`StudyError`."""
    if not path.is_file():
        raise FileNotFoundError(f"not found: {path}")
    text = path.read_text()
    data = yaml.safe_load(text) if yaml is not None else json.loads(text)
    if not isinstance(data, dict):
        raise StudyError(f"{path}: expected a mapping at the top level")
    return data


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
    #: None: one process on this machine; "": through Ray, a local cluster (or RAY_ADDRESS); else a cluster address
    ray: str | None = None


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
    data = load_mapping(path)
    name = data.get("name")
    if not name or not isinstance(name, str):
        raise StudyError(f"{path}: a study needs a string `name`")
    # required only where a run names it: a study that only renders, or whose paths are its own, reads no data
    kb_dir = resolve_kernelbench_dir(kernelbench_dir or data.get("kernelbench_dir"), root=root,
                                     required="{kernelbench_dir}" in json.dumps(data.get("runs") or []))
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
        ray = run.get("ray", False)
        if not isinstance(ray, (bool, str)):
            raise StudyError(f"{where}.ray must be true, false or a Ray cluster address, not {ray!r}")
        runs.append(RunSpec(run=str(run["run"]), problems=problems, candidates=candidates,
                            records=project_path(_expand(str(run["records"]), variables), root),
                            precision=str(run.get("precision", "fp32")), device=str(run.get("device", "auto")),
                            size_scale=float(run.get("size_scale", 1.0)), eval=extra,
                            ray=None if ray is False else ("" if ray is True else ray)))
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
    root = Path(root) if root is not None else find_project_root(Path(__file__).parent)
    return root / (GPU_DEFAULT_STUDY if resolve_device("auto").startswith("cuda") else CPU_DEFAULT_STUDY)


_PARAMETERS_CELL = re.compile(r'^# %% .*tags=\[[^\]]*"parameters"[^\]]*\].*$', re.MULTILINE)


def declared_parameters(notebook: str | os.PathLike) -> dict:
    """The parameters a jupytext percent notebook declares: the names assigned in its cell tagged ``parameters``,
    with their default values where they are literals (``None`` otherwise); ``{}`` without such a cell."""
    text = Path(notebook).read_text()
    match = _PARAMETERS_CELL.search(text)
    if match is None:
        return {}
    body = text[match.end():]
    end = re.search(r"^# %%", body, re.MULTILINE)
    declared = {}
    for node in ast.parse(body[:end.start()] if end else body).body:
        if isinstance(node, ast.Assign):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                value = None
            declared.update({t.id: value for t in node.targets if isinstance(t, ast.Name)})
    return declared


def notebook_parameters(spec: NotebookSpec, study: Study | None = None) -> dict:
    """The papermill parameters of one notebook: its params file, then the study's overrides; and, given the
    ``study``, its KernelBench data folder for a notebook that declares a ``kernelbench_dir`` parameter, whenever it
    is not the folder the notebook would read anyway (so a rendering with the default folder stays as committed).
    The folder is given relative to the repository root when it lies inside it, else absolute."""
    params = load_mapping(spec.params) if spec.params is not None else {}
    params = {**params, **spec.parameters}
    if study is None:
        return params
    declared = declared_parameters(spec.notebook)
    if KERNELBENCH_DIR_PARAMETER not in declared:
        return params
    current = params.get(KERNELBENCH_DIR_PARAMETER, declared[KERNELBENCH_DIR_PARAMETER])
    # a notebook given no folder finds it as `kbstudy data where` does
    reads = project_path(current, study.root) if current else resolve_kernelbench_dir(root=study.root, required=False)
    wanted = Path(os.path.normpath(project_path(study.kernelbench_dir, study.root)))
    if Path(os.path.normpath(reads)) != wanted:
        params[KERNELBENCH_DIR_PARAMETER] = relative_to_root(wanted, study.root)
    return params
