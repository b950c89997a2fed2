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
# # Correctness audit: what does each check accept?
#
# KernelBench judges a kernel with `torch.allclose(out, ref, atol=tol, rtol=tol)` (tol 1e-4 at fp32, 1e-2 at
# fp16/bf16). An absolute tolerance says nothing about outputs smaller than it: an all-zeros output passes wherever
# every reference value is below `atol`. kbstudy's check is scale-invariant (three accuracy metrics against a
# float64 reference, with bounds that widen to four times the reference's own error at the run's precision) and
# measures how much of the output a kernel wrote (two sentinels). This notebook reads **records** and shows, for both
# checks:
#
# 1. **null candidates** on every problem and precision: the reference itself and `torch.compile` (honest: must pass),
#    all-zeros, a constant equal to the mean and partial writers (must fail), and two probes (noise at KernelBench's
#    tolerance, the reference at a lower precision);
# 2. the count **"an all-zeros output passes KernelBench's check on N of M level-1 problems"**, beside the paper's 4
#    of 60;
# 3. what the null candidates say about the **problems** (degenerate, low-spread, ill-conditioned references);
# 4. the **spread of honest implementations** against each metric's threshold;
# 5. the **leaderboard kernels re-verified**: how many pass KernelBench's check but fail kbstudy's, and why;
# 6. **kbstudy's check as of checks v4** (`docs/reference/verifier.md`) applied to the recorded metrics of the same records,
#    which older checks versions made.
#
# Every number comes from `kbstudy.analysis.audit` (and `kbstudy.analysis.calibration`), where the definitions are written out; this
# notebook only tabulates and plots. Records of a setting (hardware and size scale) are never mixed with another's.

# %% tags=["parameters"]
# Paths are relative to the repository root (resolved by kbstudy.pipeline.paths.project_path). An entry of records_dirs is a
# run folder or a folder of run folders; entries that do not exist yet (a GPU run still to come) are listed, not fatal.
records_dirs = ["outputs/records/kernelbench/cpu/calibration", "outputs/records/kernelbench/cpu/study",
                "outputs/records/dlrm_bench/cpu/study", "outputs/records/kernelbench/h200/smoke",
                "outputs/records/kernelbench/h200/level1-fp32-first4"]
output_dir = "outputs/reports/cpu-default/02_correctness_audit"  # tables/ and figures/ go here
precisions = ["fp32", "bf16"]  # keep records at these precisions
structural_dirs = []  # record folders of structural-variant runs (e.g. --correctness-only); empty: records_dirs
hardware_label = "CPU at scaled sizes (calibration), H200 at full size (committed GPU records)"
verifier_doc = "docs/reference/verifier.md"  # the check is rendered from this file's section "The replacement check"

# %%
import functools

from IPython.display import Markdown, display

from kbstudy.analysis import audit, audit_figures

from kbstudy.analysis import figures as plots
from kbstudy.analysis.tables import csv_link, show_table
from kbstudy.pipeline.paths import project_path
from kbstudy.records.frames import load_frames, run_folders

plots.set_theme()
tables_dir, figures_dir = plots.report_dirs(project_path(output_dir))
show = functools.partial(show_table, significant=3)  # HTML tables, 3 significant digits (full precision in tables/)
save = functools.partial(plots.show_figure, figures_dir)  # deterministic PNG + SVG, displayed


def table(frame, name, caption=None):
    """Write ``tables/<name>.csv`` at full precision and show the rounded table (or "(none)"), linked to its CSV."""
    frame.to_csv(tables_dir / f"{name}.csv", index=False)
    if len(frame):
        show(frame, caption=caption, csv=csv_link(output_dir, name))
    else:
        print("(none)")


print(f"hardware: {hardware_label}; precisions: {', '.join(precisions)}")

# %% [markdown]
# ## The records
#
# One line per records folder, setting and precision. *Null records* are kbstudy's null candidates (`null:<kind>`),
# *candidate records* everything else (leaderboard kernels, kbstudy's own kernels). The CPU calibration runs level 1
# (all 100 problems) at 1/64 of each module-level size, levels 2 and 3 as a deterministic subset (problems whose
# scaled forward is small on the meta device: `selection.jsonl` in each folder names what was left out and why) and
# DLRM-Bench at 1/512. CUDA candidates cannot run on a CPU: their CPU records are `skipped`, and their verdicts come
# from the H200 records.

# %%
folders, missing = run_folders(records_dirs, project_path("."))
evaluations, references, _ = load_frames(folders, label="relative", root=project_path("."), settings=True)
if evaluations.empty:
    raise FileNotFoundError(f"no evaluation records under {records_dirs}: run scripts/cpu_calibration.sh first")
print(f"{len(evaluations)} evaluation records from {len(folders)} folders; "
      f"absent: {', '.join(missing) if missing else 'none'}")
table(audit.records_overview(evaluations[evaluations.precision.isin(precisions)]), "records_overview",
      "Records per folder, setting and precision")

# %% [markdown]
# ## Null candidates under both checks
#
# Per setting, precision and null kind: on how many problems each check accepted it. *KernelBench only* counts the
# problems where `allclose` accepts a null that kbstudy rejects; *violations* counts breaches of the calibration rule
# (`kbstudy.analysis.calibration`): kbstudy accepting a must-fail null on a problem that is not flagged (degenerate, low-spread
# or unjudgeable at the precision), or rejecting an honest one; *excused* counts the same breaches on flagged
# problems, findings about the problem rather than the check. The flags are read from the reference records where
# they are recorded (checks v4), else recomputed from the null candidates' metrics by the same rules. `mean` on a
# one-element output (a loss) is the reference itself, so it is *vacuous* there and no breach at all.

# %%
findings = audit.null_findings(evaluations, references, precisions)
findings.to_csv(tables_dir / "null_findings.csv", index=False)
summary = audit.null_summary(findings)
table(summary, "null_summary", "Null candidates under both checks")

# %% [markdown]
# ## Figure 1: every problem and null kind
#
# One column per problem (levels separated by black lines), one row per null kind, one panel per setting and
# precision. Green: both checks accept; orange: only KernelBench's; blue: only kbstudy's; grey: both reject; white:
# not evaluated (the reference failed at that size or precision). For the must-fail rows grey is the right answer,
# for the honest rows green. Below the figure, the cell counts per panel and category.

# %%
grid = audit.outcome_grid(findings)  # its cells are the rows of tables/null_findings.csv
save(audit_figures.outcome_heatmap(grid, title=f"Null candidates: {hardware_label}"), "null_outcomes",
     alt="Heat map, one panel per setting and precision: for each problem (columns) and null kind (rows), whether "
     "both checks, only KernelBench's, only kbstudy's or neither accepted the null.")
counts = grid.pivot_table(index=["setting", "precision", "null"], columns="category", values="code", aggfunc="size",
                          fill_value=0).reindex(columns=list(audit.CELL_CATEGORIES), fill_value=0)
show(counts.reset_index().rename_axis(columns=None), caption="Figure 1's cells per panel and category")

# %% [markdown]
# ## An all-zeros output under KernelBench's check
#
# `null:zeros` passes `allclose` exactly when every reference value satisfies `|r| <= atol / (1 - rtol)`: when the
# output is small. Output magnitudes depend on problem size (a softmax over n features has values near 1/n), so the
# count depends on the setting: at 1/64 of the sizes most reductions are shorter and their outputs larger than at
# full size. The paper's 4 of 60 is for full-size problems on a GPU; the H200 row covers only the problems run there
# so far.

# %%
zeros = audit.zeros_pass_counts(findings)
table(zeros, "zeros_pass_counts", "All-zeros outputs that pass KernelBench's check")
for statement, setting, precision in zip(zeros.statement, zeros.setting, zeros.precision):
    print(f"{setting}, {precision}: {statement}" if setting != "paper" else statement)

# %% [markdown]
# Which must-fail nulls pass KernelBench's check, problem by problem, with the largest reference magnitude
# (`max_abs_ref`, from the zeros null's KernelBench max difference) against the tolerance, and whether kbstudy
# rejects them all:

# %%
table(audit.kernelbench_holes(findings), "kernelbench_holes", "Must-fail nulls that pass KernelBench's check")

# %% [markdown]
# ## Violations of the calibration rule, and what they say about the problems
#
# A breach of the rule is either a verdict's fault (a *violation*) or the problem's (*excused*: the problem is
# flagged, and the verdict is no evidence either way). The table lists violations first, then excused findings;
# `violation_explained` names the problem finding behind each (`audit.problem_findings`):
#
# * **degenerate**: the reference's output is constant, or an input has no effect: a null may be the answer;
#
# * **low spread**: the float64 output's relative spread `std(r)/RMS(r)` (the `mean` null's relative L2 error) is at
#   most twice kbstudy's tolerance at that precision. A constant then comes within a factor of two of any relative
#   check; with KernelBench's inputs drawn from U[0, 1), long reductions concentrate (spread ~ 1/sqrt(K)), and at full
#   size the constant beats an honest bf16 result. No accuracy threshold can separate them: the problem needs
#   zero-mean inputs (kbstudy's signed-input extra trial, checks v3 and later), or is not a test at that precision.
#   Records of checks v4 flag a problem low-spread only where every input distribution judged is; older records are
#   judged by the default inputs alone;
# * **ill-conditioned**: the reference computed at the run's precision misses the float64 result by more than the
#   fixed tolerance (cancellation in a loss, a norm of rounding noise), so the fixed threshold of checks v1-v3 rejects
#   honest kernels (checks v4's bound, four times the reference's own error, accepts them);
# * **unjudgeable**: four times that error admits a constant output: it is a quarter of the output's size or more (no
#   correct digit at this precision), or a quarter of the output's spread (a stochastic reference: level-2 66's
#   training-mode dropout draws another mask in float64) with no input variant on which a constant fails.

# %%
table(audit.violations(findings), "violations", "Violations of the calibration rule, then excused findings")

# %%
problems = audit.problem_findings(findings)
problems.to_csv(tables_dir / "problem_findings.csv", index=False)
flagged = problems[problems.findings != ""]
print(f"{len(flagged)} (setting, precision, problem) with a finding, of {len(problems)}")
table(flagged[["setting", "precision", "level", "problem_id", "problem_name", "output_numel", "rel_spread",
              "ref_rel_l2_error", "findings"]], "problem_findings_flagged", "Problems with a finding")

# %% [markdown]
# ## The spread of honest implementations, and the thresholds
#
# For each metric (formulas in `docs/reference/verifier.md`): the worst value of an honest implementation (the reference at the
# run's precision against float64, `torch.compile`'s output where it was run, and real kernels both checks accept),
# the worst value of the TF32 stand-in (`lowprec` at fp32: fp16 inputs, arithmetic and output, which bounds a GPU's
# TF32 kernels from above) where kbstudy's relative-L2 check admits it, and the smallest value of a must-fail null.
# A threshold must sit above the first two (`honest_margin` > 1) and, for the relative L2 error, below the third
# (`must_fail_margin` > 1); the other two metrics target errors on a few elements, which the relative L2 error
# averages away, not constants. Problems that are degenerate, ill-conditioned or low-spread at a precision are left
# out here: the adaptive bound of checks v4 and the problem flags cover them. Figure 2 shows the values themselves;
# the dashed line is the threshold `T_m` (`kbstudy.verdict.checks.ACCURACY_THRESHOLDS`).

# %%
evidence = audit.threshold_evidence(findings, evaluations, precisions)
table(evidence, "threshold_evidence", "Thresholds against the spread of honest implementations")
values = audit.metric_values(findings, evaluations, precisions)  # from null_findings.csv and the candidate records
save(audit_figures.metric_strips(values, title=f"Honest implementations and nulls: {hardware_label}"), "metric_spread",
     alt="Strip plots, one panel per metric and precision: the values of honest implementations, of the TF32 "
     "stand-in and of must-fail nulls, with the threshold as a dashed line.")
show(values.groupby(["precision", "metric", "group"])["value"].describe()[["count", "50%", "max"]].reset_index(),
     caption="Figure 2's data")

# %% [markdown]
# ## Leaderboard kernels re-verified
#
# Every non-null candidate in the records: how many pass KernelBench's check but fail kbstudy's (`kernelbench_only`),
# and why (`failures`, by `kbstudy_failure`: `coverage` for unwritten output, `rel_l2`, `max_abs` (checks v4) and
# `elementwise` (checks v4) for accuracy, `shape`/`dtype` for form, `inputs_mutated`/`global_state`/`stale_output` for
# integrity). CUDA kernels are `skipped` on a CPU; their
# verdicts come from GPU records, which grow as the H200 runs are added to `records_dirs`.

# %%
table(audit.candidate_reverification(evaluations, precisions), "candidate_reverification",
      "Non-null candidates re-verified")

# %%
table(audit.disagreements(evaluations, precisions), "candidate_disagreements", "Candidates the two checks disagree on")

# %% [markdown]
# ## kbstudy's check as of checks v4
#
# Proposed after this calibration and adopted as kbstudy's check in checks v4; rendered from `docs/reference/verifier.md` (the
# normative statement lives there, with the reasons for each number).

# %%
display(Markdown(plots.markdown_section(project_path(verifier_doc), "## The replacement check")))

# %% [markdown]
# Applied to the recorded metrics (each metric's worst value over trials) by the verifier's own function
# (`kbstudy.verdict.checks.accuracy_failure`, through `audit.proposed_verdict`): how many nulls the check that made each
# record accepted (`kbstudy_passes`) and how many checks v4 accepts (`proposed_passes`), and the latter's violations
# (a must-fail null accepted on a problem that is neither degenerate, low-spread nor unjudgeable, or an honest one
# rejected on a judgeable problem). `proposed_unknown` counts records made before a metric was recorded.

# %%
table(audit.proposed_summary(findings), "proposed_summary",
      "Nulls accepted by the check that made each record and by checks v4")
candidates = audit.proposed_verdict(audit.candidate_records(evaluations, precisions), audit.reference_errors(findings))
candidates = candidates[candidates.outcome == "evaluated"]
table(candidates.groupby(["setting", "precision", "model_config"]).agg(
    evaluated=("outcome", "size"), kbstudy_correct=("kbstudy_correct", lambda s: int(s.eq(True).sum())),
    proposed_correct=("proposed_correct", lambda s: int(s.eq(True).sum())),
    proposed_unknown=("proposed_correct", lambda s: int(s.isna().sum()))).reset_index(), "proposed_candidates",
    "Candidates correct by the check that made each record and by checks v4")

# %% [markdown]
# ## Structural variants: other sizes, layouts and parameter values
#
# The candidates that pass KernelBench's check and kbstudy's on every trial at the benchmark's shape, contiguous
# inputs and initial parameters, but fail a shape, layout or parameter variant (`kbstudy.analysis.variants`, classes
# `correct_at_benchmark_shape_only`, `correct_for_contiguous_only`, `correct_for_initial_parameters_only`), per
# model configuration, with examples.

# %%
from kbstudy.analysis import variants as structural

variant_evaluations = load_frames([project_path(d) for d in structural_dirs], label="relative",
                                  root=project_path("."), settings=True).evaluations if structural_dirs else evaluations
if structural.has_variant_records(variant_evaluations):
    print(f"structural variants: {', '.join(structural_dirs) or 'records_dirs'}")
    table(structural.variant_summary(variant_evaluations, precisions), "structural_variants",
          "KernelBench-correct candidates correct only at the benchmark's shape, layout or parameters")
    table(structural.variant_examples(variant_evaluations, precisions=precisions), "structural_variant_examples",
          "Examples")
else:
    print("no variant records: these records were made before the structural variants (or with them off)")

# %% [markdown]
# ## Reading these numbers
#
# * CPU rows are at scaled sizes (1/64 for KernelBench, 1/512 for DLRM-Bench): they test the checks on real problem
#   code, but output magnitudes, reduction lengths and hence the KernelBench zeros count and the low-spread findings
#   move with size. The full-size answer needs the GPU records (`outputs/records/h200-*`), which this notebook reads
#   through the same functions once they are listed in `records_dirs`.
# * On a CPU, `torch.compile` emits C++ rather than Triton, and there is no TF32: the TF32 stand-in (`lowprec` at
#   fp32) is pessimistic by design.
# * The CSV files in `tables/` hold every number at full precision; `null_findings.csv` has one row per null record
#   (Figure 1's cells, Figure 2's null values).
