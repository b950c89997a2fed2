"""The study's metrics, computed from evaluation records (pure pandas; no torch).

Definitions follow KernelBench (``src/kernelbench/score.py`` and the paper, Ouyang et al. 2025, "KernelBench: Can
LLMs Write Efficient GPU Kernels?", section 3), made explicit here:

* **speedup** of a candidate = baseline time / candidate time, each the median over timing trials, in ms
  (``EvaluationRecord.speedup_vs_eager`` against the PyTorch eager reference, ``speedup_vs_compile`` against the
  reference under ``torch.compile`` with Inductor's default mode). > 1 means the candidate is faster.
* **fast_p** = #(correct and speedup > p) / n. The inequality is strict (``speed_up > p`` in KernelBench's
  ``fastp``). **n counts every problem the configuration attempted**, not only the correct ones: a problem whose
  candidate failed to compile, crashed or was wrong counts in n and never in the numerator. fast_0 is therefore the
  fraction correct *and timed* (a correct kernel whose timing is missing is not counted). A problem the
  configuration has no record for is not in n unless ``n_problems`` says how many the set holds.
* **verified speedup** (kbstudy's addition, KernelBench issue #166: a strict ``>`` on one mean makes fast_1 count
  noise around 1): for p >= 1, a kernel counts in fast_p only if its speedup is also *statistically
  distinguishable from 1*: the record's ``speedup_significant`` (eager) or ``speedup_vs_compile_significant``
  (``torch.compile``) is true, i.e. the 95% percentile-bootstrap interval of the ratio of medians excludes 1
  (Efron & Tibshirani 1993; ``kbstudy.harness.timing.speedup_interval``) and the event timing agreed with the host-synchronised
  time. The threshold p itself is compared with the point estimate, as in KernelBench. Where the event timing and the
  host-synchronised time disagree (``timing_discrepancy``) there is no speedup at all, in any count, median or
  table (``kbstudy.records.frames.withdraw_event_only_speedups``): the event time missed work. For p < 1 the rule does not
  apply (fast_0 stays "correct and timed"). ``n_verified_faster`` counts the correct kernels with a verified
  speedup > 1. Records of schema version 1 predate the rule (no samples, no interval): they are counted by the point
  estimate alone, as KernelBench counts them, and ``n_speedup_untested`` says how many correct, timed kernels were
  counted that way; in a version-2 record a missing test (``null``: too few samples) counts as not verified.
  ``significance=False`` gives KernelBench's plain definition for every record.
* **noise margin** (kbstudy's addition): the bootstrap interval captures the spread of one candidate's samples, not
  the offset between two processes timing the same code (clocks, placement, the host's load). The reference itself,
  timed as a candidate (``null:reference``), measures that offset: on the H200 its speedups were 0.989, 0.997 and
  1.008, each with an interval that excluded 1; on the CPU (1/16 size, 2 cores) 0.15-7.6. With
  ``noise_margin="auto"`` (the default) a speedup is verified only if its interval also clears the margin m of its
  hardware, estimated from that hardware's ``null:reference`` records in the frame (:func:`noise_margins`): the
  interval's lower bound above 1 + m for a faster kernel, its upper bound below 1 / (1 + m) for a slower one. With no
  ``null:reference`` record for a hardware, m = 0 there (the rule above alone), and :class:`NoNoiseMarginWarning`
  says so. The offset is also partly the
  problem's own (on the H200, 3D transposed convolutions timed 0.90-1.06x against themselves, each with a tight
  interval), and a quantile lets the largest ones through: so where the frame holds a ``null:reference`` record of
  the same problem (``problem_sha256``), precision and hardware, its speedup s0 raises the bar on that side: the
  lower bound must also exceed s0 when s0 > 1, the upper bound must also stay below s0 when s0 < 1 (column
  ``null_speedup``; with ``noise_margin=0`` this is off too). The null:reference itself is then never a verified
  speedup.
* **compiled %, KernelBench-correct %, kbstudy-correct %** = 100 * #(compiled / verdict true) / n, same n.
  KernelBench's verdict is ``torch.allclose`` at the precision's tolerance on 5 fixed-seed trials; kbstudy's verdict
  is the scale-invariant check of ``kbstudy.verdict.checks`` (relative L2 error against float64, plus coverage).
* **median and geometric-mean speedup over correct kernels**: over the correct kernels that have a finite, positive
  speedup. The geometric mean is exp(mean(log speedup)), i.e. KernelBench's
  ``geometric_mean_speed_ratio_correct_only`` (prod(speedup) ** (1 / n_correct)), without its ``0`` for an empty
  set: an empty set gives NaN here.
* **pass@k** (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", eq. 1): for a problem with n
  samples of which c are correct, the unbiased estimator 1 - C(n - c, k) / C(n, k), averaged over problems.

*Attempts.* The unit of every rate is one (problem, sample) record of a configuration. With one sample per problem
(the usual KernelBench level-1 setting) n is the number of problems, exactly KernelBench's definition. With several
samples per problem every rate is the mean over samples, i.e. the expected single-sample rate (for correctness it
equals pass@1).

*Not attempted.* Records with outcome ``skipped`` (e.g. a CUDA candidate on a machine without a GPU) and
``reference_error`` (the reference itself failed, no verdict is possible) are excluded from n and counted in
``n_skipped`` and ``n_reference_error``, so a CPU run is not scored as if its CUDA candidates had failed.
"""

from __future__ import annotations

import math
import sys
import warnings
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from kbstudy.records.frames import withdraw_event_only_speedups
from kbstudy.records.schema import OUTCOMES

#: The thresholds p of fast_p that the study reports (KernelBench reports fast_0, fast_1 and fast_2 and sweeps p).
FAST_P_THRESHOLDS: tuple[float, ...] = (0.0, 1.0, 1.2, 1.5, 2.0)
#: Outcomes that are not an attempt: excluded from n (see the module docstring).
NOT_ATTEMPTED = ("skipped", "reference_error")
CORRECTNESS = {"kbstudy": "kbstudy_correct", "kernelbench": "kernelbench_correct"}
BASELINES = {"eager": "speedup_vs_eager", "compile": "speedup_vs_compile"}
#: The record field that says whether each baseline's speedup is distinguishable from 1 (``kbstudy.harness.orchestrator``).
SIGNIFICANCE = {"eager": "speedup_significant", "compile": "speedup_vs_compile_significant"}
#: The speedup interval fields of each baseline (``kbstudy.harness.orchestrator``: 95% percentile bootstrap).
INTERVALS = {"eager": ("speedup_vs_eager_ci_low", "speedup_vs_eager_ci_high"),
             "compile": ("speedup_vs_compile_ci_low", "speedup_vs_compile_ci_high")}
#: The model configuration that is the reference itself (``kbstudy.harness.candidates``): its true speedup is 1.
NULL_REFERENCE = "null:reference"
#: :func:`noise_margins` takes this quantile of |ln speedup| over at least ``NOISE_MIN_RECORDS`` null:reference
#: records, else their maximum.
NOISE_QUANTILE = 0.95
NOISE_MIN_RECORDS = 20
#: The first record schema version whose speedups carry the significance test (``kbstudy.records.schema.SCHEMA_VERSION``).
SIGNIFICANCE_SCHEMA = 2
#: The columns that identify one attempt within a group.
ATTEMPT_KEYS = ("problem_version", "level", "problem_id", "sample_id")
REQUIRED_COLUMNS = ("model_config", "level", "problem_id", "sample_id", "outcome", "compiled", "kernelbench_correct",
                    "kbstudy_correct", "speedup_vs_eager", "speedup_vs_compile")


def fast_p_column(p: float) -> str:
    """The summary column name of fast_p: ``fast_0``, ``fast_1``, ``fast_1.2``, ``fast_1.5``, ``fast_2``."""
    return f"fast_{p:g}"


def _check_frame(frame: pd.DataFrame, by: Sequence[str]) -> None:
    missing = [c for c in (*REQUIRED_COLUMNS, *by) if c not in frame.columns]
    if missing:
        raise ValueError(f"evaluation frame lacks columns {missing} (expected kbstudy.records.schema.EvaluationRecord fields)")


def _as_bool(series: pd.Series) -> pd.Series:
    """A verdict column as booleans: ``None``/NaN (no verdict: not evaluated) counts as False."""
    return series.map(lambda v: bool(v) if v is not None and not (isinstance(v, float) and math.isnan(v)) else False)


def _by_list(by: str | Sequence[str]) -> list[str]:
    return [by] if isinstance(by, str) else list(by)


def _null_reference_rows(frame: pd.DataFrame, baseline: str) -> tuple[pd.DataFrame, pd.Series]:
    """The ``null:reference`` records of ``frame`` that measure the harness's offset: evaluated, kbstudy-correct,
    with a finite positive speedup over ``baseline``; returns ``(rows, speedup)``, aligned. ``frame`` has
    ``model_config`` and the baseline's speedup column."""
    keep = frame["model_config"] == NULL_REFERENCE
    if "outcome" in frame.columns:
        keep &= frame["outcome"] == "evaluated"
    if "kbstudy_correct" in frame.columns:
        keep &= _as_bool(frame["kbstudy_correct"]).astype(bool)
    speed = pd.to_numeric(frame[BASELINES[baseline]], errors="coerce").astype(float)
    keep &= np.isfinite(speed) & (speed > 0)
    return frame.loc[keep], speed.loc[keep]


def noise_margins(frame: pd.DataFrame, baseline: str = "eager") -> dict[str, float]:
    """The harness's between-process timing noise per hardware: ``{hardware: m}``, with m = exp(q) - 1 where q is the
    ``NOISE_QUANTILE`` quantile of |ln speedup| over that hardware's ``null:reference`` records that are evaluated,
    kbstudy-correct and timed against ``baseline`` (their maximum with fewer than ``NOISE_MIN_RECORDS``). A hardware
    without such records is absent (its margin is 0). The frame's ``hardware`` column groups; without it every
    record is one group, keyed ``""``. Raises ``ValueError`` for an unknown baseline.
    """
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {sorted(BASELINES)}, got {baseline!r}")
    frame = withdraw_event_only_speedups(frame)
    if "model_config" not in frame.columns or BASELINES[baseline] not in frame.columns:
        return {}
    null, speed = _null_reference_rows(frame, baseline)
    groups = null["hardware"] if "hardware" in null.columns else pd.Series("", index=null.index)
    out = {}
    for hardware, values in np.abs(np.log(speed)).groupby(groups):
        q = values.quantile(NOISE_QUANTILE) if len(values) >= NOISE_MIN_RECORDS else values.max()
        out[str(hardware)] = float(np.expm1(q))
    return out


def attempts(frame: pd.DataFrame, *, by: str | Sequence[str] = "model_config", correctness: str = "kbstudy",
             baseline: str = "eager", significance: bool = True,
             noise_margin: float | str = "auto") -> pd.DataFrame:
    """The attempted records with derived columns: ``correct`` (bool, the chosen verdict), ``speedup`` (the
    chosen baseline's ratio, NaN unless correct with a finite positive speedup), ``attempted`` (bool),
    ``significance_tested`` (bool: the record carries the significance test, schema >= ``SIGNIFICANCE_SCHEMA``) and
    ``verified`` (bool: a speedup is present and counts as verified under the module docstring's rule; with
    ``significance=False`` every present speedup does) and ``noise_margin`` (the margin m applied to the record:
    ``"auto"`` takes its hardware's from :func:`noise_margins`, a number applies to every record, 0 turns it off).

    Raises ``ValueError`` for an unknown ``correctness`` or ``baseline``, missing columns, or an attempt (problem,
    sample) that appears twice within one group of ``by`` (records of several runs or hardware merged: add ``run``
    or ``hardware`` to ``by``).
    """
    if correctness not in CORRECTNESS:
        raise ValueError(f"correctness must be one of {sorted(CORRECTNESS)}, got {correctness!r}")
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {sorted(BASELINES)}, got {baseline!r}")
    by = _by_list(by)
    _check_frame(frame, by)
    frame = withdraw_event_only_speedups(frame)  # an event time the host clock contradicts is no speedup
    out = frame.copy()
    if "problem_version" not in out.columns:
        out["problem_version"] = "current"
    dup = out.duplicated(subset=[*by, *ATTEMPT_KEYS], keep=False)
    if dup.any():
        example = out.loc[dup, [*by, *ATTEMPT_KEYS]].iloc[0].to_dict()
        raise ValueError(f"{int(dup.sum())} records repeat an attempt within a group of {by} (e.g. {example}); "
                         "group by 'run' or 'hardware' as well, or filter the frame first")
    out["attempted"] = ~out["outcome"].isin(NOT_ATTEMPTED)
    out["compiled"] = _as_bool(out["compiled"]) & out["attempted"]
    out["correct"] = _as_bool(out[CORRECTNESS[correctness]]) & out["attempted"]
    speed = pd.to_numeric(out[BASELINES[baseline]], errors="coerce").astype(float)
    valid = out["correct"] & np.isfinite(speed) & (speed > 0)
    out["speedup"] = speed.where(valid)
    version = pd.to_numeric(out["schema_version"], errors="coerce") if "schema_version" in out.columns else \
        pd.Series(float("nan"), index=out.index)
    out["significance_tested"] = (version >= SIGNIFICANCE_SCHEMA).fillna(False).astype(bool)
    column = SIGNIFICANCE[baseline]
    significant = _as_bool(out[column]) if column in out.columns else pd.Series(False, index=out.index)
    passes = significant | ~out["significance_tested"] if significance else pd.Series(True, index=out.index)
    if isinstance(noise_margin, str):
        if noise_margin != "auto":
            raise ValueError(f"noise_margin must be a number or 'auto', got {noise_margin!r}")
        margins = noise_margins(frame, baseline)
        hardware = out["hardware"].astype(str) if "hardware" in out.columns else pd.Series("", index=out.index)
        out["noise_margin"] = hardware.map(margins).fillna(0.0).astype(float)
        if significance:
            _warn_without_margin(hardware[valid & out["significance_tested"]], margins)
    else:
        out["noise_margin"] = float(noise_margin)
    if significance:
        # the interval (the point estimate where a record has none) must clear the margin on the speedup's side
        low_col, high_col = INTERVALS[baseline]
        low = pd.to_numeric(out[low_col], errors="coerce") if low_col in out.columns else speed
        high = pd.to_numeric(out[high_col], errors="coerce") if high_col in out.columns else speed
        low, high = low.fillna(speed).astype(float), high.fillna(speed).astype(float)
        m = out["noise_margin"]
        bar_high, bar_low = 1 + m, 1 / (1 + m)
        if noise_margin == "auto" or float(noise_margin) > 0:  # a margin of 0 turns both off
            out["null_speedup"] = _null_speedups(frame, out, baseline)
            bar_high = np.fmax(bar_high, out["null_speedup"].where(out["null_speedup"] > 1))
            bar_low = np.fmin(bar_low, out["null_speedup"].where(out["null_speedup"] < 1))
        clears = ((m <= 0) & out.get("null_speedup", pd.Series(np.nan, index=out.index)).isna()) \
            | ((speed > 1) & (low > bar_high)) | ((speed <= 1) & (high < bar_low))
        passes = passes & clears
    out["verified"] = valid & passes.astype(bool)
    return out


class NoNoiseMarginWarning(UserWarning):
    """``noise_margin="auto"`` found no ``null:reference`` record for a hardware whose speedups it verifies, so m = 0
    there (e.g. a frame of v0 problems only: the null candidates run on the current ones)."""


def _warn_without_margin(hardware: pd.Series, margins: dict[str, float]) -> None:
    """Warn (:class:`NoNoiseMarginWarning`) once per call for the hardware among ``hardware`` (one entry per timed,
    correct, significance-tested record) that has no margin in ``margins``: its speedups are verified with m = 0,
    which the frame's caller may not intend (pass the margin of a frame that has the null records)."""
    missing = sorted(set(hardware.unique()) - set(margins))
    if missing:
        warnings.warn(f"noise_margin='auto': no evaluated null:reference record for hardware {missing} in this frame, "
                      "so its noise margin is 0; pass the margin measured where the null records are "
                      "(kbstudy.analysis.scoring.noise_margins) as a number, or 0 to state that none is wanted",
                      NoNoiseMarginWarning, stacklevel=_caller_stacklevel())


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that names the first caller outside this module (the scoring functions call each other)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame, level = frame.f_back, level + 1
    return level


def _null_speedups(frame: pd.DataFrame, out: pd.DataFrame, baseline: str) -> pd.Series:
    """Per row of ``out``: the speedup of the ``null:reference`` record of the same ``problem_sha256``, precision and
    hardware in ``frame`` (evaluated, kbstudy-correct, finite; the median if several), else NaN. All NaN when the
    frame lacks ``problem_sha256``."""
    if "problem_sha256" not in frame.columns or BASELINES[baseline] not in frame.columns:
        return pd.Series(np.nan, index=out.index)
    keys = [c for c in ("problem_sha256", "precision", "hardware") if c in frame.columns]
    rows, speed = _null_reference_rows(frame, baseline)
    if rows.empty:
        return pd.Series(np.nan, index=out.index)
    null = rows[keys].assign(null_speedup=speed).groupby(keys, dropna=False).null_speedup.median()
    joined = out[keys].merge(null.reset_index(), on=keys, how="left")
    return pd.Series(joined["null_speedup"].to_numpy(), index=out.index)


def verified_faster(att: pd.DataFrame) -> pd.Series:
    """Rows of :func:`attempts` that are correct, faster than the baseline (speedup > 1) and verified: the numerator of
    fast_1 (``summarize``'s ``n_verified_faster``, ``kbstudy.analysis.headline``'s ``verified_speedups``)."""
    return (att["speedup"] > 1) & att["verified"].astype(bool)


def geometric_mean(values: Iterable[float]) -> float:
    """exp(mean(log x)) over positive finite values; NaN for none. Raises ``ValueError`` for a value <= 0."""
    arr = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if arr.size == 0:
        return float("nan")
    if (arr <= 0).any():
        raise ValueError("the geometric mean needs positive values (speedups are > 0)")
    return float(np.exp(np.mean(np.log(arr))))


def fast_p(correct: Sequence[bool], speedup: Sequence[float], p: float, n: int | None = None,
           verified: Sequence[bool] | None = None) -> float:
    """fast_p = #(correct and speedup > p) / n (KernelBench ``score.fastp``; strict ``>``), and for p >= 1, when
    ``verified`` is given, only kernels whose speedup is verified (statistically distinguishable from 1, see the
    module docstring) count.

    ``n`` defaults to ``len(correct)``, every attempt. NaN speedups never count. Raises ``ValueError`` if the inputs
    differ in length or ``n`` is smaller than the number of attempts; returns NaN for n = 0.
    """
    correct = np.asarray(correct, dtype=bool)
    speedup = np.asarray(speedup, dtype=float)
    if correct.shape != speedup.shape:
        raise ValueError("correct and speedup must have the same length")
    if verified is not None:
        verified = np.asarray(verified, dtype=bool)
        if verified.shape != correct.shape:
            raise ValueError("verified must have the same length as correct")
    n = len(correct) if n is None else int(n)
    if n < len(correct):
        raise ValueError(f"n = {n} is smaller than the number of attempts ({len(correct)})")
    if n == 0:
        return float("nan")
    with np.errstate(invalid="ignore"):
        hits = correct & np.isfinite(speedup) & (speedup > p)
    if verified is not None and p >= 1:
        hits = hits & verified
    return float(hits.sum()) / n


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator for one problem with ``n`` samples of which ``c`` are correct:
    1 - C(n - c, k) / C(n, k) (Chen et al. 2021, eq. 1), computed as 1 - prod_{i=n-c+1}^{n} (1 - k / i) for
    numerical stability (their reference implementation).

    Raises ``ValueError`` unless 0 <= c <= n and 1 <= k <= n.
    """
    if not (0 <= c <= n):
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not (1 <= k <= n):
        raise ValueError(f"need 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_at_k_table(frame: pd.DataFrame, ks: Sequence[int] = (1,), *, by: str | Sequence[str] = "model_config",
                    correctness: str = "kbstudy") -> pd.DataFrame:
    """pass@k per group, averaged over the group's problems (each problem's n = its number of attempted samples).

    Columns: ``by``..., ``n_problems``, ``min_samples`` and ``pass@{k}`` for each k; pass@k is NaN when a problem
    has fewer than k samples (the estimator is undefined there). Raises as :func:`attempts`.
    """
    by = _by_list(by)
    att = attempts(frame, by=by, correctness=correctness)
    att = att[att["attempted"]]
    per_problem = (att.groupby([*by, "problem_version", "level", "problem_id"], dropna=False)["correct"]
                   .agg(n="size", c="sum").reset_index())
    rows = []
    for keys, group in per_problem.groupby(by, dropna=False, sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        row = dict(zip(by, keys))
        row["n_problems"] = len(group)
        row["min_samples"] = int(group["n"].min())
        for k in ks:
            if row["min_samples"] < k:
                row[f"pass@{k}"] = float("nan")
            else:
                row[f"pass@{k}"] = float(np.mean([pass_at_k(int(n), int(c), k) for n, c in zip(group["n"], group["c"])]))
        rows.append(row)
    return pd.DataFrame(rows, columns=[*by, "n_problems", "min_samples", *[f"pass@{k}" for k in ks]])


def summarize(frame: pd.DataFrame, by: str | Sequence[str] = "model_config", correctness: str = "kbstudy",
              baseline: str = "eager", thresholds: Sequence[float] = FAST_P_THRESHOLDS,
              n_problems: int | None = None, significance: bool = True,
              noise_margin: float | str = "auto") -> pd.DataFrame:
    """One row per group of ``by`` (default: per model configuration) with the study's headline metrics.

    Args:
        frame: evaluation records (``kbstudy.records.frames.load_evaluations``), one row per EvaluationRecord.
        by: column(s) to group by.
        correctness: ``"kbstudy"`` (scale-invariant verdict) or ``"kernelbench"`` (KernelBench's allclose verdict);
            chooses the verdict behind ``correct_pct``, fast_p and the speedup statistics.
        baseline: ``"eager"`` (PyTorch eager reference) or ``"compile"`` (``torch.compile``, Inductor default).
        thresholds: the p of fast_p.
        n_problems: if given, n for every group (the size of the problem set: a problem with no record counts as a
            failure); else n = the group's attempts. Raises ``ValueError`` if a group has more attempts than this.
        significance: apply the verified-speedup rule to fast_p for p >= 1 (module docstring); ``False``:
            KernelBench's plain definition.
        noise_margin: as :func:`attempts` (default ``"auto"``: each hardware's margin from its ``null:reference``
            records).

    Returns columns: ``by``..., ``n`` (attempts, the denominator), ``n_records``, ``n_skipped``,
    ``n_reference_error``, ``compiled_pct``, ``kernelbench_correct_pct``, ``kbstudy_correct_pct``, ``correct_pct``
    (the chosen verdict; percentages in 0-100), ``n_correct``, ``n_timed`` (correct with a speedup),
    ``n_faster`` (correct with a speedup > 1), ``n_verified_faster`` (of those, verified), ``n_speedup_untested``
    (correct, timed kernels of schema-1 records, counted without the test), ``fast_{p}`` (fractions in 0-1),
    ``speedup_median``, ``speedup_geomean`` (over correct kernels, NaN if none), ``noise_margin`` (the largest margin
    applied in the group), ``correctness``, ``baseline``. Rates
    are NaN for a group with n = 0 (every record skipped).

    Raises ``ValueError`` as :func:`attempts`.
    """
    by = _by_list(by)
    att = attempts(frame, by=by, correctness=correctness, baseline=baseline, significance=significance,
                   noise_margin=noise_margin)
    att["kb_ok"] = _as_bool(att["kernelbench_correct"]) & att["attempted"]
    att["kbs_ok"] = _as_bool(att["kbstudy_correct"]) & att["attempted"]
    rows = []
    for keys, group in att.groupby(by, dropna=False, sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        tried = group[group["attempted"]]
        n = len(tried)
        if n_problems is not None:
            if n > n_problems:
                raise ValueError(f"group {dict(zip(by, keys))} has {n} attempts, more than n_problems={n_problems}")
            n = int(n_problems)
        pct = (lambda count: 100.0 * count / n) if n else (lambda count: float("nan"))
        speed = tried["speedup"].dropna()
        row = dict(zip(by, keys))
        row.update(
            n=n,
            n_records=len(group),
            n_skipped=int((group["outcome"] == "skipped").sum()),
            n_reference_error=int((group["outcome"] == "reference_error").sum()),
            compiled_pct=pct(int(tried["compiled"].sum())),
            kernelbench_correct_pct=pct(int(tried["kb_ok"].sum())),
            kbstudy_correct_pct=pct(int(tried["kbs_ok"].sum())),
            correct_pct=pct(int(tried["correct"].sum())),
            n_correct=int(tried["correct"].sum()),
            n_timed=len(speed),
            n_faster=int((speed > 1).sum()),
            n_verified_faster=int(verified_faster(tried).sum()),
            n_speedup_untested=int((tried["speedup"].notna() & ~tried["significance_tested"]).sum()),
        )
        for p in thresholds:
            row[fast_p_column(p)] = (fast_p(tried["correct"], tried["speedup"], p, n=n, verified=tried["verified"])
                                     if n else float("nan"))
        row["speedup_median"] = float(speed.median()) if len(speed) else float("nan")
        row["speedup_geomean"] = geometric_mean(speed)
        row["noise_margin"] = float(group["noise_margin"].max()) if len(group) else 0.0
        row["correctness"] = correctness
        row["baseline"] = baseline
        rows.append(row)
    columns = [*by, "n", "n_records", "n_skipped", "n_reference_error", "compiled_pct", "kernelbench_correct_pct",
               "kbstudy_correct_pct", "correct_pct", "n_correct", "n_timed", "n_faster", "n_verified_faster",
               "n_speedup_untested", *[fast_p_column(p) for p in thresholds],
               "speedup_median", "speedup_geomean", "noise_margin", "correctness", "baseline"]
    return pd.DataFrame(rows, columns=columns)


def fast_p_curve(frame: pd.DataFrame, ps: Sequence[float] | None = None, *, by: str | Sequence[str] = "model_config",
                 correctness: str = "kbstudy", baseline: str = "eager", n_problems: int | None = None,
                 significance: bool = True, noise_margin: float | str = "auto") -> pd.DataFrame:
    """fast_p as a function of p (long format: ``by``..., ``p``, ``fast_p``), for the fast_p-versus-p figure.

    ``ps`` defaults to 0 to 3 in steps of 0.05. Same n and the same verified-speedup rule as :func:`summarize`
    (``n_problems``, ``significance`` and ``noise_margin`` likewise).
    """
    by = _by_list(by)
    ps = list(np.round(np.arange(0.0, 3.0001, 0.05), 2)) if ps is None else list(ps)
    att = attempts(frame, by=by, correctness=correctness, baseline=baseline, significance=significance,
                   noise_margin=noise_margin)
    rows = []
    for keys, group in att.groupby(by, dropna=False, sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        tried = group[group["attempted"]]
        for p in ps:
            n = len(tried) if n_problems is None else int(n_problems)
            value = (fast_p(tried["correct"], tried["speedup"], p, n=n, verified=tried["verified"])
                     if n else float("nan"))
            rows.append({**dict(zip(by, keys)), "p": float(p), "fast_p": value})
    return pd.DataFrame(rows, columns=[*by, "p", "fast_p"])


def outcome_table(frame: pd.DataFrame, *, by: str | Sequence[str] = "model_config") -> pd.DataFrame:
    """Counts of each record outcome (``kbstudy.records.schema.OUTCOMES``) per group; one column per outcome present."""
    by = _by_list(by)
    _check_frame(frame, by)
    table = frame.groupby([*by, "outcome"], dropna=False).size().unstack("outcome", fill_value=0)
    ordered = [o for o in OUTCOMES if o in table.columns] + [o for o in table.columns if o not in OUTCOMES]
    return table[ordered].reset_index().rename_axis(columns=None)


def correct_speedups(frame: pd.DataFrame, *, by: str | Sequence[str] = "model_config", correctness: str = "kbstudy",
                     baseline: str = "eager") -> pd.DataFrame:
    """The correct, timed kernels, one row each: ``by``..., ``level``, ``problem_id``, ``problem_name``,
    ``category`` and ``speedup`` (sorted), for speedup-distribution figures."""
    by = _by_list(by)
    att = attempts(frame, by=by, correctness=correctness, baseline=baseline)
    keep = att[att["speedup"].notna()]
    cols = [c for c in [*by, "level", "problem_id", "sample_id", "problem_name", "category", "speedup"]
            if c in keep.columns]
    cols = list(dict.fromkeys(cols))
    return keep[cols].sort_values([*by, "level", "problem_id", "sample_id"]).reset_index(drop=True)
