"""Variants in a DLRM-Bench run: records of other model configurations than ours in the same folder
(``measurement_run --candidates``, e.g. another version of one of our kernels), each beside our kernel of the same problem in
the same run, with the bootstrap interval of variant / ours (:func:`kbstudy.harness.timing.speedup_interval` of the
two records' timing samples). They never enter :func:`kbstudy.analysis.dlrm.load_run`'s table (it keeps
:data:`~kbstudy.suites.dlrm_bench.MODEL_CONFIG` only)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kbstudy.analysis.dlrm import _floor_of, _problem_label, _ratio, latest_records, load_floors
from kbstudy.analysis.dlrm_device import _cold_device_ms
from kbstudy.harness.timing_stats import speedup_interval
from kbstudy.suites.dlrm_bench import MODEL_CONFIG

#: The columns of :func:`variants`, in order.
VARIANT_COLUMNS = ("problem_id", "problem", "model_config", "correct", "variant_ms", "variant_q1_ms", "variant_q3_ms",
                   "ours_ms", "ours_q1_ms", "ours_q3_ms", "variant_over_ours", "iqr_disjoint",
                   "variant_speedup_vs_eager", "variant_speedup_ci_low", "variant_speedup_ci_high",
                   "ours_speedup_vs_eager", "ours_speedup_ci_low", "ours_speedup_ci_high", "variant_over_floor",
                   "ours_over_floor", "variant_over_ours_ci_low", "variant_over_ours_ci_high",
                   "variant_device_ms", "ours_device_ms", "variant_over_ours_device",
                   "variant_over_ours_device_ci_low", "variant_over_ours_device_ci_high")


def _samples(value) -> list | None:
    """A record's per-call samples as a list, ``None`` where absent (a frame holds NaN for a field a record lacks)."""
    return list(value) if isinstance(value, (list, tuple)) else None


def variants(folder: str | Path) -> pd.DataFrame:
    """The folder's records of other model configurations than ours (``measurement_run --candidates``), one row each
    (columns :data:`VARIANT_COLUMNS`), beside our kernel's record of the same problem in the same run: medians and
    interquartile ranges, ``variant_over_ours`` (above 1: the variant is slower), ``iqr_disjoint`` (the two
    interquartile ranges do not overlap), each one's speedup over eager with its interval, each one's ratio to the
    floor, and ``variant_over_ours_ci_low``/``_high``: the 95 % bootstrap interval of median(variant) / median(ours)
    from the two records' per-call samples (:func:`kbstudy.harness.timing.speedup_interval` with the variant as the baseline;
    an interval above 1 means ours is faster, below 1 the variant; NaN where a record has too few samples). Both
    records come from the same run against the same eager timing, so no band between runs applies. The same by device
    time (``kbstudy.harness.timing.time_device``): ``variant_device_ms``, ``ours_device_ms`` (medians, ms),
    ``variant_over_ours_device`` and its interval ``variant_over_ours_device_ci_low``/``_high`` from the two records'
    device-time samples (NaN where a record has none). ``correct``: both verdicts passed. Empty (with the columns) when
    the folder has no variant."""
    records = latest_records(folder)
    floors = load_floors(folder)
    ours = records[records["model_config"] == MODEL_CONFIG].set_index("problem_id")
    rows = []
    for _, r in records[records["model_config"] != MODEL_CONFIG].iterrows():
        o = ours.loc[r["problem_id"]] if r["problem_id"] in ours.index else None
        floor = _floor_of(floors, r)

        def get(rec, key):
            return None if rec is None else rec.get(key)

        v_ms, o_ms = r["candidate_ms_median"], get(o, "candidate_ms_median")
        v_q1, v_q3, o_q1, o_q3 = (r["candidate_ms_q1"], r["candidate_ms_q3"], get(o, "candidate_ms_q1"),
                                  get(o, "candidate_ms_q3"))
        disjoint = None
        if None not in (v_q1, v_q3, o_q1, o_q3):
            disjoint = bool(v_q3 < o_q1 or o_q3 < v_q1)
        interval = speedup_interval(_samples(r.get("candidate_ms_samples")), _samples(get(o, "candidate_ms_samples")))
        v_dev, o_dev = _cold_device_ms(r), (_cold_device_ms(o) if o is not None else None)
        # no device-time interval where either device time is void (its timed outputs failed their check)
        dev_interval = (speedup_interval(_samples(r.get("candidate_device_ms_samples")),
                                         _samples(get(o, "candidate_device_ms_samples")))
                        if v_dev is not None and o_dev is not None else None)
        rows.append({
            "problem_id": int(r["problem_id"]), "problem": _problem_label(r["problem_name"]),
            "model_config": r["model_config"],
            "correct": bool(r["outcome"] == "evaluated" and r["kernelbench_correct"] is True
                            and r["kbstudy_correct"] is True),
            "variant_ms": v_ms, "variant_q1_ms": v_q1, "variant_q3_ms": v_q3,
            "ours_ms": o_ms, "ours_q1_ms": o_q1, "ours_q3_ms": o_q3,
            "variant_over_ours": _ratio(v_ms, o_ms), "iqr_disjoint": disjoint,
            "variant_speedup_vs_eager": r.get("speedup_vs_eager"),
            "variant_speedup_ci_low": r.get("speedup_vs_eager_ci_low"),
            "variant_speedup_ci_high": r.get("speedup_vs_eager_ci_high"),
            "ours_speedup_vs_eager": get(o, "speedup_vs_eager"),
            "ours_speedup_ci_low": get(o, "speedup_vs_eager_ci_low"),
            "ours_speedup_ci_high": get(o, "speedup_vs_eager_ci_high"),
            "variant_over_floor": _ratio(v_ms, floor), "ours_over_floor": _ratio(o_ms, floor),
            "variant_over_ours_ci_low": interval[0] if interval else None,
            "variant_over_ours_ci_high": interval[1] if interval else None,
            "variant_device_ms": v_dev, "ours_device_ms": o_dev, "variant_over_ours_device": _ratio(v_dev, o_dev),
            "variant_over_ours_device_ci_low": dev_interval[0] if dev_interval else None,
            "variant_over_ours_device_ci_high": dev_interval[1] if dev_interval else None,
        })
    out = pd.DataFrame(rows, columns=list(VARIANT_COLUMNS))
    for col in VARIANT_COLUMNS:
        if col.endswith("_ms") or "over" in col or "speedup" in col:
            out[col] = pd.to_numeric(out[col], errors="coerce").astype(float)
    return out


def variant_notes(table: pd.DataFrame) -> list[str]:
    """:func:`variants` in sentences. First, for each model configuration with variants of two or more problems,
    one summary: the range of variant / ours and on which problems the interval of that ratio lies above 1 (ours
    faster), below 1 (the variant faster) or contains 1. Then one sentence per variant: its median and interquartile
    range beside ours, variant / ours with its interval, both speedups over eager with their intervals (the same
    eager timing: same run, same reference), and, where both records have one, the device times and their ratio with
    its interval."""
    if not len(table):
        return ["no variant candidates in this run (only ours, model configuration " + MODEL_CONFIG + ")"]

    def ci(low, high):
        return f" [{low:.2f}, {high:.2f}]" if low == low and high == high else ""

    notes = []
    for config, rows in table.groupby("model_config", sort=True):
        paired = rows[rows["ours_ms"].notna()]
        if len(paired) < 2:
            continue
        low, high = paired["variant_over_ours_ci_low"], paired["variant_over_ours_ci_high"]
        known = low.notna() & high.notna()
        slower, faster = paired[known & (low > 1)], paired[known & (high < 1)]
        same = paired[known & (low <= 1) & (high >= 1)]

        def _with_ratios(rows: pd.DataFrame) -> str:
            return ", ".join(f"{r.problem_id} ({r.variant_over_ours:.2f}x)" for r in rows.itertuples()) or "none"

        note = (f"{config} beside ours on {len(paired)} problems (same run, same eager timing): variant / ours median "
                f"time {paired['variant_over_ours'].min():.2f}-{paired['variant_over_ours'].max():.2f}x (median "
                f"{paired['variant_over_ours'].median():.2f}x)")
        if known.any():
            note += (f"; 95 % interval of variant / ours above 1 (ours faster) on {len(slower)}: "
                     f"{_with_ratios(slower)}; below 1 (the variant faster) on {len(faster)}: {_with_ratios(faster)}; "
                     f"containing 1 on {len(same)}: {_with_ratios(same)}")
        if not known.all():
            note += f"; no interval (too few samples) on {int((~known).sum())}"
        notes.append(note)
    for r in table.itertuples():
        if r.ours_ms != r.ours_ms:
            notes.append(f"problem {r.problem_id} {r.model_config}: {r.variant_ms:.3f} ms; no record of ours to "
                         "compare")
            continue
        verdict = "correct" if r.correct else "NOT correct"
        iqr = ("interquartile ranges disjoint" if r.iqr_disjoint is True else "interquartile ranges overlap"
               if r.iqr_disjoint is False else "interquartile ranges not recorded")
        notes.append(
            f"problem {r.problem_id} {r.model_config} ({verdict}): {r.variant_ms:.3f} ms (IQR {r.variant_q1_ms:.3f}-"
            f"{r.variant_q3_ms:.3f}) against ours {r.ours_ms:.3f} ms ({r.ours_q1_ms:.3f}-{r.ours_q3_ms:.3f}), "
            f"{r.variant_over_ours:.2f}x ours' time{ci(r.variant_over_ours_ci_low, r.variant_over_ours_ci_high)}, "
            f"{iqr}; speedup vs eager {r.variant_speedup_vs_eager:.2f}x"
            f"{ci(r.variant_speedup_ci_low, r.variant_speedup_ci_high)} against ours {r.ours_speedup_vs_eager:.2f}x"
            f"{ci(r.ours_speedup_ci_low, r.ours_speedup_ci_high)}"
            + (f"; device time {r.variant_device_ms * 1e3:.1f} us against ours {r.ours_device_ms * 1e3:.1f} us, "
               f"{r.variant_over_ours_device:.2f}x"
               f"{ci(r.variant_over_ours_device_ci_low, r.variant_over_ours_device_ci_high)}"
               if r.variant_over_ours_device == r.variant_over_ours_device else ""))
    return notes
