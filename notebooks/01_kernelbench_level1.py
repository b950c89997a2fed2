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
# # KernelBench level 1: how many generated kernels compile, are correct, and are fast?
#
# This notebook reads **evaluation records** (one `kbstudy.records.EvaluationRecord` per candidate kernel and
# problem, written by `kbstudy study` / `kbstudy eval`) and reports, per *model configuration* (a model with its
# prompt and sampling settings, or one of kbstudy's null candidates):
#
# * **compiled %**: the candidate built and `ModelNew` could be constructed;
# * **KernelBench-correct %**: KernelBench's verdict, `torch.allclose` at the precision's tolerance on 5
#   fixed-seed inputs;
# * **kbstudy-correct %**: kbstudy's scale-invariant verdict (relative L2 error against a float64 reference, plus
#   output coverage), which an all-zeros output cannot pass;
# * **fast_p** for p in {0, 1, 1.2, 1.5, 2}: the fraction of *all attempted problems* whose kernel is correct
#   **and** more than p times faster than the PyTorch eager reference (KernelBench's metric; strict `>`); for
#   p >= 1 only *verified* speedups count, whose 95% bootstrap interval excludes 1 (`kbstudy.scoring`);
# * the **median** and **geometric-mean speedup** over correct kernels, against eager and against
#   `torch.compile` (Inductor, default mode).
#
# Every number comes from `kbstudy.scoring`, where the definitions are written out with their sources; this
# notebook only filters, tabulates and plots. Re-render it with `make render`; CI re-runs the committed rendering
# under nbval and fails if a number changes.

# %% tags=["parameters"]
# Paths are relative to the repository root (resolved by kbstudy.study.project_path), so the rendered notebook
# re-runs unchanged from outputs/reports/<name>/ under nbval.
records_dirs = ["outputs/records/cpu-default"]  # run folders holding evaluations.jsonl
output_dir = "outputs/reports/cpu-default/01_kernelbench_level1"  # tables/ and figures/ go here
precision = "fp32"  # keep records at this precision
hardware_label = "CPU, sizes scaled by 1/16"  # how the hardware is named in titles
correctness = "kbstudy"  # verdict behind fast_p and the speedups: "kbstudy" or "kernelbench"
level = 1  # KernelBench level

# %%
import functools

import matplotlib.pyplot as plt
import seaborn as sns

from kbstudy import plots, scoring
from kbstudy.problems import operator_category
from kbstudy.records import load_evaluations
from kbstudy.study import project_path

plots.set_theme()
tables_dir, figures_dir = plots.report_dirs(project_path(output_dir))
show = functools.partial(plots.print_table, digits=3)  # tables as rounded text: what nbval compares
save = functools.partial(plots.show_figure, figures_dir)  # deterministic PNG + SVG, displayed


print(f"hardware: {hardware_label}; precision: {precision}; level: {level}; verdict: {correctness}")

# %% [markdown]
# ## The records
#
# One row per (model configuration, problem, sample). The *outcome* says how far a candidate got. `skipped` rows
# are candidates that could not be run here, such as CUDA kernels on a machine without a GPU. They stay in the
# records so that nothing is silently dropped, but they are **not attempts**: they count neither for nor against a
# configuration. Every other outcome (compile errors, crashes and timeouts included) is an attempt.

# %%
frame = load_evaluations([project_path(d) for d in records_dirs])
if frame.empty:
    raise FileNotFoundError(f"no evaluation records under {records_dirs}: run `kbstudy study` first")
frame = frame[(frame["precision"] == precision) & (frame["level"] == level)].copy()
frame["category"] = frame["category"].fillna(frame["problem_name"].map(operator_category))
print(f"{len(frame)} records, {frame['problem_id'].nunique()} problems, "
      f"{frame['model_config'].nunique()} model configurations, "
      f"size scale(s) {sorted(float(s) for s in frame['size_scale'].unique())}")
outcomes = scoring.outcome_table(frame)
outcomes.to_csv(tables_dir / "outcomes.csv", index=False)
show(outcomes)

# %% [markdown]
# ## Headline metrics
#
# The denominator of every rate is n, the number of problems the configuration attempted. A failure still counts
# in n, so a configuration cannot raise its fast_p by failing on the hard problems. The percentages are in 0-100;
# fast_p is a fraction in 0-1, as KernelBench reports it. The speedup statistics are taken over the correct kernels
# only, so they are NaN (`-`) for a configuration with none, e.g. the all-zeros null candidate under kbstudy's
# verdict.

# %%
summary_eager = scoring.summarize(frame, correctness=correctness, baseline="eager")
summary_compile = scoring.summarize(frame, correctness=correctness, baseline="compile")
summary_eager.to_csv(tables_dir / "summary_eager.csv", index=False)
summary_compile.to_csv(tables_dir / "summary_compile.csv", index=False)
fast_cols = [scoring.fast_p_column(p) for p in scoring.FAST_P_THRESHOLDS]
headline = summary_eager[["model_config", "n", "n_skipped", "compiled_pct", "kernelbench_correct_pct",
                          "kbstudy_correct_pct", *fast_cols, "speedup_median", "speedup_geomean"]].merge(
    summary_compile[["model_config", "speedup_median", "speedup_geomean"]].rename(
        columns={"speedup_median": "compile_speedup_median", "speedup_geomean": "compile_speedup_geomean"}),
    on="model_config")
headline.to_csv(tables_dir / "headline.csv", index=False)
show(headline)

# %% [markdown]
# ## Figure 1: compiled, KernelBench-correct and kbstudy-correct
#
# The gap between the two correctness bars is the set of kernels that pass `allclose` but not the
# scale-invariant check. The null candidates calibrate it: the reference must pass both, and all-zeros and
# mean-constant outputs should fail kbstudy's verdict, whatever `allclose` says at small output magnitudes.

# %%
rates = headline.melt(id_vars="model_config", value_vars=["compiled_pct", "kernelbench_correct_pct",
                                                          "kbstudy_correct_pct"],
                      var_name="metric", value_name="percent")
rates["metric"] = rates["metric"].map({"compiled_pct": "compiled", "kernelbench_correct_pct": "KernelBench-correct",
                                       "kbstudy_correct_pct": "kbstudy-correct"})
rates.to_csv(tables_dir / "correctness_rates.csv", index=False)
fig, ax = plt.subplots(figsize=(7, 0.5 + 0.45 * headline["model_config"].nunique()))
sns.barplot(data=rates, y="model_config", x="percent", hue="metric", ax=ax, orient="h")
ax.set(xlim=(0, 100), xlabel="% of attempted problems", ylabel="", title=f"Level {level}, {precision}: {hardware_label}")
ax.legend(title="", loc="lower right")
save(fig, "correctness_rates")
show(rates.pivot(index="model_config", columns="metric", values="percent")
     [["compiled", "KernelBench-correct", "kbstudy-correct"]].reset_index().rename_axis(columns=None))

# %% [markdown]
# ## Figure 2: fast_p as the speedup threshold p rises
#
# fast_0 is the fraction that is correct (and timed). Each curve then falls as p rises, and fast_1 is the fraction
# that beats PyTorch eager. Dotted lines mark the thresholds of the table above.

# %%
curve = scoring.fast_p_curve(frame, correctness=correctness, baseline="eager")
curve.to_csv(tables_dir / "fast_p_curve.csv", index=False)
fig, ax = plt.subplots(figsize=(7, 4))
sns.lineplot(data=curve.dropna(subset=["fast_p"]), x="p", y="fast_p", hue="model_config", drawstyle="steps-post", ax=ax)
for p in scoring.FAST_P_THRESHOLDS[1:]:
    ax.axvline(p, color="0.7", linestyle=":", linewidth=1)
ax.set(xlabel="speedup threshold p (vs eager)", ylabel="fast_p", ylim=(0, 1.02),
       title=f"fast_p, {correctness} verdict: {hardware_label}")
ax.legend(title="", fontsize="small")
save(fig, "fast_p_curve")
show(curve[curve["p"].isin(list(scoring.FAST_P_THRESHOLDS))].pivot(index="model_config", columns="p",
                                                                  values="fast_p").reset_index().rename_axis(columns=None))

# %% [markdown]
# ## Figure 3: speedups of the correct kernels
#
# One point per correct kernel, on a log scale. The line at 1 is parity with the reference. A null reference
# candidate should sit near 1, and its spread is the noise of the timing method on this machine.

# %%
speedups = scoring.correct_speedups(frame, correctness=correctness, baseline="eager")
speedups.to_csv(tables_dir / "correct_speedups.csv", index=False)
if speedups.empty:
    print("no correct, timed kernels: nothing to plot")
else:
    fig, ax = plt.subplots(figsize=(7, 0.6 + 0.45 * speedups["model_config"].nunique()))
    plots.seed_jitter()  # stripplot's jitter draws from numpy's global generator: fixed so the figure is reproducible
    sns.stripplot(data=speedups, y="model_config", x="speedup", hue="category", ax=ax, jitter=0.2, size=4,
                  orient="h")
    ax.set_xscale("log")
    ax.axvline(1.0, color="0.3", linewidth=1)
    ax.set(xlabel="speedup over PyTorch eager (log scale)", ylabel="", title=f"Correct kernels: {hardware_label}")
    ax.legend(title="category", fontsize="x-small", bbox_to_anchor=(1.01, 1), loc="upper left")
    save(fig, "correct_speedups")
    show(speedups.groupby("model_config")["speedup"].describe()[["count", "min", "50%", "max"]].reset_index())

# %% [markdown]
# ## By operator category
#
# The categories come from the problem names (`kbstudy.problems.operator_category`). A configuration's overall
# rate can hide that it only succeeds on elementwise activations.

# %%
by_category = scoring.summarize(frame, by=["model_config", "category"], correctness=correctness, baseline="eager")
by_category.to_csv(tables_dir / "summary_by_category.csv", index=False)
show(by_category[["model_config", "category", "n", "correct_pct", "fast_1", "speedup_geomean"]])

# %% [markdown]
# ## pass@k, where there are several samples per problem
#
# pass@k is the probability that at least one of k samples is correct (Chen et al. 2021's unbiased estimator,
# averaged over problems). With one sample per problem only pass@1 is defined, and it equals the correct fraction.

# %%
pass_k = scoring.pass_at_k_table(frame, ks=(1, 5, 10), correctness=correctness)
pass_k.to_csv(tables_dir / "pass_at_k.csv", index=False)
show(pass_k)

# %% [markdown]
# ## Reading these numbers
#
# * On a CPU run (`cpu-default`) the sizes are scaled down, Triton kernels run under Triton's *interpreter*, and
#   CUDA candidates are skipped. Its speedups test the pipeline, not the kernels: only the GPU study's numbers are
#   results.
# * fast_p depends on the baseline. Against `torch.compile` (columns `compile_speedup_*`) fewer kernels win than
#   against eager.
# * The CSV files in `tables/` hold every number shown here at full precision. The figures in `figures/` are
#   byte-stable for the same records.
