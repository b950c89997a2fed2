"""Published numbers beside ours: the KernelBench leaderboard's speedups and KernelBench's baseline timings.

Two published sources, both read from the shared KernelBench folder (``../shared/kernelbench``, see its README):

* **The leaderboard** (``leaderboard_kernels.jsonl``): per kernel (level, 0-based ``problem_id``, model), the
  published ``torch_speedup`` (PyTorch eager time / kernel time, on the leaderboard's own GPU, at the **v0** problem
  sizes it was written for), ``torch_compile_speedup``, ``baseline_torch_time_ms`` and ``kernel_time_ms``. Every
  kernel there is the fastest *correct* one of its (problem, model) under the leaderboard's check (KernelBench v0:
  ``torch.allclose`` with atol = rtol = 1e-2 in fp32), so the published verdict is "correct" for all of them.
  :func:`load_published` reads it through :func:`kbstudy.harness.candidates.load_candidates` (1-based ids, source SHA-256).
* **Baseline timings** (``baseline_timing/<set>__baseline_time_torch[_compile_inductor_default].json``): PyTorch
  eager and ``torch.compile`` (Inductor, default mode) times per level and problem **file name**, in ms (``mean``,
  ``std``, ``min``, ``max``, 3 significant digits, 100 trials). The files carry **no hash of the source they
  timed**. Which source that was follows from KernelBench's history (research notes, section 5): ``H100_Modal`` was
  generated at KernelBench ``1f8d20f`` (2025-12-31) with the v0.1 (enlarged) problems, so it timed the *current*
  problems except those whose reference changed afterwards (:data:`STALE_BASELINES`: level-1 12 and 97, changed in
  January 2026); ``H100_PCIe_LambdaLabs`` (July 2025) additionally predates the fix of level-1 92. The v0 problems
  (other sizes, other sources) were never timed there. Our H200 eager times agree: memory-bound problems run at
  0.70-0.82x the H100 time (the H100/H200 bandwidth ratio is 3.35/4.8 = 0.70), GEMMs at ~1.0x, while 12 (0.02x) and
  97 (2.9x) are far off, as stale entries should be.

**Matching rule of the baseline comparison** (:func:`compare_baselines`): a published entry (level, file name) is
compared with our eager reference time of the problem whose name is that file name **and whose source SHA-256 equals
the current problem's** (the shared ``kernelbench_levels_1-3.jsonl``, KernelBench ``423217d``); a record of another
source under the same name (a v0 problem, an edited problem) does not match. Entries in :data:`STALE_BASELINES` are
excluded with their reason. The comparison is cross-GPU (H200 here, H100 there): report per-problem ratios and their
rank correlation, never absolute agreement.

**"Changed materially"** (:func:`material_changes`), per leaderboard kernel, ours against the published numbers:

* *verdict flip*: the published verdict is correct; ours is not (no ``evaluated`` outcome, or the chosen verdict is
  false);
* *speedup change*: our speedup / the published ``torch_speedup`` outside [0.5, 2], or the two on different sides
  of 1 (one > 1, the other <= 1).

Each flagged kernel gets a ``reason`` derived from its record: the outcome and its error, the failing check
(KernelBench's tolerance, noting where the difference is within v0's 1e-2; kbstudy's ``kbstudy_failure``), the
problem's change since v0 (:func:`kbstudy.harness.problems.version_changes`) and which time moved: our eager time against
``baseline_torch_time_ms``, our kernel time against ``kernel_time_ms``.

Rank correlations are Spearman's rho computed by pandas (``DataFrame.corr(method="spearman")``).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from kbstudy.analysis.scoring import geometric_mean
from kbstudy.harness.candidates import DTYPE_SCAN_KEY, load_candidates
from kbstudy.harness.problems import load_problems, paper_category, version_changes
from kbstudy.records.schema import error_headline

LEADERBOARD_FILE = "leaderboard_kernels.jsonl"
CURRENT_PROBLEMS_FILE = "kernelbench_levels_1-3.jsonl"
V0_PROBLEMS_FILE = "kernelbench_v0_problems.jsonl"
BASELINE_DIR = "baseline_timing"
#: The baseline sets KernelBench ships (``results/timing/<set>``).
BASELINE_SETS = ("H100_Modal", "H100_PCIe_LambdaLabs")
#: File suffix of each baseline kind.
BASELINE_KINDS = {"eager": "baseline_time_torch", "compile": "baseline_time_torch_compile_inductor_default"}
#: Published entries whose problem's reference changed after the timing was measured, so they time another source
#: than the current problem (shared KernelBench README; research notes section 5; KernelBench ``changelog/v0.2``).
STALE_BASELINES: dict[str, dict[tuple[int, int], str]] = {
    "H100_Modal": {
        (1, 12): "reference changed after the timing (Jan 2026: diag(A) @ B became A.unsqueeze(1) * B)",
        (1, 97): "reference changed after the timing (SDPA timed in hard-coded fp16 on CUDA; now fp32)",
    },
    "H100_PCIe_LambdaLabs": {
        (1, 12): "reference changed after the timing (Jan 2026: diag(A) @ B became A.unsqueeze(1) * B)",
        (1, 92): "reference changed after the timing (exclusive cumsum fixed after July 2025)",
        (1, 97): "reference changed after the timing (SDPA timed in hard-coded fp16 on CUDA; now fp32)",
    },
}
#: The speedup ratio band (ours / published) inside which a change is not material.
MATERIAL_BAND = (0.5, 2.0)
#: KernelBench v0's fp32 tolerance (atol = rtol), under which the leaderboard kernels were judged correct.
V0_TOLERANCE = 1e-2


# ------------------------------------------------------------------------------------------------ loading


def kernelbench_file(kernelbench_dir: str | Path, name: str) -> Path:
    """``<kernelbench_dir>/<name>``; raises ``FileNotFoundError`` naming the folder if it is missing."""
    path = Path(kernelbench_dir) / name
    if not path.exists():
        raise FileNotFoundError(f"{name} not found in the KernelBench data folder {kernelbench_dir}")
    return path


def load_published(path: str | Path, *, levels: Iterable[int] | None = (1,)) -> pd.DataFrame:
    """The leaderboard's published numbers, one row per kernel.

    Args:
        path: ``leaderboard_kernels.jsonl``, or the KernelBench data folder holding it.
        levels: keep these levels (``None``: all).

    Returns columns ``level``, ``problem_id`` (1-based, as our records), ``model_config`` (the leaderboard's
    ``display_name``, as our records), ``model``, ``file`` (leaderboard id), ``candidate_sha256`` (SHA-256 of the
    kernel source, as ``EvaluationRecord.candidate_sha256``), ``published_speedup`` (``torch_speedup``),
    ``published_compile_speedup``, ``published_eager_ms`` (``baseline_torch_time_ms``), ``published_compile_ms``,
    ``published_kernel_ms`` (``kernel_time_ms``), ``float32_only`` (:func:`kbstudy.harness.candidates.scan_dtype_support`).
    Times in ms on the leaderboard's GPU at the v0 sizes. Raises ``FileNotFoundError``.
    """
    path = Path(path)
    if path.is_dir():
        path = kernelbench_file(path, LEADERBOARD_FILE)
    rows = []
    for c in load_candidates(path, levels=levels):
        m = c.metadata
        rows.append({"level": c.level, "problem_id": c.problem_id, "model_config": c.model_config,
                     "model": m.get("model"), "file": m.get("file"), "candidate_sha256": c.sha256,
                     "published_speedup": m.get("torch_speedup"),
                     "published_compile_speedup": m.get("torch_compile_speedup"),
                     "published_eager_ms": m.get("baseline_torch_time_ms"),
                     "published_compile_ms": m.get("baseline_torch_compile_time_ms"),
                     "published_kernel_ms": m.get("kernel_time_ms"),
                     "float32_only": bool((m.get(DTYPE_SCAN_KEY) or {}).get("float32_only"))})
    return pd.DataFrame(rows).sort_values(["level", "problem_id", "model_config"]).reset_index(drop=True)


def largest_configurations(published: pd.DataFrame, k: int = 5, *, level: int = 1) -> list[str]:
    """The ``k`` model configurations with the most kernels at ``level`` (ties by name). On level 1: claude-3.5-sonnet
    (53), gpt-o1 (51), llama-3.1-405b (40), gpt-4o (38), deepseek-coder (37)."""
    counts = published[published["level"] == level]["model_config"].value_counts()
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [name for name, _ in ordered[:k]]


def load_baseline_timings(kernelbench_dir: str | Path, baseline_set: str = "H100_Modal") -> pd.DataFrame:
    """KernelBench's published baseline timings of one set, eager and ``torch.compile`` side by side.

    Args:
        kernelbench_dir: the KernelBench data folder (holding ``baseline_timing/``).
        baseline_set: one of :data:`BASELINE_SETS`.

    Returns one row per (level, problem file name) with ``level``, ``problem_name``, ``problem_id`` (from the name),
    ``eager_mean_ms``, ``eager_std_ms``, ``eager_min_ms``, ``eager_max_ms``, ``eager_num_trials``, the same for
    ``compile_``, ``gpu`` (the file's ``hardware``) and ``baseline_set``. Times in ms.

    Raises ``FileNotFoundError`` if a file is missing, ``ValueError`` for an unknown set.
    """
    if baseline_set not in BASELINE_SETS:
        raise ValueError(f"unknown baseline set {baseline_set!r} (known: {BASELINE_SETS})")
    frames = []
    for kind, suffix in BASELINE_KINDS.items():
        data = json.loads(kernelbench_file(kernelbench_dir, f"{BASELINE_DIR}/{baseline_set}__{suffix}.json").read_text())
        rows = []
        for level_key, problems in data.items():
            level = int(re.sub(r"\D", "", level_key))
            for name, t in problems.items():
                rows.append({"level": level, "problem_name": name, f"{kind}_mean_ms": t.get("mean"),
                             f"{kind}_std_ms": t.get("std"), f"{kind}_min_ms": t.get("min"),
                             f"{kind}_max_ms": t.get("max"), f"{kind}_num_trials": t.get("num_trials"),
                             f"{kind}_gpu": t.get("hardware")})
        frames.append(pd.DataFrame(rows))
    out = frames[0].merge(frames[1], on=["level", "problem_name"], how="outer")
    out["gpu"] = out["eager_gpu"].fillna(out["compile_gpu"])
    out = out.drop(columns=["eager_gpu", "compile_gpu"])
    out["problem_id"] = out["problem_name"].str.extract(r"^(\d+)_", expand=False).astype(int)
    out["baseline_set"] = baseline_set
    return out.sort_values(["level", "problem_id"]).reset_index(drop=True)


def load_version_changes(kernelbench_dir: str | Path, levels: Iterable[int] | None = (1,)) -> pd.DataFrame:
    """:func:`kbstudy.harness.problems.version_changes` from the v0 to the current problems of the shared data, as a frame
    with ``level``, ``problem_id``, ``v0_name``, ``current_name``, ``v0_sha256``, ``current_sha256``, ``change``."""
    kb = Path(kernelbench_dir)
    old = load_problems(kernelbench_file(kb, V0_PROBLEMS_FILE), levels=levels)
    new = load_problems(kernelbench_file(kb, CURRENT_PROBLEMS_FILE), levels=levels)
    return pd.DataFrame([{"level": c.level, "problem_id": c.problem_id, "v0_name": c.old_name,
                          "current_name": c.new_name, "v0_sha256": c.old_sha256, "current_sha256": c.new_sha256,
                          "change": c.change} for c in version_changes(old, new)])


# ------------------------------------------------------------------------------------------------ statistics


def rank_correlation(x: Iterable[float], y: Iterable[float]) -> tuple[float, int]:
    """Spearman's rho of two paired series over the pairs where both are finite (pandas
    ``DataFrame.corr(method="spearman")``), and the number of pairs. NaN for fewer than 3 pairs."""
    pairs = pd.DataFrame({"x": pd.to_numeric(pd.Series(list(x)), errors="coerce"),
                          "y": pd.to_numeric(pd.Series(list(y)), errors="coerce")})
    pairs = pairs[np.isfinite(pairs["x"]) & np.isfinite(pairs["y"])]
    if len(pairs) < 3:
        return float("nan"), len(pairs)
    return float(pairs.corr(method="spearman").loc["x", "y"]), len(pairs)


# ------------------------------------------------------------------------------------------------ leaderboard


_RECORD_COLUMNS = ("run", "problem_name", "problem_version", "problem_sha256", "category", "precision", "hardware",
                   "outcome", "error_message", "compiled", "kernelbench_correct", "kernelbench_max_abs_diff",
                   "kbstudy_correct", "kbstudy_failure", "rel_l2_error", "coverage", "candidate_ms_median",
                   "eager_ms_median", "compile_ms_median", "speedup_vs_eager", "speedup_vs_compile")


def join_published(frame: pd.DataFrame, published: pd.DataFrame, *, problem_version: str = "v0",
                   precision: str = "fp32", size_scale: float = 1.0) -> pd.DataFrame:
    """One row per published kernel, with our record of it on ``problem_version`` at ``precision`` and full size.

    Join key: (level, problem_id, model_config); the record must also be of the same kernel source
    (``candidate_sha256``), so a kernel edited since publication never matches. Published kernels without such a
    record keep NaN in our columns and ``has_record`` False.

    Args:
        frame: evaluation records (one row per EvaluationRecord, e.g. :func:`kbstudy.records.frames.load_frames`
            with ``first_attempts``).
        published: :func:`load_published`.
        problem_version: ``"v0"`` (the sizes the kernels were written and timed for) or ``"current"``.
        precision, size_scale: which of our evaluations to take.

    Returns the published columns plus, from the record, ``run``, ``problem_name``, ``outcome``, the verdicts and
    their details, our times in ms and ``speedup`` (= ``speedup_vs_eager``), and ``has_record``.
    Raises ``ValueError`` if a (level, problem_id, model_config) has several matching records (merge runs first).
    """
    ours = frame[(frame["problem_version"] == problem_version) & (frame["precision"] == precision)
                 & (pd.to_numeric(frame["size_scale"]) == float(size_scale))]
    ours = ours[["level", "problem_id", "model_config", "candidate_sha256",
                 *[c for c in _RECORD_COLUMNS if c in ours.columns]]]
    dup = ours.duplicated(["level", "problem_id", "model_config", "candidate_sha256"], keep=False)
    if dup.any():
        raise ValueError(f"{int(dup.sum())} records share a published kernel at {problem_version}/{precision}: "
                         "deduplicate first (kbstudy.records.frames.load_frames, first_attempts=True)")
    out = published.merge(ours, on=["level", "problem_id", "model_config", "candidate_sha256"], how="left")
    out["has_record"] = out["outcome"].notna()
    out["problem_version"] = problem_version
    out["precision"] = precision
    out["speedup"] = pd.to_numeric(out["speedup_vs_eager"], errors="coerce")
    return out


def _truthy(v) -> bool:
    return bool(v) if v is not None and not (isinstance(v, float) and math.isnan(v)) else False


def _finite(v) -> bool:
    return v is not None and isinstance(v, (int, float, np.floating)) and math.isfinite(float(v))


def material_changes(joined: pd.DataFrame, *, correctness: str = "kbstudy", band: tuple[float, float] = MATERIAL_BAND,
                     changes: pd.DataFrame | None = None) -> pd.DataFrame:
    """Flag the published kernels whose verdict or speedup changed materially (rule in the module docstring).

    Args:
        joined: :func:`join_published`.
        correctness: the verdict of ours that decides a flip: ``"kbstudy"`` or ``"kernelbench"``.
        band: (low, high) of the speedup ratio ours / published that is not material.
        changes: :func:`load_version_changes` (adds the problem's change since v0 to the reasons of records on the
            current problems); ``None`` leaves it out.

    Returns ``joined`` with ``speedup_ratio`` (ours / published), ``eager_ratio`` (our eager ms / published eager ms),
    ``kernel_ratio`` (our kernel ms / published kernel ms), ``verdict_flip``, ``speedup_change``, ``changed`` and
    ``reason`` (``""`` when not changed; kernels without a record are not flagged, their reason says so).
    """
    if correctness not in ("kbstudy", "kernelbench"):
        raise ValueError(f"correctness must be 'kbstudy' or 'kernelbench', got {correctness!r}")
    low, high = band
    out = joined.copy()
    num = lambda c: pd.to_numeric(out[c], errors="coerce")  # noqa: E731
    out["speedup_ratio"] = num("speedup") / num("published_speedup")
    out["eager_ratio"] = num("eager_ms_median") / num("published_eager_ms")
    out["kernel_ratio"] = num("candidate_ms_median") / num("published_kernel_ms")
    verdict = f"{correctness}_correct"
    change_of = {}
    if changes is not None and len(changes):
        change_of = {(int(r.level), int(r.problem_id)): r for r in changes.itertuples()}
    flips, speed_changes, reasons = [], [], []
    for row in out.itertuples():
        has = bool(row.has_record)
        ok = has and row.outcome == "evaluated" and _truthy(getattr(row, verdict))
        flip = has and not ok
        ours, pub = row.speedup, row.published_speedup
        speed_change = bool(ok and _finite(ours) and _finite(pub) and pub > 0 and (
            not (low <= ours / pub <= high) or ((ours > 1) != (pub > 1))))
        why = []
        if not has:
            why.append("no record yet")
        if has and row.problem_version == "current":
            ch = change_of.get((int(row.level), int(row.problem_id)))
            if ch is not None and ch.change == "replaced":
                why.append(f"problem replaced since v0 (v0: {ch.v0_name}, now {ch.current_name})")
            elif ch is not None and ch.change == "reference_changed":
                why.append("reference changed since v0")
            elif ch is not None and ch.change == "sizes_or_inputs" and (flip or speed_change):
                why.append("sizes/inputs changed since v0")
        if flip:
            if row.outcome != "evaluated":
                why.append(f"{row.outcome}: {error_headline(row.error_message)}".rstrip(": "))
            elif verdict == "kbstudy_correct" and _truthy(row.kernelbench_correct):
                why.append(f"passes KernelBench's check, fails kbstudy's: {row.kbstudy_failure}"
                           + (f" (rel L2 {row.rel_l2_error:.2g})" if _finite(row.rel_l2_error) else ""))
            else:
                diff = row.kernelbench_max_abs_diff
                if _finite(diff) and diff <= V0_TOLERANCE:
                    why.append(f"fails KernelBench's fp32 tolerance 1e-4 but within v0's 1e-2 (max |diff| {diff:.2g})")
                elif _finite(diff):
                    why.append(f"wrong output (max |diff| {diff:.3g})")
                else:
                    why.append("wrong output" + (f": {row.kbstudy_failure}" if row.kbstudy_failure else ""))
        if speed_change:
            e, k = row.eager_ratio, row.kernel_ratio
            part = f"speedup {ours:.3g}x vs published {pub:.3g}x"
            if _finite(e) and _finite(k) and e > 0 and k > 0:
                which = "baseline" if abs(math.log(e)) > abs(math.log(k)) else "kernel"
                part += (f"; eager {row.eager_ms_median:.3g} ms vs {row.published_eager_ms:.3g} ms, kernel "
                         f"{row.candidate_ms_median:.3g} ms vs {row.published_kernel_ms:.3g} ms (mostly the {which})")
            why.append(part)
        flips.append(flip)
        speed_changes.append(speed_change)
        reasons.append("; ".join(why) if (flip or speed_change or not has) else "")
    out["verdict_flip"] = flips
    out["speedup_change"] = speed_changes
    out["changed"] = out["verdict_flip"] | out["speedup_change"]
    out["reason"] = reasons
    return out


def published_agreement(compared: pd.DataFrame) -> pd.DataFrame:
    """Per model configuration and over all: kernels published, with a record, correct here, speedup pairs, Spearman
    rho of our speedup against the published one, median speedup ratio, and the counts flagged by
    :func:`material_changes` (verdict flips, speedup changes). ``compared``: :func:`material_changes`."""
    rows = []
    groups = [(name, g) for name, g in compared.groupby("model_config", sort=True)] + [("all", compared)]
    for name, g in groups:
        rho, n_pairs = rank_correlation(g["speedup"], g["published_speedup"])
        rows.append({"model_config": name, "published": len(g), "with_record": int(g["has_record"].sum()),
                     "correct_here": int((g["has_record"] & ~g["verdict_flip"]).sum()), "speedup_pairs": n_pairs,
                     "spearman_rho": rho, "median_speedup_ratio": float(g["speedup_ratio"].median()),
                     "verdict_flips": int(g["verdict_flip"].sum()), "speedup_changes": int(g["speedup_change"].sum())})
    return pd.DataFrame(rows)


def id_ranges(ids: Iterable[int]) -> str:
    """Problem ids as compact ranges: ``[1, 2, 3, 5, 7, 8]`` -> ``"1-3, 5, 7-8"``; ``"-"`` for none."""
    values = sorted({int(i) for i in ids})
    if not values:
        return "-"
    parts, start, prev = [], values[0], values[0]
    for v in values[1:] + [None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        parts.append(f"{start}-{prev}" if prev > start else f"{start}")
        if v is not None:
            start = prev = v
    return ", ".join(parts)


def coverage(frame: pd.DataFrame, published: pd.DataFrame, configs: Iterable[str] | None = None, *,
             versions: Iterable[str] = ("current", "v0"), precisions: Iterable[str] = ("fp32", "bf16"),
             size_scale: float = 1.0) -> pd.DataFrame:
    """How much of the leaderboard the records hold, per model configuration, problem version and precision: a
    partial run (made phase by phase) gives tables of the problems measured so far, which this says.

    A published kernel counts as measured when ``frame`` has a record of it (same level, problem_id, model_config
    and ``candidate_sha256``; any outcome, ``skipped`` included) at that version, precision and ``size_scale``.

    Args:
        frame: evaluation records (:func:`kbstudy.records.frames.load_frames` with ``first_attempts``).
        published: :func:`load_published` (its levels are the ones counted).
        configs: these configurations, in this order (``None``: every configuration of ``published``, sorted).
        versions, precisions: the grid of runs; every combination gets a row, measured or not.

    Returns ``model_config``, ``problem_version``, ``precision``, ``published`` (the configuration's kernels),
    ``with_record``, ``missing`` and ``problems`` (the problem ids with a record, :func:`id_ranges`).
    """
    configs = sorted(published["model_config"].unique()) if configs is None else list(configs)
    keys = ["level", "problem_id", "model_config", "candidate_sha256"]
    ours = frame[pd.to_numeric(frame["size_scale"]) == float(size_scale)]
    rows = []
    for config in configs:
        kernels = published[published["model_config"] == config][keys]
        for version in versions:
            for precision in precisions:
                part = ours[(ours["problem_version"] == version) & (ours["precision"] == precision)]
                hit = kernels.merge(part[keys].drop_duplicates(), on=keys, how="inner")
                rows.append({"model_config": config, "problem_version": version, "precision": precision,
                             "published": len(kernels), "with_record": len(hit),
                             "missing": len(kernels) - len(hit), "problems": id_ranges(hit["problem_id"])})
    return pd.DataFrame(rows, columns=["model_config", "problem_version", "precision", "published", "with_record",
                                       "missing", "problems"])


# ------------------------------------------------------------------------------------------------ baselines


def compare_baselines(references: pd.DataFrame, baselines: pd.DataFrame, current: pd.DataFrame, *,
                      precision: str = "fp32", size_scale: float = 1.0,
                      stale: dict[tuple[int, int], str] | None = None) -> pd.DataFrame:
    """Our eager and ``torch.compile`` reference times of the current problems against published baseline timings,
    one row per published entry (matching rule in the module docstring).

    Args:
        references: our ReferenceRecords (``kbstudy.records.frames.load_frames``), any runs; rows with outcome
            ``evaluated`` at ``precision`` and ``size_scale`` are used, the latest (``created_utc``) per problem source.
        baselines: :func:`load_baseline_timings`.
        current: the current problems' names and hashes: columns ``level``, ``problem_id``, ``current_name``,
            ``current_sha256`` (:func:`load_version_changes` has them).
        stale: (level, problem_id) -> reason to exclude; default :data:`STALE_BASELINES` of the baselines' set.

    Returns ``level``, ``problem_id``, ``problem_name``, ``category`` (paper category), ``published_eager_ms``,
    ``published_compile_ms``, ``ours_eager_ms`` (median), ``ours_compile_ms``, ``eager_ratio`` and ``compile_ratio``
    (ours / published), ``hardware`` (ours), ``included`` and ``excluded_reason``.
    """
    if stale is None:
        sets = set(baselines["baseline_set"]) if "baseline_set" in baselines else set()
        stale = {k: v for s in sets for k, v in STALE_BASELINES.get(s, {}).items()}
    refs = references[(references["outcome"] == "evaluated") & (references["precision"] == precision)
                      & (pd.to_numeric(references["size_scale"]) == float(size_scale))].copy()
    refs = refs.sort_values("created_utc").drop_duplicates("problem_sha256", keep="last")
    by_sha = {r.problem_sha256: r for r in refs.itertuples()}
    names_seen = {(int(r.level), r.problem_name): r.problem_sha256 for r in refs.itertuples()}
    cur = {(int(r.level), r.current_name): r for r in current.itertuples()}
    rows = []
    for b in baselines.itertuples():
        key = (int(b.level), int(b.problem_id))
        problem = cur.get((int(b.level), b.problem_name))
        sha = problem.current_sha256 if problem is not None else None
        ours = by_sha.get(sha) if sha else None
        reason = ""
        if problem is None:
            reason = "no current problem of this name"
        elif key in stale:
            reason = stale[key]
        elif ours is None:
            other = names_seen.get((int(b.level), b.problem_name))
            reason = (f"our record is of another source (sha256 {other[:12]})" if other
                      else "no reference timing of ours yet")
        row = {"level": int(b.level), "problem_id": int(b.problem_id), "problem_name": b.problem_name,
               "category": paper_category(b.problem_name), "published_eager_ms": b.eager_mean_ms,
               "published_compile_ms": b.compile_mean_ms,
               "ours_eager_ms": getattr(ours, "eager_ms_median", np.nan) if ours is not None else np.nan,
               "ours_compile_ms": getattr(ours, "compile_ms_median", np.nan) if ours is not None else np.nan,
               "hardware": ours.hardware if ours is not None else None,
               "included": reason == "", "excluded_reason": reason}
        rows.append(row)
    out = pd.DataFrame(rows)
    for kind in ("eager", "compile"):
        out[f"{kind}_ratio"] = (pd.to_numeric(out[f"ours_{kind}_ms"], errors="coerce")
                                / pd.to_numeric(out[f"published_{kind}_ms"], errors="coerce"))
    return out


def baseline_summary(comparison: pd.DataFrame, *, by: str | None = None) -> pd.DataFrame:
    """Summary of :func:`compare_baselines` over the included problems, per ``by`` (e.g. ``"category"``) or over all:
    ``n``, median and geometric-mean ratio ours / published, and Spearman rho of our times against the published
    ones, for eager and ``torch.compile``."""
    inc = comparison[comparison["included"] & comparison["ours_eager_ms"].notna()]
    groups = [("all", inc)] if by is None else list(inc.groupby(by, sort=True))
    rows = []
    for name, g in groups:
        row = {by or "problems": name, "n": len(g)}
        for kind in ("eager", "compile"):
            rho, _ = rank_correlation(g[f"ours_{kind}_ms"], g[f"published_{kind}_ms"])
            row[f"{kind}_ratio_median"] = float(g[f"{kind}_ratio"].median()) if len(g) else float("nan")
            row[f"{kind}_ratio_geomean"] = geometric_mean(pd.to_numeric(g[f"{kind}_ratio"], errors="coerce"))
            row[f"{kind}_spearman_rho"] = rho
        rows.append(row)
    return pd.DataFrame(rows)
