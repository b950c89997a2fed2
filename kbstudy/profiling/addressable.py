"""Addressable fraction, the Amdahl bound and projected end-to-end speedups.

The **addressable fraction** f of a workload is the share of its GPU kernel time (or, on CPU, of its ATen self time)
spent in categories that a KernelBench-style kernel could plausibly replace. Which categories count is a *rule*, a
parameter of every function here:

* ``"non_vendor"`` (default): embedding, normalization, softmax, reduction, elementwise and Triton/Inductor kernels,
  i.e. everything except vendor-library GEMM (cuBLAS/cuBLASLt/CUTLASS), attention (FlashAttention/cuDNN SDPA) and
  convolution (cuDNN), data movement (memcpy/memset), communication (NCCL) and unclassified kernels ("other").
  The argument: a generated kernel can fuse or out-run ATen's generic kernels, but matching tuned vendor GEMM,
  attention and convolution libraries is not what KernelBench-style kernels achieve.
* ``"non_vendor_plus_attention"``: also attention (a custom attention kernel is a classic generation target).
* ``"all_compute"``: every compute category (an optimistic upper bound).

With f the addressable share, Amdahl's law gives the end-to-end speedup when the addressable kernels become s times
faster: S(s) = 1 / ((1 - f) + f / s), and its bound as s -> infinity: S_max = 1 / (1 - f).
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

import pandas as pd

from kbstudy.harness.kernel_classes import CATEGORIES

ADDRESSABLE_RULES: dict[str, frozenset[str]] = {
    "non_vendor": frozenset({"embedding", "normalization", "softmax", "reduction", "elementwise", "triton"}),
    "non_vendor_plus_attention": frozenset(
        {"embedding", "normalization", "softmax", "reduction", "elementwise", "triton", "attention"}),
    "all_compute": frozenset(
        {"gemm", "attention", "convolution", "embedding", "normalization", "softmax", "reduction", "elementwise",
         "triton"}),
}
DEFAULT_RULE = "non_vendor"

#: Where :data:`PAPER`'s values come from (shown beside them wherever they appear).
PAPER_CITATION = ('Agarwal, Garg, Singhal (2026), "How Much of a Real Workload Can LLM-Generated GPU Kernels Actually '
                  'Reach?"')
#: The paper's reported values (:data:`PAPER_CITATION`), for side-by-side comparison only (labelled "paper" wherever
#: they appear): the range of the addressable fraction over its seven workloads, and the share of transformer runtime
#: in cuBLAS GEMM plus FlashAttention. Fractions (0..1).
PAPER = {
    "addressable_min": 0.089,  # smallest addressable fraction over the seven workloads
    "addressable_max": 0.582,  # recommender: largest, concentrated in one embedding kernel
    "transformer_gemm_attention_min": 0.80,  # share of runtime in cuBLAS GEMM + FlashAttention on transformers
    "transformer_gemm_attention_max": 0.86,
}


def rule_categories(rule: str | Iterable[str]) -> frozenset[str]:
    """The categories a rule counts as addressable: a name from :data:`ADDRESSABLE_RULES` or an explicit set.

    Raises ``KeyError`` for an unknown rule name and ``ValueError`` for an unknown category.
    """
    if isinstance(rule, str):
        return ADDRESSABLE_RULES[rule]
    cats = frozenset(rule)
    unknown = cats - set(CATEGORIES)
    if unknown:
        raise ValueError(f"unknown categories {sorted(unknown)}; known: {CATEGORIES}")
    return cats


def amdahl_bound(f: float) -> float:
    """Upper bound on end-to-end speedup when a fraction ``f`` of the time drops to zero: 1 / (1 - f).

    Returns ``inf`` for f == 1. Raises ``ValueError`` unless 0 <= f <= 1.
    """
    if not 0.0 <= f <= 1.0 or math.isnan(f):
        raise ValueError(f"fraction must lie in [0, 1], got {f}")
    return math.inf if f == 1.0 else 1.0 / (1.0 - f)


def projected_speedup(f: float, s: float) -> float:
    """End-to-end speedup when a fraction ``f`` of the time becomes ``s`` times faster: 1 / ((1 - f) + f / s).

    ``s = inf`` gives :func:`amdahl_bound`. Raises ``ValueError`` unless 0 <= f <= 1 and s > 0.
    """
    if not 0.0 <= f <= 1.0 or math.isnan(f):
        raise ValueError(f"fraction must lie in [0, 1], got {f}")
    if not s > 0:
        raise ValueError(f"kernel speedup must be > 0, got {s}")
    return 1.0 / ((1.0 - f) + (0.0 if math.isinf(s) else f / s))


def category_shares(kernels: pd.DataFrame, by: str = "workload_key", time_col: str = "time_us_per_step") -> pd.DataFrame:
    """Share of time per category: one row per ``by`` value, one column per category of :data:`CATEGORIES` (0..1).

    ``kernels`` needs columns ``by``, ``category`` and ``time_col``. Rows sum to 1 (a group with zero total time
    raises ``ValueError``).
    """
    pivot = kernels.pivot_table(index=by, columns="category", values=time_col, aggfunc="sum", fill_value=0.0)
    pivot = pivot.reindex(columns=list(CATEGORIES), fill_value=0.0)
    totals = pivot.sum(axis=1)
    if (totals <= 0).any():
        raise ValueError(f"zero total time for {list(totals[totals <= 0].index)}")
    return pivot.div(totals, axis=0)


def addressable_fraction(shares: Mapping[str, float] | pd.Series, rule: str | Iterable[str] = DEFAULT_RULE) -> float:
    """Sum of the shares of the rule's categories. ``shares`` maps category -> share (summing to 1)."""
    cats = rule_categories(rule)
    return float(sum(float(v) for k, v in dict(shares).items() if k in cats))


def summarize(kernels: pd.DataFrame, workloads: pd.DataFrame | None = None, rule: str | Iterable[str] = DEFAULT_RULE,
              speedups: Iterable[float] = (2.0, 10.0), by: str = "workload_key") -> pd.DataFrame:
    """One row per workload: addressable fraction f, GEMM+attention(+conv) share, "other" share, Amdahl bound and
    projected end-to-end speedups for each kernel speedup in ``speedups``.

    If ``workloads`` (the workload records) is given, its step time is joined and ``f_of_step`` is added: addressable
    kernel time per step over the step time measured without the profiler (µs / (ms * 1000)); streams overlap and the
    profiler can perturb, so it is a cross-check, capped at 1.
    """
    shares = category_shares(kernels, by=by)
    cats = rule_categories(rule)
    out = pd.DataFrame(index=shares.index)
    out["addressable_fraction"] = shares[[c for c in CATEGORIES if c in cats]].sum(axis=1)
    out["gemm_attention_share"] = shares["gemm"] + shares["attention"]
    out["vendor_share"] = shares["gemm"] + shares["attention"] + shares["convolution"]
    out["other_share"] = shares["other"]
    out["amdahl_bound"] = out["addressable_fraction"].map(amdahl_bound)
    for s in speedups:
        out[f"speedup_at_{s:g}x"] = out["addressable_fraction"].map(lambda f, s=s: projected_speedup(f, s))
    if workloads is not None and len(workloads):
        w = workloads.set_index(by)
        addressable_us = kernels[kernels["category"].isin(cats)].groupby(by)["time_us_per_step"].sum()
        out["kernel_us_per_step"] = kernels.groupby(by)["time_us_per_step"].sum()
        for col in ("step_ms_median", "step_ms_q1", "step_ms_q3"):
            if col in w:
                out[col] = w[col]
        if "step_ms_median" in w:
            out["f_of_step"] = (addressable_us.reindex(out.index).fillna(0.0) / (w["step_ms_median"] * 1e3)).clip(upper=1.0)
    return out


def paper_comparison(summary: pd.DataFrame, domain_of: Mapping[str, str]) -> pd.DataFrame:
    """Per domain: our min/max addressable fraction and GEMM+attention share beside the paper's range (labelled)."""
    df = summary.assign(domain=[domain_of.get(k, "?") for k in summary.index])
    g = df.groupby("domain").agg(addressable_min=("addressable_fraction", "min"),
                                 addressable_max=("addressable_fraction", "max"),
                                 gemm_attention_min=("gemm_attention_share", "min"),
                                 gemm_attention_max=("gemm_attention_share", "max"))
    g.loc["all (ours)"] = [df["addressable_fraction"].min(), df["addressable_fraction"].max(),
                           df["gemm_attention_share"].min(), df["gemm_attention_share"].max()]
    g.loc["paper"] = [PAPER["addressable_min"], PAPER["addressable_max"], PAPER["transformer_gemm_attention_min"],
                      PAPER["transformer_gemm_attention_max"]]
    return g


__all__ = ["ADDRESSABLE_RULES", "DEFAULT_RULE", "PAPER", "PAPER_CITATION", "rule_categories", "amdahl_bound",
           "projected_speedup", "category_shares", "addressable_fraction", "summarize", "paper_comparison"]
