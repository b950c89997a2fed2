"""The paper's headline table and what sits around it: which records count, bf16 dtype support, the same kernel on
two problem versions, and evaluation throughput. Pure pandas over evaluation records; no torch.

**Headline table** (:func:`headline_table`), per model configuration (and problem version, precision), over its
*attempts* (``kbstudy.analysis.scoring.attempts``: every record except ``skipped`` and ``reference_error``):

* ``correct_pct``: 100 * #correct / n under the chosen verdict (kbstudy's by default);
* ``verified_speedups``: #(correct, speedup > 1 and the speedup verified), the kernels that are correct and
  verifiably faster than the baseline (PyTorch eager by default): the interval excludes 1 and clears the noise margin
  (``kbstudy.analysis.scoring.attempts``'s ``verified``), i.e. the numerator of fast_1 and ``summarize``'s
  ``n_verified_faster``; ``verified_speedup_median``: the median speedup among those. A point estimate above 1
  that the rule does not verify (e.g. ``null:reference`` at 1.01) is not a speedup;
* ``conv_solved``: convolution problems with a correct kernel (of ``conv_n`` attempted), ``conv_faster``: of those,
  verifiably faster than the baseline;
* per operator category (:func:`category_table`, the paper's eight categories, ``kbstudy.harness.problems.paper_category``):
  n, correct, verified speedups and their median.

:func:`coverage` says how much of the leaderboard the records hold (the run is made phase by phase: until it ends, the
table is of the problems measured so far).

**dtype support** (:func:`dtype_status`): at bf16 or fp16, a kernel hard-coded to float32 is not a wrong bf16 kernel
but no bf16 kernel at all. A record is ``float32_only`` when the evaluator skipped it for that reason
(``outcome == "skipped"`` with ``metadata["skip_reason"] == "float32_only"``), or its failure message is the dtype
error of such code (:data:`DTYPE_ERROR_RE`), or it failed some other way while the static scan
(``metadata["dtype_scan"]``, :func:`kbstudy.harness.candidates.scan_dtype_support`) flags it. The headline table counts them
in ``n_float32_only`` and gives ``correct_pct_dtype_ok``, the correct rate over the other attempts.

**Throughput** (:func:`throughput`): kernels evaluated per GPU-minute, from the records' ``created_utc`` and
``worker_wall_s``. Records of one run on one machine are split into *bursts* wherever two consecutive records are
more than ``gap_s`` apart (a new device call, a rebuild); a burst lasts from its first record's start
(``created_utc - worker_wall_s``) to its last record's ``created_utc``. GPU-minutes = the sum of burst lengths, so
the figure covers reference timing, verdicts and candidate timing, but not CUDA builds before a burst nor machine
start-up. ``worker_minutes`` (sum of ``worker_wall_s``) and the ``metadata.stage_seconds`` totals break it down.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import pandas as pd

from kbstudy.analysis import scoring
from kbstudy.harness.problems import PAPER_CATEGORIES, operator_category, paper_category

#: Messages of a float32-only kernel given bf16/fp16 tensors: ``data_ptr<float>()`` raises "expected scalar type Float
#: but found BFloat16"; ``AT_DISPATCH_FLOATING_TYPES`` raises '"name" not implemented for 'BFloat16''; kernels that
#: check their input dtype say so in their own words ("must be a float tensor", "must be float32").
DTYPE_ERROR_RE = re.compile(
    r"expected scalar type Float but found (?:BFloat16|Half)|not implemented for '(?:BFloat16|Half)'|"
    r"must be (?:a )?float(?:32)?\b|expected (?:a )?float(?:32)? tensor|"
    r"caller expects elements to be float, while tensor contains (?:c10::BFloat16|c10::Half)",
    re.IGNORECASE)
#: Values of :func:`dtype_status`.
DTYPE_STATUSES = ("not_applicable", "ran", "float32_only", "failed")


# ------------------------------------------------------------------------------------------------ records


def with_categories(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``paper_category`` (the paper's eight categories, from the problem name) and ``category`` filled
    from the problem name where a record has none."""
    out = frame.copy()
    out["category"] = out["category"].fillna(out["problem_name"].map(operator_category))
    out["paper_category"] = out["problem_name"].map(paper_category)
    return out


# ------------------------------------------------------------------------------------------------ dtype support


def _as_bool(series: pd.Series) -> pd.Series:
    """A verdict column as booleans; ``None``/NaN (no verdict) is False."""
    return series.map(lambda v: bool(v) if v is not None and not (isinstance(v, float) and np.isnan(v)) else False)


def _meta(m, key, default=None):
    return m.get(key, default) if isinstance(m, dict) else default


def dtype_status(frame: pd.DataFrame) -> pd.Series:
    """Per record, how its kernel met the run's dtype (rule in the module docstring): ``not_applicable`` (fp32),
    ``ran`` (evaluated: it ran on every trial, whatever the verdict), ``float32_only``, or ``failed`` (another
    failure, the scan not flagging it). Skipped records for other reasons (no GPU) are ``not_applicable``."""
    out = []
    for row in frame.itertuples():
        meta = row.metadata if isinstance(row.metadata, dict) else {}
        scan = _meta(meta, "dtype_scan") or {}
        if row.precision == "fp32":
            out.append("not_applicable")
        elif row.outcome == "skipped":
            out.append("float32_only" if _meta(meta, "skip_reason") == "float32_only"
                       or str(row.error_message or "").startswith("float32_only") else "not_applicable")
        elif row.outcome == "evaluated":
            out.append("ran")
        elif row.outcome == "reference_error":
            out.append("not_applicable")
        elif DTYPE_ERROR_RE.search(str(row.error_message or "")) or scan.get("float32_only"):
            out.append("float32_only")
        else:
            out.append("failed")
    return pd.Series(out, index=frame.index, name="dtype_status", dtype=object)


# ------------------------------------------------------------------------------------------------ headline


def _by_list(by) -> list[str]:
    return [by] if isinstance(by, str) else list(by)


def headline_table(frame: pd.DataFrame, configs: Sequence[str] | None = None, *,
                   by: str | Sequence[str] = ("model_config", "problem_version", "precision"),
                   correctness: str = "kbstudy", baseline: str = "eager") -> pd.DataFrame:
    """The paper's headline table: one row per group of ``by`` (default: configuration, problem version, precision).

    Args:
        frame: evaluation records (one size scale and hardware, each attempt once:
            ``kbstudy.records.frames.load_frames(..., first_attempts=True)``).
        configs: keep these model configurations, in this order (``None``: all, sorted).
        by: grouping columns; must include ``model_config``.
        correctness, baseline: as :func:`kbstudy.analysis.scoring.attempts`; speedups are verified by its rule, with each
            hardware's noise margin from the ``null:reference`` records of ``frame`` (also when ``configs`` leaves
            them out).

    Returns ``by``..., ``n`` (attempts), ``n_correct``, ``correct_pct`` (0-100), ``kernelbench_correct_pct``,
    ``verified_speedups``, ``verified_speedup_median``, ``speedup_median`` (all correct kernels),
    ``fast_1`` (0-1), ``conv_n``, ``conv_solved``, ``conv_faster``, ``n_float32_only``, ``correct_pct_dtype_ok``.
    Raises ``ValueError`` as :func:`kbstudy.analysis.scoring.attempts` (e.g. a repeated attempt within a group).
    """
    by = _by_list(by)
    data = with_categories(frame)
    # scored before the configurations are picked: the noise margin comes from the hardware's null:reference records
    att = scoring.attempts(data, by=by, correctness=correctness, baseline=baseline)
    if configs is not None:
        att = att[att["model_config"].isin(list(configs))].copy()
    att["dtype_status"] = dtype_status(att) if len(att) else pd.Series(dtype=object)
    att["kb_ok"] = _as_bool(att["kernelbench_correct"]) & att["attempted"]
    rows = []
    for keys, g in att.groupby(by, sort=True, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        f32 = g["dtype_status"] == "float32_only"
        tried = g[g["attempted"]]
        n = len(tried)
        faster = tried[scoring.verified_faster(tried)]
        conv = tried[tried["paper_category"] == "convolution"]
        ok_dtype = tried[~f32.loc[tried.index]]
        row = dict(zip(by, keys))
        row.update(
            n=n, n_correct=int(tried["correct"].sum()),
            correct_pct=100.0 * tried["correct"].sum() / n if n else np.nan,
            kernelbench_correct_pct=100.0 * tried["kb_ok"].sum() / n if n else np.nan,
            verified_speedups=len(faster),
            verified_speedup_median=float(faster["speedup"].median()) if len(faster) else np.nan,
            speedup_median=float(tried["speedup"].median()) if tried["speedup"].notna().any() else np.nan,
            fast_1=len(faster) / n if n else np.nan,
            conv_n=len(conv), conv_solved=int(conv["correct"].sum()),
            conv_faster=int(scoring.verified_faster(conv).sum()),
            n_float32_only=int(f32.sum()),
            correct_pct_dtype_ok=100.0 * ok_dtype["correct"].sum() / len(ok_dtype) if len(ok_dtype) else np.nan,
        )
        rows.append(row)
    columns = [*by, "n", "n_correct", "correct_pct", "kernelbench_correct_pct", "verified_speedups",
               "verified_speedup_median", "speedup_median", "fast_1", "conv_n", "conv_solved", "conv_faster",
               "n_float32_only", "correct_pct_dtype_ok"]
    table = pd.DataFrame(rows, columns=columns)
    if configs is not None and len(table):
        order = {c: i for i, c in enumerate(configs)}
        table = table.sort_values(by, key=lambda s: s.map(order) if s.name == "model_config" else s,
                                  kind="stable").reset_index(drop=True)
    return table


def category_table(frame: pd.DataFrame, configs: Sequence[str] | None = None, *,
                   by: str | Sequence[str] = ("model_config", "problem_version", "precision"),
                   correctness: str = "kbstudy", baseline: str = "eager") -> pd.DataFrame:
    """Per group of ``by`` and paper category (all eight, also those with no attempt): ``n``, ``n_correct``,
    ``verified_speedups`` (correct, speedup > 1, verified: as :func:`headline_table`) and
    ``verified_speedup_median``. Long format; pivot for a wide table."""
    by = _by_list(by)
    data = with_categories(frame)
    att = scoring.attempts(data, by=by, correctness=correctness, baseline=baseline)  # margin: as headline_table
    if configs is not None:
        att = att[att["model_config"].isin(list(configs))]
    att = att[att["attempted"]]
    rows = []
    for keys, g in att.groupby(by, sort=True, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        for cat in PAPER_CATEGORIES:
            c = g[g["paper_category"] == cat]
            faster = c[scoring.verified_faster(c)]
            rows.append({**dict(zip(by, keys)), "category": cat, "n": len(c), "n_correct": int(c["correct"].sum()),
                         "verified_speedups": len(faster),
                         "verified_speedup_median": float(faster["speedup"].median()) if len(faster) else np.nan})
    return pd.DataFrame(rows, columns=[*by, "category", "n", "n_correct", "verified_speedups",
                                       "verified_speedup_median"])


def category_pivot(categories: pd.DataFrame, index: str = "model_config") -> pd.DataFrame:
    """:func:`category_table` as one row per ``index`` and one ``correct/n`` text column per category (``-`` for no
    attempt), the paper's layout. Pivot one problem version and precision at a time."""
    cell = categories.assign(cell=[f"{c}/{n}" if n else "-" for c, n in zip(categories["n_correct"], categories["n"])])
    wide = cell.pivot_table(index=index, columns="category", values="cell", aggfunc="first")
    return wide.reindex(columns=list(PAPER_CATEGORIES)).reset_index().rename_axis(columns=None)


# ------------------------------------------------------------------------------------------------ versions


def version_comparison(frame: pd.DataFrame, changes: pd.DataFrame | None = None, *, precision: str = "fp32",
                       correctness: str = "kbstudy") -> pd.DataFrame:
    """The same kernel (``candidate_sha256``) on its v0 problem and on the current one, one row per kernel with a
    record on both: ``model_config``, ``level``, ``problem_id``, ``v0_name``, ``current_name``, ``change`` (from
    ``changes``, :func:`kbstudy.analysis.published.load_version_changes`), ``v0_outcome``, ``current_outcome``,
    ``v0_correct``, ``current_correct`` (the chosen verdict), ``v0_speedup``, ``current_speedup`` and ``flip``
    (correct on one, not the other)."""
    verdict = scoring.CORRECTNESS[correctness]
    data = frame[frame["precision"] == precision]
    cols = ["model_config", "candidate_sha256", "level", "problem_id", "problem_name", "outcome", verdict,
            "speedup_vs_eager"]
    v0 = data[data["problem_version"] == "v0"][cols]
    cur = data[data["problem_version"] == "current"][cols]
    both = v0.merge(cur, on=["model_config", "candidate_sha256", "level", "problem_id"], suffixes=("_v0", "_cur"))
    out = pd.DataFrame({
        "model_config": both["model_config"], "level": both["level"], "problem_id": both["problem_id"],
        "v0_name": both["problem_name_v0"], "current_name": both["problem_name_cur"],
        "v0_outcome": both["outcome_v0"], "current_outcome": both["outcome_cur"],
        "v0_correct": _as_bool(both[f"{verdict}_v0"]) & (both["outcome_v0"] == "evaluated"),
        "current_correct": _as_bool(both[f"{verdict}_cur"]) & (both["outcome_cur"] == "evaluated"),
        "v0_speedup": pd.to_numeric(both["speedup_vs_eager_v0"], errors="coerce"),
        "current_speedup": pd.to_numeric(both["speedup_vs_eager_cur"], errors="coerce"),
    })
    if changes is not None and len(changes):
        out = out.merge(changes[["level", "problem_id", "change"]], on=["level", "problem_id"], how="left")
    else:
        out["change"] = None
    out["flip"] = out["v0_correct"] != out["current_correct"]
    return out.sort_values(["model_config", "level", "problem_id"]).reset_index(drop=True)


# ------------------------------------------------------------------------------------------------ throughput


def throughput(frame: pd.DataFrame, *, by: str | Sequence[str] = ("run", "hardware"), gap_s: float = 300.0
               ) -> pd.DataFrame:
    """Kernels evaluated per GPU-minute (rule in the module docstring), per group of ``by``.

    Args:
        frame: evaluation records with ``created_utc`` (ISO 8601) and ``worker_wall_s`` (s).
        by: grouping columns (default: per run and hardware).
        gap_s: a gap between consecutive records longer than this starts a new burst (s). The default (300 s) is
            more than a hung candidate costs (the run timeout, 60 s on the H200, plus a replacement worker) and less
            than a device call's start and builds.

    Returns ``by``..., ``records``, ``bursts``, ``gpu_minutes``, ``kernels_per_gpu_minute``, ``worker_minutes``,
    ``kernels_per_worker_minute``, ``median_s_per_kernel`` (within bursts: the gap between consecutive records),
    ``start_utc`` and ``end_utc`` (the first burst's start, the last record's time; ISO 8601) and the total seconds of
    each worker stage (``stage_<name>_s``) from ``metadata.stage_seconds``; rows sorted by ``by``. Records without a
    timestamp are left out; skipped records (never run) are left out.

    Per device call: add ``git_commit`` to ``by`` and sort by ``start_utc`` (each call of a GPU script records the
    commit it ran, and the records are committed between calls, so consecutive calls differ; grouped by run alone,
    two calls less than ``gap_s`` apart, e.g. on a warm machine, make one burst that counts the time between them).
    """
    by = _by_list(by)
    data = frame[frame["outcome"] != "skipped"].copy()
    data["t"] = pd.to_datetime(data["created_utc"], utc=True, errors="coerce")
    data = data[data["t"].notna()]
    rows = []
    for keys, g in data.groupby(by, sort=True, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        g = g.sort_values("t")
        t = (g["t"] - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
        wall = pd.to_numeric(g["worker_wall_s"], errors="coerce").fillna(0.0).to_numpy()
        gaps = np.diff(t)
        starts = np.r_[0, np.nonzero(gaps > gap_s)[0] + 1]
        ends = np.r_[starts[1:] - 1, len(t) - 1]
        seconds = sum(float(t[e] - t[s] + wall[s]) for s, e in zip(starts, ends))
        inside = gaps[gaps <= gap_s]
        stages: dict[str, float] = {}
        for m in g["metadata"]:
            for stage, sec in (_meta(m, "stage_seconds") or {}).items():
                stages[f"stage_{stage}_s"] = stages.get(f"stage_{stage}_s", 0.0) + float(sec or 0.0)
        row = dict(zip(by, keys))
        first = pd.Timestamp(t[0] - wall[0], unit="s", tz="UTC").floor("s")
        row.update(records=len(g), bursts=len(starts), gpu_minutes=seconds / 60.0,
                   kernels_per_gpu_minute=len(g) / (seconds / 60.0) if seconds > 0 else np.nan,
                   worker_minutes=float(wall.sum()) / 60.0,
                   kernels_per_worker_minute=len(g) / (wall.sum() / 60.0) if wall.sum() > 0 else np.nan,
                   median_s_per_kernel=float(np.median(inside)) if len(inside) else np.nan,
                   start_utc=first.isoformat(), end_utc=g["t"].iloc[-1].isoformat(), **stages)
        rows.append(row)
    return pd.DataFrame(rows)
