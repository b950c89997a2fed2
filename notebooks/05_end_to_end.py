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
# # 5. End to end: how much of a real workload LLM-written kernels reach, projected and measured
#
# The paper's question, with our records. Its projection of the end-to-end saving is f x p_win x (1 - 1/s): the
# addressable fraction f of a workload (notebook 3), the share p_win of generated kernels that beat the baseline and
# their median speedup s; 58.2% x 41.7% x (1 - 1/1.552) = 8.63% on its recommender, about 1% on transformers.
# Here p_win and s come from the leaderboard's level-1 kernels (notebook 1: verified wins, the speedup's interval
# clearing the hardware's noise margin), f from the workload profiles, and the projection is made twice: pooled (the
# paper's form) and per kernel category (each category's share of kernel time times the win rate and median of the
# problem categories it maps to, `kbstudy.analysis.projection.KERNEL_TO_PROBLEM`). The same for DLRM-DCNv2 with our
# DLRM-Bench kernels (notebook 4), which are **expert-written, not LLM-written**. Then the workloads as users run them
# (`torch.compile`; the baseline a kernel must beat becomes Inductor's), and the measured end-to-end saving of
# substituting the kernels into the workloads (`kbstudy substitute`) beside the projection.

# %% tags=["parameters"]
# Paths are relative to the repository root (resolved by kbstudy.pipeline.paths.project_path), so the rendered notebook
# re-runs unchanged from outputs/reports/<name>/ under nbval.
leaderboard_dir = "outputs/records/kernelbench/cpu/study"  # evaluation records of LLM-written level-1 kernels
model_configs = []  # the LLM configurations counted; [] for every one but the null:* candidates
dlrm_dir = "outputs/records/dlrm_bench/cpu/study"  # DLRM-Bench evaluation records (our kernels: expert-written)
eager_records_dir = "outputs/records/profiles/cpu/study"  # profile_run output, eager setup (the baseline)
eager_supplementary_dirs = []  # kernel tables filling runs eager_records_dir lacks (notebook 3's supplementary_dirs)
production_records_dir = ""  # profile_run --config production output; "" while not yet measured
substitution_dirs = []  # folders of kbstudy substitute records (JSONL); [] or absent folders: nothing measured
output_dir = "outputs/reports/cpu-default/05_end_to_end"  # tables/ and figures/ go here
hardware_label = "CPU (tiny configurations, ATen operators)"  # how the hardware is named in titles and the answer
rule = "non_vendor"  # addressable rule: a name in kbstudy.profiling.addressable.ADDRESSABLE_RULES

# %%
import functools

import pandas as pd

from kbstudy.analysis import end_to_end as e2e
from kbstudy.analysis import figures as plots
from kbstudy.analysis import profiles
from kbstudy.analysis import projection as proj
from kbstudy.analysis.tables import show_table
from kbstudy.pipeline.paths import project_path
from kbstudy.records.frames import load_frames

plots.set_theme()
tables_dir, figures_dir = plots.report_dirs(project_path(output_dir))
show = functools.partial(show_table, precision=3, index=False)  # HTML tables, rounded (full precision in tables/)
save = functools.partial(plots.show_figure, figures_dir)  # deterministic PNG + SVG, displayed

evaluations = load_frames([project_path(leaderboard_dir)], first_attempts=True).evaluations
if model_configs:
    evaluations = evaluations[evaluations["model_config"].isin(model_configs)
                              | evaluations["model_config"].str.startswith("null:")]
kernels, workloads = profiles.load_profile_records(project_path(eager_records_dir),
                                                   supplementary=[project_path(d) for d in eager_supplementary_dirs],
                                                   root=project_path("."))
seven = [k for k in workloads.loc[(workloads["status"] == "ok") & (workloads["role"] == "seven"), "workload_key"]]
print(f"leaderboard: {leaderboard_dir} | DLRM-Bench: {dlrm_dir} | profiles: {eager_records_dir} | {hardware_label}")
print(f"{len(seven)} workloads profiled (eager): {', '.join(seven)}")

# %% [markdown]
# ## Win rates of the LLM-written kernels, per problem category
# Level 1, current problems, fp32; a win is a correct kernel whose speedup over the baseline is verified
# (`kbstudy.analysis.scoring.verified_faster`). Against eager PyTorch and against `torch.compile` (Inductor's default
# mode), the baseline of the production setup.

# %%
att_eager, att_compile = proj.llm_attempts(evaluations), proj.llm_attempts(evaluations, baseline="compile")
problem_rates = proj.problem_category_rates(att_eager).merge(
    proj.problem_category_rates(att_compile), on=["problem_category", "n"], how="outer", suffixes=("", "_vs_compile"))
problem_rates.to_csv(tables_dir / "problem_category_rates.csv", index=False)
show(problem_rates, caption="Wins per problem category (eager, and against torch.compile)")

# %% [markdown]
# ## The rule: kernel category -> problem categories
# A profiled kernel's category (`kbstudy.harness.kernel_classes`) takes the win rate and the median winning speedup
# of the level-1 problems of the problem categories it maps to (`KERNEL_TO_PROBLEM`, tested in
# `tests/unit/test_projection.py`). KernelBench files softmax under `activation`; its activations are the level-1
# elementwise problems; the reduction kernel class holds reductions, pooling and loss reductions. Embedding has no
# level-1 problem, so it contributes nothing; Inductor's Triton kernels count by what they compute
# (`inductor_category`: pointwise -> elementwise, reductions -> reduction, normalization or softmax).

# %%
rates = proj.kernel_category_rates(att_eager)
rates_compile = proj.kernel_category_rates(att_compile)
rates.to_csv(tables_dir / "kernel_category_rates.csv", index=False)
rates_compile.to_csv(tables_dir / "kernel_category_rates_vs_compile.csv", index=False)
show(rates.drop(columns="source"), caption="Per kernel category: the problems it maps to and their wins (eager)")

# %% [markdown]
# ## The projection per workload (eager profiles, LLM-written kernels)
# `saving_pooled` = f x p_win x (1 - 1/s) with the rate over all kernels (the paper's form); `saving_by_category` =
# the sum over the rule's categories of f_c x p_win,c x (1 - 1/s_c); both are shares of GPU kernel time, and the
# `_of_step` columns are the same savings as shares of the step time measured without the profiler (kernel time
# covers part of it). The paper's rows are its published values.

# %%
per_category = proj.category_projection(kernels, workloads, rates, rule=rule, keys=seven)
llm = proj.workload_projection(per_category, rates, workloads)
llm.to_csv(tables_dir / "projection.csv")
cols = ["domain", "f", "amdahl_bound", "win_rate", "median_speedup", "saving_pooled", "saving_by_category",
        "speedup_by_category", "f_of_step", "saving_by_category_of_step"]
beside_paper = pd.concat([llm[cols], proj.paper_rows().reindex(columns=cols)])
show(beside_paper, index=True, caption="Projected saving per workload beside the paper's")
per_category.to_csv(tables_dir / "projection_by_category.csv", index=False)
show(per_category[per_category["addressable"] & (per_category["f_c"] > 0)].drop(columns="addressable"),
     caption="Per workload and addressable kernel category")
print("\n".join(proj.projection_notes(llm, rates, "eager", f"LLM-written kernels, {hardware_label}")))

# %% [markdown]
# ## The expert case: our DLRM-Bench kernels in DLRM-DCNv2
# Each DLRM-Bench problem is counted in the kernel category of the eager kernels its reference runs
# (`DLRM_PROBLEM_TO_KERNEL`: the six EmbeddingBag problems -> embedding, the GEMM-shaped ones -> gemm, ...). These
# kernels were written by hand for this study: **expert-written, not LLM-written**. A win is a verified speedup
# whose interval excludes 1 (DLRM-Bench's criterion; the folder has no null:reference records for a noise margin).

# %%
dlrm_evals = load_frames([project_path(dlrm_dir)]).evaluations
expert_rates = proj.dlrm_expert_rates(dlrm_evals)
expert_rates.to_csv(tables_dir / "expert_rates.csv", index=False)
show(expert_rates[expert_rates["n"] > 0].drop(columns="source"), caption="DLRM-Bench per kernel category (expert)")
dlrm_keys = [k for k in seven if e2e.workload_name(k).startswith("dlrm")]
expert = proj.workload_projection(proj.category_projection(kernels, workloads, expert_rates, rule=rule, keys=dlrm_keys),
                                  expert_rates, workloads)
expert.to_csv(tables_dir / "projection_expert.csv")
show(expert[cols + ["kernel_source"]], index=True, caption="Projected saving with expert-written kernels")

# %% [markdown]
# ## Eager against production: the workloads as users run them
# The production setup compiles each model with `torch.compile` (default mode; DLRM's dense part), keeping SDPA
# attention, bf16 and the fused optimizers (`kbstudy.profiling.production`). The eager profiles are the baseline.
# Under `torch.compile` a generated kernel must beat Inductor's fused Triton kernels, so the production projection
# uses the win rates against `torch.compile`.

# %%
setups = {"eager": (kernels, workloads)}
if production_records_dir and project_path(production_records_dir).is_dir():
    setups["production"] = profiles.load_profile_records(project_path(production_records_dir), root=project_path("."))
comparison_setups = e2e.setup_comparison(setups, seven, rule=rule)
comparison_setups.to_csv(tables_dir / "setup_comparison.csv", index=False)
show(comparison_setups, caption=f"Addressable fraction by setup (baseline: eager, {eager_records_dir})")
transformers = list(workloads.loc[workloads["domain"] == "transformer", "workload_key"].unique())
print(e2e.closest_setup(comparison_setups, transformers))
projections = {("eager", "llm"): llm}
if "production" in setups:
    p_kernels, p_workloads = setups["production"]
    p_keys = [k for k in seven if k in set(p_workloads.loc[p_workloads["status"] == "ok", "workload_key"])]
    projections[("production", "llm")] = proj.workload_projection(
        proj.category_projection(p_kernels, p_workloads, rates_compile, rule=rule, keys=p_keys), rates_compile,
        p_workloads)
    show(projections[("production", "llm")][cols], index=True, caption="Projection, production setup (vs compile)")
else:
    print("production setup: not yet measured (no production_records_dir)")
if len(expert):
    projections[("eager", "expert")] = expert

# %% [markdown]
# ## Measured: the workloads with the kernels substituted
# Step time of each workload with and without substitution (`kbstudy substitute`: separate processes, interleaved
# repetitions, medians with 95% intervals), the places a kernel replaced and those it could not (`not_applicable`,
# with the reason), and the relative L2 error of the substituted model's outputs against the original.

# %%
measured = e2e.load_substitution_records([project_path(d) for d in substitution_dirs])
measured.to_csv(tables_dir / "measured.csv", index=False)
if len(measured):
    show(measured, caption="Measured substitutions")
else:
    print("no measured records" + (f" under {', '.join(substitution_dirs)}" if substitution_dirs else ""))

# %% [markdown]
# ## Projected against measured
# Per workload, setup and kernel source: the projected saving (per category, as a share of the step time where a
# step time exists), the Amdahl bound 1/(1-f) and the measured saving; `difference_pp` is measured minus projected
# in percentage points. Launch overheads, fusion lost around a substituted kernel, layout or dtype conversions and
# places where a kernel does not apply all make the measured saving smaller than the projection.

# %%
comparison = e2e.projected_vs_measured(projections, measured)
comparison.to_csv(tables_dir / "projected_vs_measured.csv", index=False)
show(comparison, caption="Projected and measured savings")
save(e2e.plot_projected_vs_measured(comparison, f"Projected and measured savings - {hardware_label}"),
     "projected_vs_measured", alt="Horizontal bars per workload, setup and kernel source: the projected saving "
     "as a share of step time and, where measured, the measured saving.")

# %% [markdown]
# ## The answer
# Computed from the tables above (`kbstudy.analysis.end_to_end.answer`).

# %%
text = e2e.answer(llm, rates, rates_compile, expert, comparison, hardware_label)
(tables_dir / "answer.txt").write_text(text + "\n")
print(text)
