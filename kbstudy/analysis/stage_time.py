"""Where an evaluation batch's time goes, from its records: the CUDA builds, the reference processes, each stage of
the candidates' processes, and waiting (for a build, for the device lock). Pure pandas over record frames.

The sources, all written by the harness (``kbstudy.harness``):

* a reference record's ``metadata.stage_seconds``: ``build_wait`` (its problem waiting for its candidates' builds),
  ``setup`` (inputs, expected outputs, flags), ``gpu_wait`` (waiting to time alone), ``time`` (the baselines);
* an evaluation record's ``metadata.stage_seconds``: ``start`` (getting a process), ``gpu_wait``, then the candidate's
  stages (``load``, ``construct``, ``inputs``, ``run_first``, ``run``, ``run_extra``, ``verify``, ``time``,
  ``profile``), and ``metadata.build_seconds`` / ``build_done_s`` (its build process's wall time; when that build ended,
  seconds after the batch started);
* ``metadata.batch`` on both (``started_unix``, ``concurrency``) and ``metadata.span_unix`` on evaluations: a batch's
  wall time runs from its start to its last candidate's end.

Stage totals are summed over records: with several problems in flight (``concurrency`` > 1) or builds running beside
the evaluation, they add up to more than the wall time, and the share of the wall time each one takes says which is on
the critical path. Records made before these fields existed contribute the stages they have.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: stage -> what it is part of, in the order a breakdown lists them
CATEGORIES = {
    "build": "build", "build_wait": "waiting", "setup": "reference", "reference_gpu_wait": "waiting",
    "reference_time": "reference", "start": "candidate", "gpu_wait": "waiting", "load": "candidate",
    "construct": "candidate", "inputs": "candidate", "run_first": "candidate", "run": "candidate",
    "run_extra": "candidate", "verify": "candidate", "time": "candidate", "profile": "candidate",
}
#: a reference record's stage names, as the breakdown names them (apart from the candidates' stages of the same name)
_REFERENCE_STAGES = {"build_wait": "build_wait", "setup": "setup", "gpu_wait": "reference_gpu_wait",
                     "time": "reference_time"}


def _meta(value, key: str):
    return value.get(key) if isinstance(value, dict) else None


def _batch_of(metadata) -> float | None:
    batch = _meta(metadata, "batch")
    return batch.get("started_unix") if isinstance(batch, dict) else None


def stage_breakdown(evaluations: pd.DataFrame, references: pd.DataFrame | None = None,
                    by: tuple[str, ...] = ("run", "hardware")) -> pd.DataFrame:
    """Seconds per stage, per group of ``by``: one row per (group, stage) with ``category`` (build, reference,
    candidate, waiting), ``seconds`` (summed over records), ``records`` (evaluations of the group that ran) and
    ``per_kernel_s``. Skipped evaluations (never run) are left out; ``build`` is the build processes' wall time."""
    by = list(by)
    evals = evaluations[evaluations["outcome"] != "skipped"] if len(evaluations) else evaluations
    rows = []
    groups = evals.groupby(by, sort=True, dropna=False) if len(evals) else []
    for keys, g in groups:
        keys = keys if isinstance(keys, tuple) else (keys,)
        totals: dict[str, float] = {}
        for metadata in g["metadata"]:
            for stage, sec in (_meta(metadata, "stage_seconds") or {}).items():
                totals[stage] = totals.get(stage, 0.0) + float(sec or 0.0)
            build = _meta(metadata, "build_seconds")
            if build is not None:
                totals["build"] = totals.get("build", 0.0) + float(build)
        if references is not None and len(references):
            mask = np.ones(len(references), dtype=bool)
            for column, key in zip(by, keys):
                mask &= (references[column] == key).to_numpy() if not pd.isna(key) else \
                    references[column].isna().to_numpy()
            for metadata in references[mask]["metadata"]:
                for stage, sec in (_meta(metadata, "stage_seconds") or {}).items():
                    name = _REFERENCE_STAGES.get(stage, f"reference_{stage}")
                    totals[name] = totals.get(name, 0.0) + float(sec or 0.0)
        order = [s for s in CATEGORIES if s in totals] + sorted(s for s in totals if s not in CATEGORIES)
        for stage in order:
            rows.append({**dict(zip(by, keys)), "category": CATEGORIES.get(stage, "reference" if
                         stage.startswith("reference_") else "candidate"), "stage": stage,
                         "seconds": totals[stage], "records": len(g), "per_kernel_s": totals[stage] / len(g)})
    columns = [*by, "category", "stage", "seconds", "records", "per_kernel_s"]
    return pd.DataFrame(rows, columns=columns)


def batch_walls(evaluations: pd.DataFrame, references: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per batch (records carrying ``metadata.batch``): ``run``, ``hardware``, ``started_unix``,
    ``concurrency``, ``records`` (evaluations that ran), ``wall_s`` (from the batch's start to its last candidate's
    end), ``first_record_s`` (to its first candidate's end), ``last_build_s`` (when its last build ended) and
    ``kernels_per_minute`` (records over the wall time). Empty where no record says which batch it came from."""
    rows = []
    evals = evaluations[evaluations["outcome"] != "skipped"] if len(evaluations) else evaluations
    if not len(evals):
        return pd.DataFrame(rows)
    data = evals.assign(_batch=[_batch_of(m) for m in evals["metadata"]])
    data = data[data["_batch"].notna()]
    for (run, hardware, started), g in data.groupby(["run", "hardware", "_batch"], sort=True):
        ends = [(_meta(m, "span_unix") or [None, None])[1] for m in g["metadata"]]
        ends = [e for e in ends if e is not None]
        if not ends:
            continue
        builds = [_meta(m, "build_done_s") for m in g["metadata"]]
        builds = [b for b in builds if b is not None]
        wall = max(ends) - started
        concurrency = (_meta(g["metadata"].iloc[0], "batch") or {}).get("concurrency")
        rows.append({"run": run, "hardware": hardware, "started_unix": started, "concurrency": concurrency,
                     "records": len(g), "wall_s": wall, "first_record_s": min(ends) - started,
                     "last_build_s": max(builds) if builds else np.nan,
                     "kernels_per_minute": len(g) / (wall / 60.0) if wall > 0 else np.nan})
    return pd.DataFrame(rows)
