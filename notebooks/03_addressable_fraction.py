# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 3. Addressable fraction of seven real workloads
#
# How much of a real workload's GPU time could a KernelBench-style kernel replace? Seven workloads in three domains
# (transformers, CNNs, recommenders) were profiled with `torch.profiler` (`kbstudy.profiling.gpu_run`); every kernel
# name was sorted into a category by an ordered rule table (`kbstudy.profiling.classify`), and the **addressable
# fraction** f is the share of kernel time in the categories of the chosen rule (`kbstudy.profiling.addressable`).
# Amdahl's law bounds the end-to-end speedup by 1/(1-f); with addressable kernels s times faster it is
# 1/((1-f)+f/s). The paper reports f from 8.9% to 58.2%, and 80-86% of transformer runtime in cuBLAS GEMM plus
# FlashAttention. On CPU records the unit is ATen operator self time instead of kernel time.

# %% tags=["parameters"]
records_dir = "../outputs/records/cpu-profile"
output_dir = "../outputs/notebooks/03_addressable_fraction"
hardware_label = "CPU (tiny configurations, ATen operators)"
rule = "non_vendor"

# %%
from pathlib import Path

import pandas as pd

from kbstudy.plots import save_figure, set_theme
from kbstudy.profiling import report
from kbstudy.profiling.addressable import ADDRESSABLE_RULES, PAPER, paper_comparison

set_theme()
pd.set_option("display.width", 160)
pd.set_option("display.max_columns", 20)
out = Path(output_dir)
out.mkdir(parents=True, exist_ok=True)
kernels, workloads = report.load_profile_records(records_dir)
print(f"{hardware_label}: {len(workloads)} workload runs, {len(kernels)} (workload, name) rows")
print("addressable rule:", rule, "=", sorted(ADDRESSABLE_RULES[rule]))

# %% [markdown]
# ## Runs and their status
# Failed or skipped runs are listed, not hidden.

# %%
status = workloads[["workload_key", "role", "status", "error"]].copy()
status["error"] = status["error"].fillna("").str.slice(0, 60)
print(status.to_string(index=False))

# %% [markdown]
# ## Per-workload summary: addressable fraction, GEMM+attention share, Amdahl bound

# %%
table = report.workload_table(kernels, workloads, rule=rule)
cols = ["domain", "mode", "role", "step_ms_median", "addressable_fraction", "gemm_attention_share", "vendor_share",
        "other_share", "amdahl_bound", "speedup_at_2x", "speedup_at_10x"]
summary = table[[c for c in cols if c in table]]
summary.to_csv(out / "addressable_summary.csv")
print(summary.round(3).to_string())

# %% [markdown]
# ## Category breakdown per workload (stacked bars)

# %%
main_keys = [k for k in table.index if table.loc[k, "role"] in ("seven", "extra")]
breakdown = report.breakdown_table(kernels, main_keys)
breakdown.to_csv(out / "category_breakdown.csv")
print(breakdown.round(3).to_string())
fig = report.plot_breakdown(breakdown, f"Share of time by kernel category - {hardware_label}")
save_figure(fig, out / "category_breakdown")

# %% [markdown]
# ## Addressable fraction beside the paper's
# The shaded band is the paper's range over its seven workloads; the table puts our per-domain range beside the
# paper's numbers (the "paper" row; its GEMM+attention values are for transformers).

# %%
seven = table.loc[main_keys]
comparison = paper_comparison(seven, seven["domain"].to_dict())
comparison.to_csv(out / "paper_comparison.csv")
print(comparison.round(3).to_string())
fig = report.plot_addressable_vs_paper(seven, f"Addressable fraction ({rule}) - {hardware_label}")
save_figure(fig, out / "addressable_vs_paper")

# %% [markdown]
# ## Transformer size sweep
# How the addressable fraction and the GEMM+attention share move with model size.

# %%
sweep = report.sweep_table(table, workloads)
sweep.to_csv(out / "size_sweep.csv")
print(sweep.round(3).to_string())
if len(sweep):
    fig = report.plot_sweep(sweep, f"Transformer size sweep - {hardware_label}")
    save_figure(fig, out / "size_sweep")

# %% [markdown]
# ## Largest kernels per workload, and what is left in "other"
# The paper's recommender result sits in one embedding kernel; the top rows show which kernel carries each workload.
# Every name in "other" should be reviewed and given a rule.

# %%
for key in main_keys:
    print(f"--- {key}")
    print(report.top_kernels(kernels, key, n=5).round(3).to_string(index=False))

# %%
other = kernels[kernels["category"] == "other"]
print(f"{other['name'].nunique()} distinct names in 'other'; max share of a workload:",
      round(float(table["other_share"].max()), 4))
print(other[["workload_key", "name", "time_us_per_step"]].round(1).head(20).to_string(index=False))
