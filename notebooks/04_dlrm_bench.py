# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Notebook 4 — DLRM-Bench: twelve recommender kernel problems, our Triton kernels, and their roofline
#
# Per problem: eager PyTorch, `torch.compile` (Inductor), our Triton kernel (`kbstudy-triton`) and the physical
# floor `max(compulsory bytes / measured bandwidth, FLOPs / measured matrix rate)`; then our win rate over eager and
# median speedup beside the paper's LLM-written kernels (41.7 %, 1.552x). Records come from
# `python -m kbstudy.dlrm_bench.gpu_run`; this notebook only reads them.

# %% tags=["parameters"]
records_dir = "../outputs/records/cpu-dlrm"
output_dir = "../outputs/notebooks/04_dlrm_bench"
hardware_label = "CPU (Triton interpreter)"

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import seaborn as sns

from kbstudy.dlrm_bench.report import FLOOR_TARGET, load_run, long_times, summary
from kbstudy.plots import save_figure, set_theme

set_theme()
out = Path(output_dir)
out.mkdir(parents=True, exist_ok=True)
table, machine = load_run(records_dir)
print(f"records: {records_dir} | hardware: {hardware_label} | machine: {machine.get('name')}")
if machine:
    rates = ", ".join(f"{k} {v / 1e12:.2f} TFLOP/s" for k, v in machine["matmul_flops_per_s"].items())
    print(f"measured: {machine['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s copy bandwidth; {rates}")

# %% [markdown]
# ## Per-problem times (ms, medians) and ratios

# %%
shown = table[["problem_id", "problem", "bound", "eager_ms", "compile_ms", "ours_ms", "floor_ms", "speedup_vs_eager",
               "speedup_vs_compile", "ours_over_floor", "check_passed"]]
shown.to_csv(out / "dlrm_bench_table.csv", index=False)
print(shown.round(4).to_string(index=False))

# %% [markdown]
# ## Win rate and median speedup beside the paper

# %%
summ = summary(table)
summ.to_csv(out / "dlrm_bench_summary.csv", index=False)
print(summ.round(3).to_string(index=False))

# %% [markdown]
# ## Figure: eager, compile, ours and the floor per problem (log scale)

# %%
data = long_times(table)
fig, ax = plt.subplots(figsize=(11, 4.2))
sns.barplot(data=data, x="label", y="ms", hue="variant", ax=ax,
            hue_order=["eager", "torch.compile", "ours (Triton)", "floor"])
ax.set_yscale("log")
ax.set_xlabel("")
ax.set_ylabel("time per call (ms, median)")
ax.set_title(f"DLRM-Bench on {hardware_label}")
ax.tick_params(axis="x", rotation=60)
for lbl in ax.get_xticklabels():
    lbl.set_horizontalalignment("right")
fig.tight_layout()
save_figure(fig, out / "dlrm_bench_times")
plt.show()
print("figure data (ms):")
print(data.pivot(index="label", columns="variant", values="ms").reindex(data["label"].unique()).round(4).to_string())

# %% [markdown]
# Memory-bound problems: ours over the floor, against the target.

# %%
mem = table[table["bound"] == "memory"][["problem_id", "problem", "ours_over_floor", "eager_over_floor"]]
mem = mem.assign(within_target=mem["ours_over_floor"] <= FLOOR_TARGET)
print(mem.round(3).to_string(index=False))
