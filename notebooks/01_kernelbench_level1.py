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
# This notebook reads **evaluation records** (one `kbstudy.records.schema.EvaluationRecord` per candidate kernel and
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
#   p >= 1 only *verified* speedups count, whose 95% bootstrap interval excludes 1 and clears the harness's
#   noise margin, the spread of the reference timed against itself (`null:reference`) on the same hardware
#   (`kbstudy.analysis.scoring`);
# * the **median** and **geometric-mean speedup** over correct kernels, against eager and against
#   `torch.compile` (Inductor, default mode).
#
# Every number comes from `kbstudy.analysis.scoring`, where the definitions are written out with their sources; this
# notebook only filters, tabulates and plots. Re-render it with `make render`; CI re-runs the committed rendering
# under nbval and fails if a number changes.
#
# The second half puts the leaderboard's kernels beside what was published (issue #4; definitions in
# `kbstudy.analysis.headline` and `kbstudy.analysis.published`): the paper's headline table for the five largest model configurations,
# bf16 and the kernels hard-coded to float32, our speedups against the leaderboard's published ones, our PyTorch
# baseline times against KernelBench's published H100 timings, the same kernel on the v0 and the current problem,
# and the evaluation throughput. A section whose records are not there yet says what is missing.

# %% tags=["parameters"]
# Paths are relative to the repository root (resolved by kbstudy.pipeline.paths.project_path), so the rendered notebook
# re-runs unchanged from outputs/reports/<name>/ under nbval.
records_dirs = ["outputs/records/kernelbench/cpu/study"]  # run folders holding evaluations.jsonl
structural_dirs = []  # record folders of structural-variant runs (e.g. --correctness-only); empty: records_dirs
output_dir = "outputs/reports/cpu-default/01_kernelbench_level1"  # tables/ and figures/ go here
precision = "fp32"  # keep records at this precision
hardware_label = "CPU, sizes scaled by 1/16"  # how the hardware is named in titles
correctness = "kbstudy"  # verdict behind fast_p and the speedups: "kbstudy" or "kernelbench"
level = 1  # KernelBench level
problem_version = "current"  # problem set of the sections up to pass@k: "current" or "v0"
kernelbench_dir = None  # KernelBench data: leaderboard, v0 problems, baseline timings (None: as `kbstudy data where`)
baseline_set = "H100_Modal"  # KernelBench's published baseline timings to compare ours with
headline_configs = None  # model configurations of the headline table (None: the leaderboard's five largest)

# %%
import functools
import warnings

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from kbstudy.analysis import figures as plots

from kbstudy.analysis import published

from kbstudy.analysis import scoring
from kbstudy.analysis.tables import csv_link, show_table
from kbstudy.analysis import headline as paper  # the paper's table; `headline` below is this notebook's summary
from kbstudy.harness.problems import operator_category
from kbstudy.pipeline.data import resolve_kernelbench_dir
from kbstudy.pipeline.paths import project_path
from kbstudy.records.frames import load_frames

plots.set_theme()
# a hardware without null:reference records is scored with m = 0; the headline cell prints that instead of warning
warnings.filterwarnings("ignore", category=scoring.NoNoiseMarginWarning)
tables_dir, figures_dir = plots.report_dirs(project_path(output_dir))
show = functools.partial(show_table, precision=3)  # HTML tables, rounded (every number at full precision in tables/)
percent = dict.fromkeys(["compiled_pct", "kernelbench_correct_pct", "kbstudy_correct_pct", "correct_pct"], 1)
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
records, references, repeated = load_frames([project_path(d) for d in records_dirs], label="name",
                                             first_attempts=True)
if records.empty:
    raise FileNotFoundError(f"no evaluation records under {records_dirs}: run `kbstudy study` first")
present = [d for d in records_dirs if (project_path(d) / "evaluations.jsonl").exists()]
print(f"record folders read: {[project_path(d).name for d in present]}; not there yet: "
      f"{[project_path(d).name for d in records_dirs if d not in present] or 'none'}")
if len(repeated):
    print(f"{len(repeated)} records repeat an attempt of an earlier folder and are left out:")
    show(repeated.groupby(["records_folder", "kept_from"]).size().rename("records").reset_index())
all_levels = records
records = records[records["level"] == level].copy()
frame = records[(records["precision"] == precision) & (records["problem_version"] == problem_version)].copy()
frame["category"] = frame["category"].fillna(frame["problem_name"].map(operator_category))
print(f"problem version {problem_version}, precision {precision}: "
      f"{len(frame)} records, {frame['problem_id'].nunique()} problems, "
      f"{frame['model_config'].nunique()} model configurations, "
      f"size scale(s) {sorted(float(s) for s in frame['size_scale'].unique())}")
outcomes = scoring.outcome_table(frame)
outcomes.to_csv(tables_dir / "outcomes.csv", index=False)
show(outcomes, caption="Outcomes per model configuration")

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
show(headline, caption="Headline metrics (percentages 0-100, fast_p a fraction 0-1)", decimals=percent)
margins = scoring.noise_margins(frame)
print("noise margin per hardware (from null:reference; a verified speedup's interval must clear 1 + m): "
      + ", ".join(f"{hw}: m = {margins[hw]:.1%}" if hw in margins else f"{hw}: m = 0 (no null:reference records)"
                  for hw in sorted(frame["hardware"].dropna().astype(str).unique())))

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
plots.legend_outside(ax, title="")
save(fig, "correctness_rates", alt="Horizontal bars: compiled, KernelBench-correct and kbstudy-correct percentages per "
     "model configuration.")
show(rates.pivot(index="model_config", columns="metric", values="percent")
     [["compiled", "KernelBench-correct", "kbstudy-correct"]].reset_index().rename_axis(columns=None),
     precision=1, caption="Figure 1's data (% of attempted problems)")

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
plots.legend_outside(ax, title="")
save(fig, "fast_p_curve", alt="Step curves: fast_p per model configuration as the speedup threshold p rises.")
show(curve[curve["p"].isin(list(scoring.FAST_P_THRESHOLDS))].pivot(index="model_config", columns="p", values="fast_p")
     .reset_index().rename_axis(columns=None), caption="Figure 2's data: fast_p at the thresholds p")

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
    plots.legend_outside(ax, title="category", fontsize="x-small")
    save(fig, "correct_speedups", alt="Strip plot: speedup over PyTorch eager of each correct kernel, per model "
         "configuration, coloured by operator category.")
    show(speedups.groupby("model_config")["speedup"].describe()[["count", "min", "50%", "max"]].reset_index(),
         caption="Figure 3's data: speedups of the correct kernels")

# %% [markdown]
# ## By operator category
#
# The categories come from the problem names (`kbstudy.harness.problems.operator_category`). A configuration's overall
# rate can hide that it only succeeds on elementwise activations.

# %%
by_category = scoring.summarize(frame, by=["model_config", "category"], correctness=correctness, baseline="eager")
by_category.to_csv(tables_dir / "summary_by_category.csv", index=False)
show(by_category[["model_config", "category", "n", "correct_pct", "fast_1", "speedup_geomean"]],
     caption="Per model configuration and operator category", decimals=percent)

# %% [markdown]
# ## pass@k, where there are several samples per problem
#
# pass@k is the probability that at least one of k samples is correct (Chen et al. 2021's unbiased estimator,
# averaged over problems). With one sample per problem only pass@1 is defined, and it equals the correct fraction.

# %%
pass_k = scoring.pass_at_k_table(frame, ks=(1, 5, 10), correctness=correctness)
pass_k.to_csv(tables_dir / "pass_at_k.csv", index=False)
show(pass_k, caption="pass@k per model configuration")

# %% [markdown]
# ## The leaderboard's kernels: the headline table
#
# The paper's table (`kbstudy.analysis.headline.headline_table`, imported here as `paper`) for the five largest model
# configurations of the leaderboard at this level, per problem version and precision: correct % under the chosen
# verdict, the *verified speedups* (kernels both correct and faster than PyTorch eager: their count and median
# speedup), and the convolutions solved (correct) and sped up. The denominator n is the configuration's attempts, as
# above. `n_float32_only` counts the bf16 attempts of kernels hard-coded to float32 (next section), and
# `correct_pct_dtype_ok` is the correct rate without them.
#
# The GPU run is made phase by phase, so until it ends the table holds only the problems measured so far. The
# coverage table first says, per configuration, problem version and precision, how many of its published kernels have
# a record and on which problems (`kbstudy.analysis.published.coverage`).

# %%
kb_dir = project_path(kernelbench_dir) if kernelbench_dir else resolve_kernelbench_dir(required=False)
try:
    leaderboard = published.load_published(kb_dir, levels=[level])
    changes = published.load_version_changes(kb_dir, levels=[level])  # v0 -> current, per problem
except FileNotFoundError as exc:
    leaderboard = changes = None
    print(f"published numbers unavailable ({exc}); the comparisons below are left out")
configs = list(headline_configs) if headline_configs else (
    published.largest_configurations(leaderboard, 5, level=level) if leaderboard is not None else [])
table = paper.headline_table(records, configs) if configs else None
if table is not None and (table["n"] == 0).any():
    # every record skipped: kernels hard-coded to float32 at bf16 (counted in the bf16 section), or CUDA on a CPU
    skipped = table[table["n"] == 0]
    print("not attempted here (every record skipped): " + "; ".join(
        f"{r.model_config} {r.problem_version} {r.precision}"
        + (f" ({int(r.n_float32_only)} float32-only kernels)" if r.n_float32_only else "")
        for r in skipped.itertuples()))
    table = table[table["n"] > 0]
if not configs or table is None or table.empty:
    print(f"no attempts of {configs or 'the largest configurations'} at level {level} yet: "
          "scripts/h200_leaderboard.sh makes them on the H200")
else:
    table.to_csv(tables_dir / "headline_leaderboard.csv", index=False)
    print(f"configurations: {configs} (kernels published per configuration: "
          f"{leaderboard[leaderboard['model_config'].isin(configs)]['model_config'].value_counts().to_dict()})")
    measured = published.coverage(records, leaderboard, configs)
    measured.to_csv(tables_dir / "leaderboard_coverage.csv", index=False)
    if measured["missing"].any():
        print(f"PARTIAL: {measured['with_record'].sum()} of {measured['published'].sum()} (kernel, version, "
              "precision) evaluations have a record; the tables below are of the problems measured so far")
    show(measured, caption="Coverage: published kernels with a record")
    show(table, caption="The headline table of the leaderboard's largest configurations",
         decimals=dict.fromkeys([c for c in table.columns if "pct" in c], 1))
    categories = paper.category_table(records, configs)
    categories.to_csv(tables_dir / "headline_by_category.csv", index=False)
    for (version, prec), part in categories.groupby(["problem_version", "precision"], sort=True):
        show(paper.category_pivot(part),
             caption=f"Correct / attempted per operator category: problem version {version}, {prec}")

# %% [markdown]
# ## bf16, and the kernels hard-coded to float32
#
# The leaderboard's kernels were written for fp32. `kbstudy.harness.candidates.scan_dtype_support` reads each CUDA source
# for float32-only code (`data_ptr<float>()`, `float*` casts, `AT_DISPATCH_FLOATING_TYPES`, which is float and
# double only, float32 dtype checks, or a `ModelNew` that calls the kernel for float32 inputs alone) and finds no
# bf16 path (a dispatch over `BFloat16`, `__nv_bfloat16`). Such a kernel given bf16 tensors raises `expected scalar
# type Float but found BFloat16` or `not implemented for 'BFloat16'`, or reads the wrong bytes. In the records it is
# `float32_only` (`kbstudy.analysis.headline.dtype_status`): not a wrong bf16 kernel, but no bf16 kernel.

# %%
if leaderboard is not None:
    scan = (leaderboard.assign(float32_only=leaderboard["float32_only"].astype(bool))
            .groupby("model_config")["float32_only"].agg(kernels="size", float32_only="sum").reset_index())
    show(scan, caption="Static scan of the published kernels")
bf16 = records[records["precision"] != "fp32"]
if bf16.empty:
    print("no bf16 (or fp16) records yet")
else:
    status = bf16.assign(dtype_status=paper.dtype_status(bf16))
    status_table = (status.groupby(["model_config", "problem_version", "precision", "dtype_status"]).size()
                    .unstack("dtype_status", fill_value=0).reset_index().rename_axis(columns=None))
    status_table.to_csv(tables_dir / "dtype_status.csv", index=False)
    show(status_table, caption="bf16 records by dtype status")

# %% [markdown]
# ## Our speedups against the leaderboard's published ones
#
# Per kernel, our speedup over PyTorch eager against the published `torch_speedup` (measured on the leaderboard's
# GPU, at the v0 sizes). On the **v0** problems this is like for like; on the **current** problems the sizes (and for
# a few problems the reference) changed since. A kernel *changed materially* when its verdict flipped (published
# correct, ours not) or its speedup ratio ours/published left [0.5, 2] or crossed 1; the reason comes from its record
# (`kbstudy.analysis.published.material_changes`). Spearman's rho ranks our speedups against the published ones.

# %%
compared = {}
if leaderboard is not None:
    for version in ("v0", "current"):
        joined = published.join_published(records, leaderboard, problem_version=version, precision="fp32")
        if not joined["has_record"].any():
            print(f"{version}: no fp32 full-size records of leaderboard kernels yet")
            continue
        marked = published.material_changes(joined[joined["has_record"]], correctness=correctness, changes=changes)
        marked.to_csv(tables_dir / f"published_vs_ours_{version}.csv", index=False)
        compared[version] = marked
        show(published.published_agreement(marked),
             caption=f"{version} problems: agreement with the published speedups")
        flagged = marked[marked["changed"]]
        print(f"{len(flagged)} of {len(marked)} kernels changed materially:")
        if len(flagged):
            show(flagged[["model_config", "problem_id", "published_speedup", "speedup", "reason"]]
                 .sort_values(["model_config", "problem_id"]),
                 caption=f"{version} problems: kernels that changed materially", max_rows=25,
                 csv=csv_link(output_dir, f"published_vs_ours_{version}"))
if compared:
    fig, axes = plt.subplots(1, len(compared), figsize=(5.5 * len(compared), 4.6), squeeze=False)
    colours = plots.fixed_palette(pd.concat(list(compared.values()))["model_config"])  # same colours in both panels
    for ax, (version, marked) in zip(axes[0], compared.items()):
        pairs = marked.dropna(subset=["speedup", "published_speedup"])
        sns.scatterplot(data=pairs, x="published_speedup", y="speedup", hue="model_config", style="changed", ax=ax,
                        palette=colours, hue_order=[c for c in colours if c in set(pairs["model_config"])],
                        style_order=[False, True])
        lo = min(pairs[["speedup", "published_speedup"]].min().min(), 0.5) / 1.5
        hi = max(pairs[["speedup", "published_speedup"]].max().max(), 2.0) * 1.5
        ax.plot([lo, hi], [lo, hi], color="0.3", linewidth=1)
        for f in (0.5, 2.0):
            ax.plot([lo, hi], [lo * f, hi * f], color="0.6", linewidth=0.8, linestyle=":")
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="published torch_speedup",
               ylabel=f"our speedup vs eager ({version} problems)", title=f"{version} problems: {hardware_label}")
        plots.legend_outside(ax, below=True, fontsize="x-small")
    save(fig, "published_vs_ours", alt="Scatter, one panel per problem version: our speedup over eager against the "
         "published torch_speedup per kernel, log-log, with the diagonal and the 0.5x and 2x lines.")

# %% [markdown]
# ## Our PyTorch baseline times against KernelBench's published H100 timings
#
# Our eager and `torch.compile` reference times (median over timed calls, fp32, full size) of the current problems,
# against KernelBench's published `baseline_timing` (mean, on an H100). A published entry is compared with the
# problem of the same file name **and the same source SHA-256** as the current problem; entries whose reference
# changed after they were measured are excluded with their reason (`kbstudy.analysis.published.compare_baselines`). The GPUs
# differ, so read the ratios and the rank correlation, not the absolute times: memory-bound problems should sit near
# the bandwidth ratio H100/H200 (3.35/4.8 = 0.70) and compute-bound GEMMs near 1.

# %%
try:
    baselines = published.load_baseline_timings(kb_dir, baseline_set)
except FileNotFoundError as exc:
    baselines = None
    print(f"published baseline timings unavailable: {exc}")
if baselines is not None and changes is not None:
    versus = published.compare_baselines(references[references["level"] == level],
                                         baselines[baselines["level"] == level], changes)
    versus.to_csv(tables_dir / f"baselines_vs_{baseline_set}.csv", index=False)
    included = versus[versus["included"]]
    print(f"{baseline_set}: {len(versus)} published entries at level {level}; compared: {len(included)}; excluded: "
          f"{versus[~versus['included']]['excluded_reason'].value_counts().to_dict()}")
    if included.empty:
        print("no fp32 full-size reference timings of current problems yet")
    else:
        show(published.baseline_summary(versus), caption=f"Our baseline times over {baseline_set}'s")
        show(published.baseline_summary(versus, by="category"), caption="The same, per operator category")
        shown = versus[versus["ours_eager_ms"].notna()]
        show(shown[["problem_name", "category", "published_eager_ms", "ours_eager_ms", "eager_ratio",
                    "published_compile_ms", "ours_compile_ms", "compile_ratio", "excluded_reason"]],
             caption=f"Baseline times per problem: ours against {baseline_set}", max_rows=25,
             csv=csv_link(output_dir, f"baselines_vs_{baseline_set}"))
        fig, ax = plt.subplots(figsize=(6, 5))
        sns.scatterplot(data=shown, x="published_eager_ms", y="ours_eager_ms", hue="category", style="included",
                        style_order=[True, False], ax=ax)
        lo = shown[["published_eager_ms", "ours_eager_ms"]].min().min() / 1.5
        hi = shown[["published_eager_ms", "ours_eager_ms"]].max().max() * 1.5
        ax.plot([lo, hi], [lo, hi], color="0.3", linewidth=1)
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi),
               xlabel=f"published eager time, {baseline_set} (ms)", ylabel=f"our eager time (ms): {hardware_label}",
               title="PyTorch eager baseline, current problems")
        plots.legend_outside(ax, fontsize="x-small")
        save(fig, "baselines_vs_published", alt="Scatter, log-log: our PyTorch eager time against KernelBench's "
             "published one per problem, coloured by operator category, with the diagonal.")

# %% [markdown]
# ## The same kernel on the v0 and on the current problem
#
# KernelBench v0.1 enlarged the problems and changed a few references; two level-1 problems (50, 97) are other
# problems now (`kbstudy.harness.problems.version_changes`). A kernel correct on the problem it was written for (v0) may fail
# on the current one; `flip` marks it.

# %%
both = paper.version_comparison(records, changes, correctness=correctness)
if both.empty:
    print("no kernel has fp32 records on both problem versions yet")
else:
    both.to_csv(tables_dir / "v0_vs_current.csv", index=False)
    show(pd.crosstab([both["model_config"]], [both["change"], both["flip"]]).reset_index(),
         caption="Kernels on both versions, by change to the problem / flip")
    show(both[both["flip"]][["model_config", "problem_id", "change", "v0_outcome", "current_outcome", "v0_correct",
                             "current_correct"]], caption="The kernels whose verdict flipped")

# %% [markdown]
# ## Throughput
#
# Kernels evaluated per GPU-minute (`kbstudy.analysis.headline.throughput`; `python -m kbstudy throughput --per-call
# DIR...`), one row per run and device call (the records' `git_commit`), in order: a call's records are grouped into
# bursts (consecutive records less than 5 minutes apart), and a burst's length runs from its first worker's start
# to its last record. CUDA builds before a burst and machine start-up are not in it. Runs of one call on two GPUs
# are two rows, each its own GPU's minutes. On a CPU run the "GPU-minutes" are CPU minutes.

# %%
rate = paper.throughput(all_levels, by=["run", "hardware", "git_commit"]).sort_values("start_utc", kind="stable")
rate.to_csv(tables_dir / "throughput.csv", index=False)
show(rate.assign(git_commit=rate["git_commit"].astype(str).str[:7])[
    ["run", "hardware", "git_commit", "records", "bursts", "gpu_minutes", "kernels_per_gpu_minute", "worker_minutes",
     "median_s_per_kernel"]], caption="Throughput per run and device call")

# %% [markdown]
# ## Correct for the operator, or for one shape, layout and set of parameters?
#
# kbstudy's structural variants (`kbstudy.verdict.trials.STRUCTURAL_VARIANTS`, `docs/reference/verifier.md`) run
# each kernel again at other sizes of the problem (smaller primes, batch 1, larger primes where the problem is
# small), on other strides (transposed, stepped slice with an offset, channels-last) and with its module's
# parameters replaced by random values of their scale. Of the kernels that pass KernelBench's check, how many are
# correct only at the benchmark's shape, only for contiguous inputs, or only for the initial parameter values
# (`kbstudy.analysis.variants`; a kernel may be in several columns), with examples.

# %%
from kbstudy.analysis import variants as structural

variant_records = load_frames([project_path(d) for d in structural_dirs], label="name",
                              first_attempts=True).evaluations if structural_dirs else records
if structural.has_variant_records(variant_records):
    found = structural.variant_summary(variant_records)
    found.to_csv(tables_dir / "structural_variants.csv", index=False)
    print(f"structural variants: {', '.join(structural_dirs) or 'records_dirs'}")
    show(found, caption="KernelBench-correct kernels correct only at the benchmark's shape, layout or parameters")
    show(structural.variant_examples(variant_records), caption="Examples")
else:
    print("no variant records: these records were made before the structural variants (or with them off)")

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
