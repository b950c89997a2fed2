"""What notebook 5 shows beside the projection: eager against production profiles, measured substitutions, and the
projected saving against the measured one, per workload.

* :func:`setup_comparison`: the addressable fraction and shares of each workload profiled eager and in the production
  setup (``torch.compile``, :mod:`kbstudy.profiling.production`), the eager folder named as the baseline.
* :func:`load_substitution_records`: the records ``kbstudy substitute`` writes (JSONL under
  ``outputs/records/substitution/<hardware>/<purpose>/``) through :mod:`kbstudy.substitution.store`, the newest
  record of each case, with its outcome, step times, places and worst end-to-end error.
* :func:`projected_vs_measured`: each measured (workload, setup, kernel source) beside its projection and the Amdahl
  bound, the difference in percentage points.
* :func:`answer`: the short answer to the paper's question, every number computed from the tables.

Pure pandas; matplotlib only inside :func:`plot_projected_vs_measured`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from kbstudy.profiling.addressable import DEFAULT_RULE, summarize
from kbstudy.substitution import store as substitution_store

#: Columns of :func:`load_substitution_records`.
MEASURED_COLUMNS = ["workload", "config", "mode", "kernel_source", "outcome", "baseline_ms", "baseline_ms_ci_low",
                    "baseline_ms_ci_high", "substituted_ms", "substituted_ms_ci_low", "substituted_ms_ci_high",
                    "saving", "places_substituted", "places_not_applicable", "not_applicable_reasons", "e2e_rel_l2",
                    "hardware"]
#: Values of ``kernel_source`` and how tables name them.
KERNEL_SOURCES = {"llm": "LLM-written", "expert": "expert-written"}


def _worst_rel_l2(value) -> float:
    """The largest of a record's end-to-end relative L2 errors (outputs, loss, gradients); NaN when none was taken."""
    found = [float(v) for v in (value or {}).values() if v is not None] if isinstance(value, dict) else []
    return max(found) if found else math.nan


def load_substitution_records(folders: Sequence[str | os.PathLike]) -> pd.DataFrame:
    """The newest substitution record of each (workload, setup, kernel source, hardware) in ``folders``
    (:func:`kbstudy.substitution.store.latest_records`), one row each in :data:`MEASURED_COLUMNS`. ``saving`` is
    the record's ``saving_fraction``; a case whose kernels apply nowhere (``nothing_applicable``) saves 0 by
    definition, and one the end-to-end check refused (``check_failed``) contributes nothing either, so it saves 0
    too (its ``outcome`` says why). Absent folders hold nothing."""
    rows = []
    for rec in substitution_store.latest_records(list(folders)):
        reasons = sorted({p.get("reason", "") for p in rec.get("places_not_applicable") or []})
        saving = rec.get("saving_fraction")
        if saving is None and rec.get("outcome") == "check_failed":
            saving = 0.0
        rows.append({"workload": rec.get("workload"), "config": rec.get("config"), "mode": rec.get("mode"),
                     "kernel_source": rec.get("kernel_source"), "outcome": rec.get("outcome"),
                     "baseline_ms": rec.get("baseline_ms_median"),
                     "baseline_ms_ci_low": rec.get("baseline_ms_ci_low"),
                     "baseline_ms_ci_high": rec.get("baseline_ms_ci_high"),
                     "substituted_ms": rec.get("substituted_ms_median"),
                     "substituted_ms_ci_low": rec.get("substituted_ms_ci_low"),
                     "substituted_ms_ci_high": rec.get("substituted_ms_ci_high"),
                     "saving": math.nan if saving is None else float(saving),
                     "places_substituted": len(rec.get("places_substituted") or []),
                     "places_not_applicable": len(rec.get("places_not_applicable") or []),
                     "not_applicable_reasons": "; ".join(r for r in reasons if r),
                     "e2e_rel_l2": _worst_rel_l2(rec.get("e2e_rel_l2")), "hardware": rec.get("hardware")})
    return pd.DataFrame(rows, columns=MEASURED_COLUMNS).astype({c: float for c in MEASURED_COLUMNS if c.endswith(("_ms", "_low", "_high"))})


def workload_name(key: str) -> str:
    """``"gpt2_train@small"`` -> ``"gpt2_train"``."""
    return str(key).split("@", 1)[0]


def setup_comparison(profiles: dict[str, tuple[pd.DataFrame, pd.DataFrame]], keys: Sequence[str],
                     rule=DEFAULT_RULE) -> pd.DataFrame:
    """Per workload key and setup (``profiles``: setup -> ``(kernels, workloads)`` of
    :func:`kbstudy.analysis.profiles.load_profile_records`): addressable fraction, GEMM+attention share, the share
    in Inductor's Triton kernels, the kernel time and the step time (ms). Workloads a setup lacks are left out."""
    rows = []
    for setup, (kernels, workloads) in profiles.items():
        ok = workloads[(workloads["status"] == "ok") & workloads["workload_key"].isin(keys)]
        present = [k for k in keys if k in set(ok["workload_key"])]
        if not present:
            continue
        k = kernels[kernels["workload_key"].isin(present)]
        s = summarize(k, ok, rule=rule).reindex(present)
        triton = (k[k["category"] == "triton"].groupby("workload_key")["time_us_per_step"].sum()
                  / k.groupby("workload_key")["time_us_per_step"].sum()).reindex(present).fillna(0.0)
        for key in present:
            rows.append({"workload_key": key, "setup": setup, "addressable_fraction": s.loc[key, "addressable_fraction"],
                         "gemm_attention_share": s.loc[key, "gemm_attention_share"], "triton_share": triton[key],
                         "kernel_ms": s.loc[key, "kernel_us_per_step"] / 1e3 if "kernel_us_per_step" in s else np.nan,
                         "step_ms": s.loc[key, "step_ms_median"] if "step_ms_median" in s else np.nan})
    return pd.DataFrame(rows, columns=["workload_key", "setup", "addressable_fraction", "gemm_attention_share",
                                       "triton_share", "kernel_ms", "step_ms"])


#: The paper's GEMM+attention share of transformer GPU time (its profiles: 80-86%).
PAPER_TRANSFORMER_GEMM_ATTENTION = (0.80, 0.86)


def closest_setup(comparison: pd.DataFrame, transformer_keys: Sequence[str],
                  paper: tuple[float, float] = PAPER_TRANSFORMER_GEMM_ATTENTION) -> str:
    """Which setup's transformer profiles are closest to the paper's GEMM+attention share, in words: per setup the
    range of ``gemm_attention_share`` over ``transformer_keys`` (:func:`setup_comparison` rows) and its mean
    distance to the paper's interval."""
    rows = comparison[comparison["workload_key"].isin(transformer_keys)]
    if rows.empty:
        return "No transformer profile in the records."
    lo, hi = paper
    gaps = {}
    for setup, g in rows.groupby("setup", sort=False):
        share = g["gemm_attention_share"]
        gaps[setup] = (float(np.mean([max(lo - v, 0.0, v - hi) for v in share])), _span(share))
    best = min(gaps, key=lambda k: gaps[k][0])
    spans = "; ".join(f"{k}: {span}" for k, (_, span) in gaps.items())
    return (f"GEMM+attention share of the transformers' GPU time, {spans}; the paper reports {lo:.0%}-{hi:.0%}, "
            f"closest to the {best} setup (mean distance {gaps[best][0]:.1%} from its range).")


def projected_vs_measured(projections: dict[tuple[str, str], pd.DataFrame], measured: pd.DataFrame) -> pd.DataFrame:
    """Each projected workload (``projections``: ``(setup, kernel_source)`` -> :func:`kbstudy.analysis.projection.
    workload_projection`) with its measured saving where a record exists: ``projected_of_step`` (per category, as a
    share of the step time), ``projected_of_kernels``, ``amdahl_bound``, ``measured_saving`` with the record's step
    times, the places substituted and not applicable, and ``difference_pp`` (measured - projected, percentage
    points). Several records of one (workload, setup, source, mode) keep the last."""
    m = measured.assign(workload=measured["workload"].map(workload_name))
    m = m.drop_duplicates(["workload", "config", "kernel_source", "mode"], keep="last")
    rows = []
    for (setup, source), proj in projections.items():
        for key, p in proj.iterrows():
            name = workload_name(key)
            hit = m[(m["workload"] == name) & (m["config"] == setup) & (m["kernel_source"] == source)]
            rec = hit.iloc[-1] if len(hit) else None
            projected = p["saving_by_category_of_step"]
            projected = p["saving_by_category"] if pd.isna(projected) else projected
            measured_saving = rec["saving"] if rec is not None else np.nan
            rows.append({"workload_key": key, "setup": setup, "kernel_source": KERNEL_SOURCES.get(source, source),
                         "f": p["f"], "amdahl_bound": p["amdahl_bound"],
                         "projected_of_kernels": p["saving_by_category"], "projected_of_step": projected,
                         "measured_saving": measured_saving,
                         "outcome": rec["outcome"] if rec is not None else "",
                         "baseline_ms": rec["baseline_ms"] if rec is not None else np.nan,
                         "substituted_ms": rec["substituted_ms"] if rec is not None else np.nan,
                         "places_substituted": rec["places_substituted"] if rec is not None else np.nan,
                         "places_not_applicable": rec["places_not_applicable"] if rec is not None else np.nan,
                         "not_applicable_reasons": rec["not_applicable_reasons"] if rec is not None else "",
                         "difference_pp": 100 * (measured_saving - projected)})
    return pd.DataFrame(rows)


def _pct(x: float) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{100 * x:.1f}%"


def _span(values: pd.Series) -> str:
    v = values.dropna()
    if not len(v):
        return "-"
    return _pct(v.min()) if math.isclose(v.min(), v.max(), abs_tol=5e-4) else f"{_pct(v.min())}-{_pct(v.max())}"


def _measured_sentence(measured: pd.DataFrame) -> str:
    """The measured cases in words: for each kernel source, the cases where kernels applied nowhere counted together,
    the others one by one with their outcome."""
    parts = []
    for source, g in measured.groupby("kernel_source", sort=False):
        idle = g[g["outcome"] == "nothing_applicable"]
        if len(idle):
            parts.append(f"{source} kernels applied nowhere in {len(idle)} of {len(g)} cases (workload x setup), "
                         "every place refused by the guard (no verified kernel for the operator, or one verified at another dtype or shape), saving 0")
        for r in g[g["outcome"] != "nothing_applicable"].itertuples():
            what = ("refused by the end-to-end check, saving 0" if r.outcome == "check_failed"
                    else f"{_pct(r.measured_saving)} of step time")
            parts.append(f"{source} kernels in {r.workload_key} ({r.setup}): {what}, against "
                         f"{_pct(r.projected_of_step)} projected")
    return "; ".join(parts) + "."


def answer(llm: pd.DataFrame, llm_rates: pd.DataFrame, compile_rates: pd.DataFrame | None,
           expert: pd.DataFrame | None, comparison: pd.DataFrame, hardware: str) -> str:
    """One paragraph: what fraction of real step time LLM-written kernels reach, projected and measured, on which
    workloads, under which baseline; every number from the tables (``llm``/``expert``: workload projections;
    ``llm_rates``/``compile_rates``: :func:`kbstudy.analysis.projection.kernel_category_rates` against eager and
    against ``torch.compile``; ``comparison``: :func:`projected_vs_measured`)."""
    if not len(llm):
        return "No workload profile in the records: nothing to project."
    pooled = llm_rates.set_index("kernel_category").loc["all"]
    median = (f"median {pooled['median_speedup']:.2f}x among them" if np.isfinite(pooled["median_speedup"])
              else "no median without a win")
    parts = [f"On {hardware}, {int(pooled['wins'])} of {int(pooled['n'])} LLM-written level-1 kernels are verified "
             f"wins over eager PyTorch ({median})."]
    by_dom = []
    for dom, g in llm.groupby("domain", sort=False):
        step = g["saving_by_category_of_step"]
        by_dom.append(f"{_span(g['saving_by_category'])} of kernel time on the {dom} workloads"
                      + (f" ({_span(step)} of step time)" if step.notna().any() else ""))
    parts.append("With the paper's formula per kernel category (f_c x p_win,c x (1 - 1/s_c)), they would save "
                 + "; ".join(by_dom) + f" (pooled, f x p_win x (1 - 1/s): {_span(llm['saving_pooled'])}), against the "
                 "paper's 8.63% on its recommender and about 1% on transformers.")
    if compile_rates is not None and len(compile_rates):
        c = compile_rates.set_index("kernel_category").loc["all"]
        parts.append(f"Against torch.compile, the baseline of the production setup, {int(c['wins'])} of "
                     f"{int(c['n'])} are verified wins, so the projection there is "
                     + ("0." if int(c["wins"]) == 0 else "smaller still."))
    if expert is not None and len(expert):
        step = expert["saving_by_category_of_step"]
        parts.append(f"Expert-written kernels (our DLRM-Bench Triton kernels, not LLM-written) would save "
                     f"{_span(expert['saving_by_category'])} of DLRM-DCNv2's kernel time"
                     + (f" ({_span(step)} of its step time)." if step.notna().any() else "."))
    measured = comparison[comparison["measured_saving"].notna()] if len(comparison) else comparison
    if len(measured):
        parts.append("Measured by substitution: " + _measured_sentence(measured))
    else:
        parts.append("No substitution has been measured yet: the measured column is empty.")
    return " ".join(parts)


def plot_projected_vs_measured(comparison: pd.DataFrame, title: str):
    """Horizontal bars per (workload, setup, kernel source): the projected saving (share of step time, per category)
    and the measured one where a record exists (hatched). Returns the matplotlib figure."""
    import matplotlib.pyplot as plt  # the notebooks extra: the tables above need no matplotlib

    labels = [f"{r.workload_key} | {r.setup} | {r.kernel_source}" for r in comparison.itertuples()]
    y = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(8, 0.38 * len(labels) + 1.8))
    ax.barh(y - 0.2, comparison["projected_of_step"].fillna(0.0), height=0.4, color="C0", label="projected")
    measured = comparison["measured_saving"]
    ax.barh(y + 0.2, measured.fillna(0.0), height=0.4, color="C1", hatch="//", label="measured")
    for yi, v in zip(y, measured):
        if pd.isna(v):
            ax.annotate("not measured", (0, yi + 0.2), xytext=(3, 0), textcoords="offset points", va="center",
                        fontsize=6, color="0.4")
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.axvline(0, color="0.3", lw=0.8)
    ax.set_xlabel("saving, share of step time")
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{100 * v:.0f}%"))
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


__all__ = ["MEASURED_COLUMNS", "KERNEL_SOURCES", "load_substitution_records", "workload_name", "setup_comparison", "closest_setup",
           "projected_vs_measured", "answer", "plot_projected_vs_measured"]
