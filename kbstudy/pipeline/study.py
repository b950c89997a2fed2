"""The main job: run the evaluations a study file lists that are not yet recorded, then render every notebook.

The study file's format is in :mod:`kbstudy.pipeline.study_config`; rendering in :mod:`kbstudy.pipeline.render`;
the command line is ``kbstudy study`` (:mod:`kbstudy.cli.study`, ``make study`` / ``make render``).

Steps of :func:`run_study`:

1. for each run: load problems and candidates, call :func:`kbstudy.harness.orchestrator.evaluate_batch` on the run's
   store (it skips keys already recorded, so only missing evaluations run), or, for a run with ``ray:``,
   :func:`kbstudy.pipeline.ray_batch.evaluate_batch_ray` on the GPUs of a Ray cluster (same records). On a CPU, CUDA candidates are recorded by
   ``evaluate_batch`` as ``skipped`` (not dropped) and Triton candidates run under ``TRITON_INTERPRET=1``, which is
   also set here for the duration of a CPU run;
2. for each notebook: render it into ``<reports>/<notebook stem>.ipynb`` and ``.html``
   (:func:`kbstudy.pipeline.render.render_notebooks`);
3. append to ``<reports>/study_provenance.jsonl``: the study file, resolved settings, per-run batch summaries, git
   commit and library versions.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

import kbstudy
from kbstudy.harness.candidates import NULL_CANDIDATES, CandidateLoadError, load_candidates, null_candidates
from kbstudy.harness.config import EvalConfig, NoGPUError, hardware_label, resolve_device
from kbstudy.harness.orchestrator import candidate_identity, done_identities, evaluate_batch
from kbstudy.harness.problems import ProblemLoadError, load_problems
from kbstudy.pipeline.environ import scoped_environ
from kbstudy.pipeline.paths import relative_to_root
from kbstudy.pipeline.ray_batch import evaluate_batch_ray
from kbstudy.pipeline.render import render_notebooks
from kbstudy.pipeline.study_config import NULL_PREFIX, RunSpec, Study, StudyError, default_study_file, load_study
from kbstudy.records import provenance
from kbstudy.records.store import RecordStore

#: The candidate file names a candidate folder holds (KernelBench's generation-output naming).
CANDIDATE_FILE_NAMES = "level_{L}_problem_{P}_sample_{S}_kernel.py"


def candidate_source_mistake(path: str | os.PathLike) -> str | None:
    """What ``path``, given as a candidate source and refused by the candidate loader, holds instead, as a message:
    problems (a KernelBench checkout, a problem folder or a problem JSONL), or the KernelBench data folder (whose
    candidates are its ``leaderboard_kernels.jsonl``); ``None`` when it is none of these."""
    path = Path(path)
    if not path.exists():
        return None
    if path.is_dir() and (path / "leaderboard_kernels.jsonl").is_file():
        return (f"{path} is the KernelBench data folder, not a candidate source: its published kernels are "
                f"{path / 'leaderboard_kernels.jsonl'}, its problems {path / 'kernelbench_levels_1-3.jsonl'}")
    try:
        problems = load_problems(path)
    except (ProblemLoadError, OSError, ValueError):
        return None
    what = "folder" if path.is_dir() else "file"
    return (f"{path} is a problem {what} ({len(problems)} KernelBench-format problems), not a candidate source: give "
            f"it as the problems (--problems); candidates are a folder of {CANDIDATE_FILE_NAMES} files, a candidate "
            f"JSONL, or null:<kind>")


def load_candidate_source(path: str | os.PathLike, **options) -> list:
    """:func:`kbstudy.harness.candidates.load_candidates`, whose refusal of a problem source says what was given
    (:func:`candidate_source_mistake`). Raises the loader's errors."""
    try:
        return load_candidates(path, **options)
    except CandidateLoadError as exc:
        mistake = candidate_source_mistake(path)
        if mistake is None:
            raise
        raise CandidateLoadError(mistake) from exc


def load_run_inputs(spec: RunSpec) -> tuple[list, list]:
    """The problems and candidates of one run (candidates restricted to the run's problems). Raises the loaders'
    errors, or ``KeyError`` for an unknown null candidate kind."""
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
        loaded = load_candidate_source(source["path"], model_config=source.get("model_config"),
                                       levels=source.get("levels"), model_configs=source.get("model_configs"))
        if source.get("problem_ids") is not None:
            keep = set(source["problem_ids"])
            loaded = [c for c in loaded if c.problem_id in keep]
        candidates.extend(c for c in loaded if (c.level, c.problem_id) in wanted)
    return problems, candidates


def study_device(device: str) -> str:
    """The run's device (:func:`kbstudy.harness.orchestrator.resolve_device`); a GPU run on a machine without a GPU
    raises :class:`StudyError` saying how a GPU study is rendered there instead."""
    try:
        return resolve_device(device)
    except RuntimeError as exc:
        raise StudyError(f"{exc}; run a CPU study, or render the notebooks only (--only-notebooks) from records made "
                         "on a GPU") from exc


def run_config(study: Study, spec: RunSpec, device: str, progress: bool = True) -> EvalConfig:
    """The :class:`~kbstudy.harness.config.EvalConfig` of one run: its device, precision and size scale, and its
    ``eval`` block's fields. Raises :class:`StudyError` for a field ``EvalConfig`` does not have."""
    unknown = set(spec.eval) - {f.name for f in dataclasses.fields(EvalConfig)}
    if unknown:
        raise StudyError(f"{study.path}: run {spec.run!r}: unknown EvalConfig fields {sorted(unknown)}")
    return EvalConfig(run=spec.run, precision=spec.precision, device=device, size_scale=spec.size_scale,
                      **{"progress": progress, **spec.eval})


def missing_candidates(problems: list, candidates: list, store: RecordStore, cfg: EvalConfig, hardware: str) -> list:
    """The candidates a batch under ``cfg`` on ``hardware`` would evaluate: those whose record identity
    (:func:`kbstudy.harness.orchestrator.candidate_identity`) is not in ``store``, or is there with an outcome
    ``cfg.retry_outcomes`` asks to evaluate again. Candidates of problems not given are not counted."""
    done = done_identities(store.evaluations_by_identity(), cfg)
    index = {(p.level, p.problem_id): p for p in problems}
    settings = cfg.settings_key()
    return [c for c in candidates if (c.level, c.problem_id) in index
            and candidate_identity(index[(c.level, c.problem_id)], c, cfg, hardware, settings)[1] not in done]


def run_evaluations(study: Study, *, progress: bool = True, dry_run: bool = False) -> dict[str, dict]:
    """Run each of the study's evaluation runs through :func:`kbstudy.harness.orchestrator.evaluate_batch` (missing
    keys only).

    Returns ``{run: {"problems": int, "candidates": int, "written": int, "already_done": int, "outcomes": {...},
    "seconds": float}}``; with ``dry_run`` the counts of problems and candidates and, where this machine has the
    run's device, ``missing``: how many candidates the run would evaluate (:func:`missing_candidates`).
    """
    summaries: dict[str, dict] = {}
    for spec in study.runs:
        device = spec.device if dry_run else study_device(spec.device)
        problems, candidates = load_run_inputs(spec)
        info: dict[str, Any] = {"problems": len(problems), "candidates": len(candidates), "device": device,
                                "records": relative_to_root(spec.records, study.root)}
        cfg = run_config(study, spec, device, progress)
        if dry_run:
            try:
                info["missing"] = len(missing_candidates(problems, candidates, RecordStore(spec.records), cfg,
                                                         hardware_label(resolve_device(device))))
            except NoGPUError:
                info["missing"] = None  # the run's hardware is not this machine's: its keys cannot be made here
            summaries[spec.run] = info
            continue
        store = RecordStore(spec.records)
        interpret = "1" if device == "cpu" else os.environ.get("TRITON_INTERPRET")
        with scoped_environ(TRITON_INTERPRET=interpret):
            if spec.ray is None:
                batch = evaluate_batch(problems, candidates, store, cfg)
            else:
                batch = evaluate_batch_ray(problems, candidates, store, cfg, spec.ray or None)
        info.update(written=batch.written, already_done=batch.already_done, unmatched=len(batch.unmatched),
                    outcomes=dict(batch.outcomes), seconds=round(batch.seconds, 1))
        summaries[spec.run] = info
    return summaries


def run_study(study_file: str | os.PathLike | None = None, *, only_notebooks: bool = False,
              only_evaluations: bool = False, root: str | os.PathLike | None = None,
              kernelbench_dir: str | os.PathLike | None = None, progress: bool = True) -> dict:
    """Run the study: missing evaluations (unless ``only_notebooks``), then every notebook (unless
    ``only_evaluations``), then, if it wrote records (or the history is new), one line appended to
    ``<reports>/study_provenance.jsonl``. ``study_file`` ``None`` picks
    :func:`kbstudy.pipeline.study_config.default_study_file`. Returns the provenance dict of this invocation (written
    or not).

    Raises ``FileNotFoundError``/:class:`StudyError` for a bad study file, :class:`StudyError` for a GPU run on a
    machine without a GPU, and papermill's ``PapermillExecutionError`` if a notebook fails.
    """
    if only_notebooks and only_evaluations:
        raise StudyError("only_notebooks and only_evaluations exclude each other")
    study = load_study(study_file if study_file is not None else default_study_file(root), root=root,
                       kernelbench_dir=kernelbench_dir)
    runs = {} if only_notebooks else run_evaluations(study, progress=progress)
    notebooks = {} if only_evaluations else render_notebooks(study)
    record = {
        "study": study.name,
        "study_file": relative_to_root(study.path, study.root),
        "only_notebooks": only_notebooks,
        "runs": runs,
        "notebooks": notebooks,
        "git_commit": provenance.git_commit(),
        "kbstudy_version": kbstudy.__version__,
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
