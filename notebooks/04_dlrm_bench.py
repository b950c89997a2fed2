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
# `python -m kbstudy.dlrm_bench.gpu_run`, which evaluates our kernels through the project's one evaluation path
# (`kbstudy.evaluate.evaluate_batch`: KernelBench's and kbstudy's verdicts over five trials, eager and compile timings)
# and writes the floors to `floors.jsonl` beside `machine.json`; this notebook only reads them. Each problem is
# evaluated at the precision it is written in: bf16 for 10 and 11, fp32 for the others.
#
# **Preliminary records.** A folder written by the benchmark's former runner (layout `preliminary`, e.g.
# `outputs/records/h200-dlrm-gpu-run`, kept for comparison; the H200 parameters read `h200-dlrm`) has no verdicts: its
# `correct` column is that runner's own self-check (relative L2 error against float64), the verdict columns are empty,
# and its problem 5 is the former in-place version. Its numbers are preliminary.

# %% tags=["parameters"]
# Paths are relative to the repository root (resolved by kbstudy.study.project_path), so the rendered notebook
# re-runs unchanged from outputs/reports/<name>/ under nbval.
records_dir = "outputs/records/cpu-dlrm"  # a kbstudy.dlrm_bench.gpu_run output folder (evaluations.jsonl, floors.jsonl)
output_dir = "outputs/reports/cpu-default/04_dlrm_bench"  # tables/ and figures/ go here
hardware_label = "CPU (Triton interpreter)"  # how the hardware is named in titles

# %%
import functools

import matplotlib.pyplot as plt
import seaborn as sns

from kbstudy import plots
from kbstudy.dlrm_bench.report import FLOOR_TARGET, launch_view, load_run, long_times, missing, run_layout, summary
from kbstudy.dlrm_bench.roofline import LAUNCH_BOUND_FACTOR, launch_latency_ms
from kbstudy.study import project_path

plots.set_theme()
tables_dir, figures_dir = plots.report_dirs(project_path(output_dir))
show = functools.partial(plots.print_table, digits=4)  # tables as rounded text: what nbval compares
save = functools.partial(plots.show_figure, figures_dir)  # deterministic PNG + SVG, displayed


table, machine = load_run(project_path(records_dir))
layout = run_layout(project_path(records_dir))
machine_name = machine.get("name", "unknown (no machine.json)")
print(f"records: {records_dir} | hardware: {hardware_label} | machine: {machine_name}")
if layout == "preliminary":
    print("layout: preliminary (the former runner: self-check only, no verdicts; problem 5 in place)")
else:
    print("layout: evaluate_batch (both verdicts, five trials; floors.jsonl)")
if machine:
    rates = ", ".join(f"{k} {v / 1e12:.2f} TFLOP/s" for k, v in machine["matmul_flops_per_s"].items())
    print(f"measured: {machine['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s copy bandwidth; {rates}")
launch_ms = launch_latency_ms(machine)
print("launch latency (empty Triton kernel, timed as candidates are): "
      + (f"{launch_ms * 1e3:.1f} us (median)" if launch_ms is not None else "not measured in this run"))

# %% [markdown]
# ## What the records lack
# Absent problems, kernels that are not correct and missing times are named here rather than silently dropped (a CPU
# run, for instance, has no `torch.compile` baseline).

# %%
gaps = missing(table, machine)
print("\n".join(f"- {g}" for g in gaps) if gaps else "nothing missing: 12 problems, every time and floor recorded")

# %% [markdown]
# ## Per-problem times (ms, medians) and ratios

# %%
shown = table[["problem_id", "problem", "precision", "bound", "eager_ms", "compile_ms", "ours_ms", "floor_ms",
               "speedup_vs_eager", "speedup_vs_compile", "ours_over_floor", "kernelbench_correct", "kbstudy_correct",
               "correct"]]
shown.to_csv(tables_dir / "dlrm_bench_table.csv", index=False)
show(shown)

# %% [markdown]
# ## Win rate and median speedup beside the paper
# *Correct*: both verdicts passed (only in a preliminary folder: that runner's self-check). A *win*: a correct kernel faster than eager.

# %%
summ = summary(table)
summ.to_csv(tables_dir / "dlrm_bench_summary.csv", index=False)
show(summ, digits=3)

# %% [markdown]
# ## Figure: eager, compile, ours and the floor per problem (log scale)

# %%
data = long_times(table)
data.to_csv(tables_dir / "dlrm_bench_times.csv", index=False)
variants = [v for v in ("eager", "torch.compile", "ours (Triton)", "floor") if v in set(data["variant"])]
fig, ax = plt.subplots(figsize=(11, 4.2))
sns.barplot(data=data, x="label", y="ms", hue="variant", ax=ax, hue_order=variants)
ax.set_yscale("log")
ax.set_xlabel("")
ax.set_ylabel("time per call (ms, median)")
ax.set_title(f"DLRM-Bench on {hardware_label}")
ax.tick_params(axis="x", rotation=60)
for lbl in ax.get_xticklabels():
    lbl.set_horizontalalignment("right")
fig.tight_layout()
save(fig, "dlrm_bench_times")
print("figure data (ms):")
show(data.pivot(index="label", columns="variant", values="ms").reindex(index=data["label"].unique(), columns=variants)
     .reset_index().rename_axis(columns=None))

# %% [markdown]
# Memory-bound problems: ours over the floor, against the target of ours within 1.25x of the floor.

# %%
mem = table[table["bound"] == "memory"][["problem_id", "problem", "ours_over_floor", "eager_over_floor"]]
mem = mem.assign(within_target=mem["ours_over_floor"] <= FLOOR_TARGET)
mem.to_csv(tables_dir / "memory_bound_vs_floor.csv", index=False)
show(mem, digits=3)

# %% [markdown]
# ## Launch-aware view
# Each timed call starts on an idle device (the timer synchronises, then records its start event), so it includes at
# least one launch: the host's work until the first kernel is enqueued. The machine measurement times an empty Triton
# kernel the same way. A problem whose floor is below a few (here 3) such launch latencies is *launch-bound*: the
# 1.25x target is out of reach of any kernel timed per call. This view is beside the floor, not a new floor:
# `ours_over_floor` above is unchanged, `ours_over_floor_plus_launch` divides by floor + one launch.

# %%
launch = launch_view(table)
launch.to_csv(tables_dir / "launch_aware.csv", index=False)
if launch_ms is None:
    print("launch latency not measured for this machine (machine.json predates it, or a CPU without Triton "
          "launches): launch-bound flags are empty")
else:
    flagged = launch[launch["launch_bound"] == True]  # noqa: E712
    print(f"launch-bound (floor < {LAUNCH_BOUND_FACTOR:g} x {launch_ms * 1e3:.1f} us): "
          + (", ".join(f"{r.problem_id} {r.problem}" for r in flagged.itertuples()) or "none"))
show(launch, digits=3)
