"""The paper's end-to-end projection with our numbers: how much of a workload's step LLM-written kernels would save.

The paper (``kbstudy.profiling.addressable.PAPER_CITATION``) projects the end-to-end saving of a workload as

    saving = f x p_win x (1 - 1/s)

with f the addressable fraction, p_win the share of generated kernels that beat the baseline and s their median
speedup: 58.2% x 41.7% x (1 - 1/1.552) = 8.63% on its recommender, about 1% on transformers (:data:`PAPER_PROJECTION`).
Here the same formula is computed from the committed records, twice:

* **pooled** (the paper's form): f of the workload (:mod:`kbstudy.profiling.addressable`, rule ``non_vendor`` by
  default) times the win rate and median winning speedup over *all* level-1 kernels;
* **per category**: sum over the rule's kernel categories c of f_c x p_win,c x (1 - 1/s_c), with f_c the share of the
  workload's kernel time in c and p_win,c, s_c taken over the level-1 problems of the problem categories that c maps
  to (:data:`KERNEL_TO_PROBLEM`). A kernel category with no mapped problem, or no win among them, contributes 0.

A *win* is a correct kernel with a verified speedup over the baseline (``kbstudy.analysis.scoring.verified_faster``:
speedup > 1, 95% interval clearing the hardware's noise margin); p_win = wins / kernels attempted; s = the median
speedup among the wins. The baseline follows the profiled configuration: ``eager`` for eager profiles, ``compile``
(``torch.compile``, Inductor's default mode) for the production configuration, where a kernel must beat Inductor's.

The kernel category of a profiled kernel is its :func:`kbstudy.harness.kernel_classes.classify_kernel` category, except
that Inductor's Triton kernels (category ``triton``) are read by what they compute
(:func:`kbstudy.harness.kernel_classes.inductor_category`: pointwise -> elementwise, reductions -> reduction,
normalization or softmax). Each f_c is also given as a share of the step time measured without the profiler
(``_of_step`` columns), the number a measured end-to-end saving compares with.

The expert case (:func:`dlrm_expert_rates`): DLRM-Bench's twelve problems with kbstudy's own Triton kernels, each
problem mapped to the kernel category of the eager kernels it replaces (:data:`DLRM_PROBLEM_TO_KERNEL`). Those kernels
are expert-written, not LLM-written, and are labelled so wherever they appear. Pure pandas over record frames.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from kbstudy.analysis import scoring
from kbstudy.analysis.headline import with_categories
from kbstudy.harness.kernel_classes import CATEGORIES, inductor_category
from kbstudy.profiling.addressable import DEFAULT_RULE, amdahl_bound, rule_categories

#: The paper's projection (``kbstudy.profiling.addressable.PAPER_CITATION``), for labelled comparison only: its
#: recommender's addressable fraction, win rate and median speedup, the saving they give, and its transformer figure.
PAPER_PROJECTION = {
    "addressable_fraction": 0.582, "win_rate": 0.417, "median_speedup": 1.552, "saving": 0.0863,
    "transformer_saving_approx": 0.01,
}

#: The rule mapping a kernel category (:data:`kbstudy.harness.kernel_classes.CATEGORIES`, the profiles) to the
#: KernelBench problem categories (:func:`kbstudy.harness.problems.operator_category`, the evaluations) whose kernels
#: stand for it. KernelBench files softmax and log-softmax under ``activation`` (``CATEGORY_RULES``), and its
#: activations are the level-1 elementwise problems, so both map there; the ``reduction`` kernel class holds
#: reductions, scans, pooling and loss reductions (``KERNEL_RULES``), so it maps to the three problem categories.
#: Embedding has no level-1 problem; data movement, communication and "other" are no operator.
KERNEL_TO_PROBLEM: dict[str, tuple[str, ...]] = {
    "gemm": ("matmul",),
    "attention": ("attention",),
    "convolution": ("convolution",),
    "embedding": (),
    "normalization": ("normalization",),
    "softmax": ("activation",),
    "reduction": ("reduction", "pooling", "loss"),
    "elementwise": ("activation",),
    "triton": (),  # never reached: Inductor kernels are read by what they compute (projection_category)
    "memcpy": (),
    "communication": (),
    "other": (),
}

#: The expert case: each DLRM-Bench problem (id) -> the kernel category of the eager kernels its reference runs.
DLRM_PROBLEM_TO_KERNEL: dict[int, str] = {
    1: "embedding", 2: "embedding", 3: "embedding", 4: "embedding", 5: "embedding", 6: "embedding",
    7: "reduction",  # lengths -> offsets: a cumulative sum (hashing aside)
    8: "elementwise",  # jagged -> padded dense: an indexed copy
    9: "gemm", 10: "gemm", 11: "gemm",  # dot interaction (bmm), DCNv2 cross and bottom MLP: GEMMs with epilogues
    12: "reduction",  # top-MLP tail: sigmoid + binary cross-entropy, a loss reduction
}

#: Labels of the kernels' authors.
SOURCE_LLM, SOURCE_EXPERT = "LLM-written (KernelBench leaderboard)", "expert-written (kbstudy DLRM-Bench)"

RATE_COLUMNS = ["kernel_category", "problem_categories", "n", "wins", "win_rate", "median_speedup", "source"]


def projection_category(name: str, category: str) -> str:
    """The kernel category a profiled kernel counts in for the projection: ``category`` itself, except an Inductor
    Triton kernel (``triton``), which counts by what it computes (:func:`~kbstudy.harness.kernel_classes.inductor_category`;
    a Triton kernel of no known kind stays ``triton``)."""
    if category == "triton":
        return inductor_category(name) or "triton"
    return category


def llm_attempts(evaluations: pd.DataFrame, *, baseline: str = "eager", correctness: str = "kbstudy",
                 problem_version: str = "current", precision: str = "fp32", level: int = 1) -> pd.DataFrame:
    """The LLM-written kernels of an evaluation frame (every configuration but the ``null:*`` candidates) on
    ``level``, ``problem_version`` and ``precision``, scored by :func:`kbstudy.analysis.scoring.attempts` (noise
    margins from the frame's ``null:reference`` records): one row per attempt with ``category`` (the problem's
    operator category), ``speedup`` (over ``baseline``) and ``won`` (:func:`kbstudy.analysis.scoring.verified_faster`)."""
    frame = evaluations[(evaluations["level"] == level) & (evaluations["precision"] == precision)
                        & (evaluations["problem_version"] == problem_version)]
    if not len(frame):
        return pd.DataFrame(columns=["model_config", "problem_name", "category", "speedup", "won"])
    att = scoring.attempts(with_categories(frame), by=["problem_version", "model_config", "precision"],
                           correctness=correctness, baseline=baseline)
    att = att[att["attempted"] & ~att["model_config"].astype(str).str.startswith("null:")].copy()
    att["won"] = scoring.verified_faster(att).astype(bool)
    return att.reset_index(drop=True)


def _rate_row(kernel_category: str, problem_categories: Iterable[str], rows: pd.DataFrame, source: str) -> dict:
    wins = rows[rows["won"]]
    return {"kernel_category": kernel_category, "problem_categories": ", ".join(problem_categories), "n": len(rows),
            "wins": len(wins), "win_rate": len(wins) / len(rows) if len(rows) else np.nan,
            "median_speedup": float(wins["speedup"].median()) if len(wins) else np.nan, "source": source}


def problem_category_rates(attempts: pd.DataFrame) -> pd.DataFrame:
    """Per problem category of :func:`llm_attempts` (and an ``all`` row): kernels attempted, wins, win rate and the
    median speedup among the wins (``problem_category``, ``n``, ``wins``, ``win_rate``, ``median_speedup``)."""
    rows = [{**_rate_row("", (), g, ""), "problem_category": cat} for cat, g in attempts.groupby("category", sort=True)]
    rows.append({**_rate_row("", (), attempts, ""), "problem_category": "all"})
    return pd.DataFrame(rows)[["problem_category", "n", "wins", "win_rate", "median_speedup"]]


def kernel_category_rates(attempts: pd.DataFrame, mapping: Mapping[str, Iterable[str]] = KERNEL_TO_PROBLEM,
                          source: str = SOURCE_LLM) -> pd.DataFrame:
    """Per kernel category of :data:`~kbstudy.harness.kernel_classes.CATEGORIES`: the attempts of the problem
    categories ``mapping`` gives it, pooled (:data:`RATE_COLUMNS`; ``n`` = 0 and NaN rates where it maps to none),
    then an ``all`` row over every attempt (the paper's pooled rate)."""
    rows = [_rate_row(kc, tuple(mapping.get(kc, ())), attempts[attempts["category"].isin(tuple(mapping.get(kc, ())))],
                      source) for kc in CATEGORIES]
    rows.append(_rate_row("all", ("all",), attempts, source))
    return pd.DataFrame(rows, columns=RATE_COLUMNS)


def dlrm_expert_rates(evaluations: pd.DataFrame, *, baseline: str = "eager", correctness: str = "kbstudy",
                      mapping: Mapping[int, str] = DLRM_PROBLEM_TO_KERNEL,
                      noise_margin: float | str = 0.0) -> pd.DataFrame:
    """:data:`RATE_COLUMNS` of DLRM-Bench's kernels (level 5 records, every precision they were measured at),
    each problem counted in its kernel category by ``mapping`` (``problem_categories`` lists the problem ids), then
    an ``all`` row; ``source`` is :data:`SOURCE_EXPERT`. DLRM-Bench folders hold no ``null:reference`` records, so the
    default ``noise_margin`` is 0: a win is a speedup > 1 whose interval excludes 1, DLRM-Bench's own criterion
    (notebook 04's "12 of 12"); pass the margin of the same hardware measured elsewhere (``scoring.noise_margins`` of
    the leaderboard folder) for the leaderboard's stricter rule."""
    frame = evaluations[evaluations["problem_version"] == "dlrm"].copy()
    if not len(frame):
        return pd.DataFrame(columns=RATE_COLUMNS)
    att = scoring.attempts(with_categories(frame), by=["model_config", "precision"], correctness=correctness,
                           baseline=baseline, noise_margin=noise_margin)
    att = att[att["attempted"] & ~att["model_config"].astype(str).str.startswith("null:")].copy()
    att["won"] = scoring.verified_faster(att).astype(bool)
    att["kernel_category"] = att["problem_id"].astype(int).map(dict(mapping))
    rows = []
    for kc in CATEGORIES:
        g = att[att["kernel_category"] == kc]
        rows.append(_rate_row(kc, [str(i) for i in sorted(g["problem_id"].astype(int).unique())], g, SOURCE_EXPERT))
    rows.append(_rate_row("all", ("all",), att, SOURCE_EXPERT))
    return pd.DataFrame(rows, columns=RATE_COLUMNS)


def _gain(rate: pd.Series) -> pd.Series:
    """p_win x (1 - 1/s) per rate row; 0 where there is no win (or no problem)."""
    g = rate["win_rate"].astype(float) * (1.0 - 1.0 / rate["median_speedup"].astype(float))
    return g.fillna(0.0)


def category_projection(kernels: pd.DataFrame, workloads: pd.DataFrame, rates: pd.DataFrame,
                        rule=DEFAULT_RULE, keys: Iterable[str] | None = None) -> pd.DataFrame:
    """One row per (workload, kernel category with time): ``f_c`` (share of kernel time), ``f_c_of_step`` (share of
    the un-profiled step time; NaN without one), ``addressable`` (in ``rule``), the category's rate (``n``, ``wins``,
    ``win_rate``, ``median_speedup``, ``problem_categories``) and ``saving_c`` = f_c x p_win,c x (1 - 1/s_c)
    (``saving_c_of_step`` likewise). ``kernels``/``workloads``: :func:`kbstudy.analysis.profiles.load_profile_records`;
    ``rates``: :func:`kernel_category_rates` or :func:`dlrm_expert_rates`. ``keys`` restricts and orders workloads."""
    ok = workloads[workloads["status"] == "ok"]
    keys = list(keys) if keys is not None else list(ok["workload_key"])
    k = kernels[kernels["workload_key"].isin(keys)]
    k = k.assign(kernel_category=[projection_category(n, c) for n, c in zip(k["name"], k["category"])])
    t = k.groupby(["workload_key", "kernel_category"])["time_us_per_step"].sum().rename("time_us").reset_index()
    totals = k.groupby("workload_key")["time_us_per_step"].sum()
    step_us = ok.set_index("workload_key")["step_ms_median"].astype(float) * 1e3 if "step_ms_median" in ok else None
    t["f_c"] = t["time_us"] / t["workload_key"].map(totals)
    t["f_c_of_step"] = (t["time_us"] / t["workload_key"].map(step_us)) if step_us is not None else np.nan
    cats = rule_categories(rule)
    t["addressable"] = t["kernel_category"].isin(cats)
    r = rates.set_index("kernel_category")
    for col in ("problem_categories", "n", "wins", "win_rate", "median_speedup"):
        t[col] = t["kernel_category"].map(r[col]) if len(r) else np.nan
    gain = _gain(t)
    t["saving_c"] = t["f_c"] * gain
    t["saving_c_of_step"] = t["f_c_of_step"] * gain
    order = {kk: i for i, kk in enumerate(keys)}
    cat_order = {c: i for i, c in enumerate(CATEGORIES)}
    t = t.sort_values(["workload_key", "kernel_category"], key=lambda s: s.map(order if s.name == "workload_key"
                                                                                 else cat_order), kind="stable")
    return t.drop(columns="time_us").reset_index(drop=True)


def workload_projection(per_category: pd.DataFrame, rates: pd.DataFrame, workloads: pd.DataFrame,
                        source: str | None = None) -> pd.DataFrame:
    """One row per workload of :func:`category_projection`: ``domain``, ``f`` (addressable share of kernel time),
    ``amdahl_bound`` 1/(1-f), the pooled rate (``win_rate``, ``median_speedup``: the ``all`` row of ``rates``),
    ``saving_pooled`` = f x p_win x (1 - 1/s) (the paper's form), ``saving_by_category`` = the sum of the addressable
    categories' ``saving_c``, ``speedup_by_category`` = 1 / (1 - saving_by_category), and the same savings as shares
    of the un-profiled step time (``f_of_step``, ``saving_pooled_of_step``, ``saving_by_category_of_step``)."""
    a = per_category[per_category["addressable"]]
    keys = list(dict.fromkeys(per_category["workload_key"]))
    out = pd.DataFrame(index=pd.Index(keys, name="workload_key"))
    domain = workloads.set_index("workload_key")["domain"] if "domain" in workloads else pd.Series(dtype=object)
    out["domain"] = out.index.map(domain)
    out["f"] = a.groupby("workload_key")["f_c"].sum().reindex(keys).fillna(0.0)
    out["f_of_step"] = a.groupby("workload_key")["f_c_of_step"].sum(min_count=1).reindex(keys)
    out["amdahl_bound"] = out["f"].map(amdahl_bound)
    pooled = rates[rates["kernel_category"] == "all"]
    p = float(pooled["win_rate"].iloc[0]) if len(pooled) else np.nan
    s = float(pooled["median_speedup"].iloc[0]) if len(pooled) else np.nan
    gain = 0.0 if not (p > 0 and s > 0) else p * (1.0 - 1.0 / s)
    out["win_rate"], out["median_speedup"] = p, s
    out["saving_pooled"] = out["f"] * gain
    out["saving_by_category"] = a.groupby("workload_key")["saving_c"].sum().reindex(keys).fillna(0.0)
    out["speedup_by_category"] = 1.0 / (1.0 - out["saving_by_category"])
    out["saving_pooled_of_step"] = out["f_of_step"] * gain
    out["saving_by_category_of_step"] = a.groupby("workload_key")["saving_c_of_step"].sum(min_count=1).reindex(keys)
    out["kernel_source"] = source if source is not None else (pooled["source"].iloc[0] if len(pooled) else None)
    return out


def paper_rows() -> pd.DataFrame:
    """The paper's projection (:data:`PAPER_PROJECTION`) as labelled rows in :func:`workload_projection`'s columns."""
    p = PAPER_PROJECTION
    return pd.DataFrame([
        {"workload_key": "paper: recommender", "domain": "recommender", "f": p["addressable_fraction"],
         "win_rate": p["win_rate"], "median_speedup": p["median_speedup"], "saving_pooled": p["saving"],
         "kernel_source": "paper"},
        {"workload_key": "paper: transformers", "domain": "transformer", "saving_pooled": p["transformer_saving_approx"],
         "kernel_source": "paper"},
    ]).set_index("workload_key")


def paper_saving(f: float, win_rate: float, median_speedup: float) -> float:
    """f x p_win x (1 - 1/s): the paper's end-to-end saving (58.2% x 41.7% x (1 - 1/1.552) = 8.63%)."""
    return f * win_rate * (1.0 - 1.0 / median_speedup)


def _pct(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{100 * x:.1f}%"


def projection_notes(summary: pd.DataFrame, rates: pd.DataFrame, baseline: str, label: str) -> list[str]:
    """Sentences stating the projection of ``summary`` (:func:`workload_projection`) beside the paper's, every number
    computed from the frames."""
    if not len(summary):
        return [f"{label}: no workload to project."]
    pooled = rates[rates["kernel_category"] == "all"].iloc[0]
    median = (f"median {pooled['median_speedup']:.2f}x among them" if np.isfinite(pooled["median_speedup"])
              else "no win, no median")
    notes = [f"{label} (baseline {baseline}): {int(pooled['wins'])} of {int(pooled['n'])} kernels are verified wins "
             f"({_pct(pooled['win_rate'])}), {median}."]
    for dom, g in summary.groupby("domain", sort=False):
        notes.append(f"{dom}: projected saving {_pct(g['saving_pooled'].min())}-{_pct(g['saving_pooled'].max())} "
                     f"of kernel time pooled (f x p_win x (1 - 1/s)), {_pct(g['saving_by_category'].min())}-"
                     f"{_pct(g['saving_by_category'].max())} per category; f {_pct(g['f'].min())}-"
                     f"{_pct(g['f'].max())}.")
    p = PAPER_PROJECTION
    notes.append(f"Paper: {_pct(p['addressable_fraction'])} x {_pct(p['win_rate'])} x (1 - 1/{p['median_speedup']}) "
                 f"= {_pct(p['saving'])} on its recommender, about {_pct(p['transformer_saving_approx'])} on "
                 "transformers.")
    return notes


__all__ = ["PAPER_PROJECTION", "KERNEL_TO_PROBLEM", "DLRM_PROBLEM_TO_KERNEL", "SOURCE_LLM", "SOURCE_EXPERT",
           "RATE_COLUMNS", "projection_category", "llm_attempts", "problem_category_rates", "kernel_category_rates",
           "dlrm_expert_rates", "category_projection", "workload_projection", "paper_rows", "paper_saving",
           "projection_notes"]
