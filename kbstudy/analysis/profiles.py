"""What notebook 3 shows, as functions: load the profiling records, tabulate, and draw the figures.

Reads the files that :mod:`kbstudy.profiling.profile_run` writes (``kernels.jsonl``, ``workloads.jsonl``), from one main
folder and optionally from supplementary folders whose kernel tables fill the runs the main folder lacks
(:func:`load_profile_records`); imports matplotlib/seaborn (the ``notebooks`` extra) only inside the figure functions.
Importing it loads torch: the workload registry (:mod:`kbstudy.profiling.workloads`) builds configurations on the
``meta`` device for their parameter counts.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from kbstudy.harness.kernel_classes import CATEGORIES, CATEGORY_LABELS, classify_kernel_source, classify_op_source
from kbstudy.profiling import workloads as W
from kbstudy.profiling.addressable import (
    DEFAULT_RULE,
    PAPER,
    PAPER_CITATION,
    addressable_fraction,
    category_shares,
    paper_comparison,
    rule_categories,
    summarize,
)
from kbstudy.profiling.profile_run import plan
from kbstudy.records.store import iter_jsonl

ROLE_ORDER = {"seven": 0, "extra": 1, "sweep": 2}
#: Goal for the share of a workload's time that the name rules leave unclassified (under 2%, as the study requires).
OTHER_SHARE_TARGET = 0.02
#: Values of the ``row_from`` column of the workloads table: a row of ``workloads.jsonl`` (step times measured), or a
#: row derived from a kernel table alone (``kernels.jsonl`` of a supplementary folder; step times absent, NaN).
ROW_FROM_WORKLOADS, ROW_FROM_KERNELS = "workloads.jsonl", "kernels.jsonl"


def reclassify(kernels: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``kernels`` sorted again by the current rule tables, so a rule fixed after a GPU run applies to its
    records: ``category`` is recomputed, the recorded one is kept as ``recorded_category``, and ``source`` says how
    each row was sorted (:data:`kbstudy.harness.kernel_classes.SOURCES`): kernel rows (``level == "kernel"``, or no
    ``level``) by :func:`~kbstudy.harness.kernel_classes.classify_kernel_source` on ``name`` and ``top_op``, ATen operator
    rows (``level == "aten_op"``) by :func:`~kbstudy.harness.kernel_classes.classify_op_source`.
    """
    out = kernels.copy()
    if not len(out):
        return out.assign(recorded_category=pd.Series(dtype=object), source=pd.Series(dtype=object))
    levels = out["level"] if "level" in out else pd.Series("kernel", index=out.index)
    tops = out["top_op"] if "top_op" in out else pd.Series(None, index=out.index)
    pairs = [classify_op_source(n) if lvl == "aten_op" else classify_kernel_source(n, t if isinstance(t, str) else None)
             for n, lvl, t in zip(out["name"], levels, tops)]
    out["recorded_category"] = out["category"] if "category" in out else None
    out["category"] = [c for c, _ in pairs]
    out["source"] = [src for _, src in pairs]
    return out


def folder_label(folder: str | os.PathLike, root: str | os.PathLike | None = None) -> str:
    """How a records folder is named in tables: its path relative to ``root`` (the caller's; notebooks pass the
    repository root) when it lies inside it, else the path as given. Keeps absolute paths out of rendered notebooks."""
    folder = Path(folder)
    if root is not None:
        try:
            return folder.resolve().relative_to(Path(root).resolve()).as_posix()
        except ValueError:
            pass
    return folder.as_posix()


def _read_kernels(folder: Path) -> pd.DataFrame:
    """``kernels.jsonl`` of ``folder`` (empty frame if absent); a rerun appended to it: the last row of a
    (workload, name) wins."""
    kernels = pd.DataFrame(list(iter_jsonl(folder / "kernels.jsonl")))
    if len(kernels):
        kernels = kernels.drop_duplicates(["workload_key", "name"], keep="last").reset_index(drop=True)
    return kernels


def _config_facts(workload: str, size: str) -> dict:
    """``model`` and ``params`` of a workload configuration, from building it on PyTorch's ``meta`` device with the
    same builder the profiling run used (:func:`kbstudy.profiling.workloads.build`; no memory, no kernels): the
    parameter count is a property of the configuration, not a measurement. Empty dict when it cannot be built."""
    try:
        wl = W.build(workload, "meta", size=size)
    except Exception:  # noqa: BLE001 - an unknown workload/size or a builder meta cannot run: facts stay missing
        return {}
    return {"model": wl.model_name, "params": int(wl.params)}


def workload_rows_from_kernels(kernels: pd.DataFrame, source_folder: str, rule=DEFAULT_RULE) -> pd.DataFrame:
    """One ``status="ok"`` workload row per workload key of a kernel table that has no ``workloads.jsonl`` row.

    Everything in the row comes from the kernel rows themselves (``run``, ``workload``, ``size``, ``role``,
    ``device``, ``hardware``, ``level``; ``kernel_us_per_step`` = their sum in µs, ``n_names``, ``category_shares``
    and ``other_share`` from the categories recorded at profiling time, ``addressable_fraction`` under ``rule`` as
    :mod:`~kbstudy.profiling.profile_run` would have written it), from the workload registry (``domain``, ``mode``) or from
    the configuration built on the meta device (``model``, ``params``: :func:`_config_facts`). Step times
    (``step_ms_median``/``_q1``/``_q3``) were measured in a separate run without the profiler and are not in a kernel
    table: they are NaN, never filled in. ``precision`` is left missing. ``source_folder`` and ``row_from``
    (:data:`ROW_FROM_KERNELS`) say where the row comes from.
    """
    cats = rule_categories(rule)
    rows = []
    for key, k in kernels.groupby("workload_key", sort=False):
        first = k.iloc[0]
        name, size = str(first["workload"]), str(first["size"])
        spec = W.WORKLOADS.get(name)
        total = float(k["time_us_per_step"].sum())
        by_cat = k.groupby("category")["time_us_per_step"].sum()
        shares = {c: float(by_cat.get(c, 0.0)) / total for c in CATEGORIES}
        row = {"run": first.get("run"), "workload": name, "size": size, "workload_key": key,
               "role": first.get("role"), "domain": spec.domain if spec else None, "mode": spec.mode if spec else None,
               "device": first.get("device"), "tiny": size.startswith("tiny"), "level": first.get("level", "kernel"),
               "status": "ok", "error": None, "addressable_rule": rule if isinstance(rule, str) else sorted(cats),
               "precision": None, **_config_facts(name, size),
               "step_ms_median": math.nan, "step_ms_q1": math.nan, "step_ms_q3": math.nan,
               "kernel_us_per_step": total, "n_names": int(k["name"].nunique()), "category_shares": shares,
               "other_share": shares["other"], "addressable_fraction": addressable_fraction(shares, cats),
               "hardware": first.get("hardware"), "source_folder": source_folder, "row_from": ROW_FROM_KERNELS}
        rows.append(row)
    return pd.DataFrame(rows)


def load_profile_records(folder: str | os.PathLike, reclassify_rows: bool = True,
                         supplementary: Sequence[str | os.PathLike] | None = None,
                         root: str | os.PathLike | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(kernels, workloads)`` DataFrames from a profile_run output folder, optionally completed from other folders.

    ``folder`` must hold ``workloads.jsonl`` (else ``FileNotFoundError``). Workloads keep every status
    (ok/error/skipped); kernels only exist for ``ok`` ones. A rerun appended to the same folder: its last row wins.

    ``supplementary`` lists folders (in priority order) of the **same hardware** whose ``kernels.jsonl`` fills the
    workload keys that ``folder`` lacks or did not complete (status skipped or error, or no row at all), e.g. an
    earlier profiling call on the same machine whose ``workloads.jsonl`` was lost. Each such key gets a row from
    :func:`workload_rows_from_kernels` (shares and addressable fraction from its kernel table, **step times NaN**) and
    its kernel rows; kernel rows ``folder`` itself left for that key (an interrupted run) are dropped so that one
    key's kernels come from one folder. Keys already ``ok`` in ``folder`` are never replaced. ``FileNotFoundError`` if
    a supplementary folder has no ``kernels.jsonl``; ``ValueError`` if its hardware or level (kernel vs ATen operator)
    differs from the main folder's.

    Both frames gain ``source_folder`` (:func:`folder_label`, relative to ``root``); ``workloads`` also ``row_from``
    (:data:`ROW_FROM_WORKLOADS` or :data:`ROW_FROM_KERNELS`) and ``replaces`` (for a filled key, the main folder's
    status it replaces, ``"absent"`` when it had no row). With ``reclassify_rows`` (default) the kernel rows are
    sorted again by the current rules (:func:`reclassify`: columns ``category``, ``recorded_category``, ``source``).
    """
    folder = Path(folder)
    if not (folder / "workloads.jsonl").exists():
        raise FileNotFoundError(f"{folder / 'workloads.jsonl'} not found (run kbstudy.profiling.profile_run first)")
    workloads = pd.DataFrame(list(iter_jsonl(folder / "workloads.jsonl")))
    # a rerun appended to the same folder: the last row of a workload wins
    workloads = workloads.drop_duplicates("workload_key", keep="last").reset_index(drop=True)
    kernels = _read_kernels(folder)
    main_label = folder_label(folder, root)
    workloads["source_folder"] = main_label
    workloads["row_from"] = ROW_FROM_WORKLOADS
    workloads["replaces"] = None
    if len(kernels):
        kernels["source_folder"] = main_label
    ok_hw = set(workloads.loc[workloads["status"] == "ok", "hardware"].dropna()) if "hardware" in workloads else set()
    main_level = set(kernels["level"].dropna()) if "level" in kernels else set()
    for extra in supplementary or ():
        extra = Path(extra)
        if not (extra / "kernels.jsonl").exists():
            raise FileNotFoundError(f"{extra / 'kernels.jsonl'} not found (supplementary folder)")
        label = folder_label(extra, root)
        sup = _read_kernels(extra)
        if not len(sup):
            continue
        hw = set(sup["hardware"].dropna()) if "hardware" in sup else set()
        if ok_hw and hw and hw != ok_hw:
            raise ValueError(f"{label}: hardware {sorted(hw)} differs from {main_label}'s {sorted(ok_hw)}")
        level = set(sup["level"].dropna()) if "level" in sup else set()
        if main_level and level and level != main_level:
            raise ValueError(f"{label}: rows of level {sorted(level)}, {main_label} has {sorted(main_level)}")
        status = workloads.set_index("workload_key")["status"]
        keys = [k for k in dict.fromkeys(sup["workload_key"]) if status.get(k) != "ok"]
        if not keys:
            continue
        sup = sup[sup["workload_key"].isin(keys)].assign(source_folder=label)
        rows = workload_rows_from_kernels(sup, label)
        rows["replaces"] = [status.get(k, "absent") for k in rows["workload_key"]]
        # a filled key keeps its place in the main folder's order; keys the main folder never named follow
        order = {k: i for i, k in enumerate([*status.index, *[k for k in rows["workload_key"] if k not in status]])}
        workloads = pd.concat([workloads[~workloads["workload_key"].isin(keys)], rows], ignore_index=True)
        workloads = workloads.sort_values("workload_key", key=lambda c: c.map(order), kind="stable")
        workloads = workloads.reset_index(drop=True)
        kernels = (pd.concat([kernels[~kernels["workload_key"].isin(keys)], sup], ignore_index=True) if len(kernels)
                   else sup.reset_index(drop=True))
    if "params" in workloads:  # counts: integers, missing where a run did not complete (pandas' nullable Int64)
        workloads["params"] = pd.to_numeric(workloads["params"]).round().astype("Int64")
    if reclassify_rows:
        kernels = reclassify(kernels)
    return kernels, workloads


def row_sources(workloads: pd.DataFrame) -> pd.DataFrame:
    """Where each workload row comes from, one row per workload key (records order): ``status``, ``source_folder``,
    ``row_from`` (``workloads.jsonl``: step times measured; ``kernels.jsonl``: derived from a kernel table, step
    times absent), ``replaces`` (the main folder's status a supplementary row stands in for, else empty) and
    ``step_ms_median`` (ms; NaN where absent)."""
    cols = ["workload_key", "status", "source_folder", "row_from", "replaces", "step_ms_median"]
    out = workloads.reindex(columns=cols).copy()
    out["replaces"] = out["replaces"].fillna("")
    return out.reset_index(drop=True)


def folder_agreement(folder: str | os.PathLike, supplementary: Sequence[str | os.PathLike],
                     rule=DEFAULT_RULE, root: str | os.PathLike | None = None) -> pd.DataFrame:
    """Reproducibility check between profiling calls: for every workload key whose kernel table is in ``folder`` and
    in a supplementary folder, the addressable fraction under ``rule``, the GEMM+attention share and the kernel time
    per step (ms) in each, and the absolute differences. Both tables are re-classified with the current rules.

    Columns: workload_key, folder, addressable_fraction, addressable_fraction_other, abs_diff_f,
    gemm_attention_share, gemm_attention_share_other, abs_diff_gemm_attention, kernel_ms, kernel_ms_other (``other``
    = the supplementary folder named in ``folder``, relative to ``root``: :func:`folder_label`).
    """
    main = reclassify(_read_kernels(Path(folder)))
    parts = []
    for extra in supplementary:
        other = reclassify(_read_kernels(Path(extra)))
        keys = [k for k in dict.fromkeys(main["workload_key"]) if k in set(other["workload_key"])]
        if not keys:
            continue
        a = summarize(main[main["workload_key"].isin(keys)], rule=rule).reindex(keys)
        b = summarize(other[other["workload_key"].isin(keys)], rule=rule).reindex(keys)
        ms_a = main.groupby("workload_key")["time_us_per_step"].sum().reindex(keys) / 1e3
        ms_b = other.groupby("workload_key")["time_us_per_step"].sum().reindex(keys) / 1e3
        parts.append(pd.DataFrame({
            "workload_key": keys, "folder": folder_label(extra, root),
            "addressable_fraction": a["addressable_fraction"].to_numpy(),
            "addressable_fraction_other": b["addressable_fraction"].to_numpy(),
            "abs_diff_f": (a["addressable_fraction"] - b["addressable_fraction"]).abs().to_numpy(),
            "gemm_attention_share": a["gemm_attention_share"].to_numpy(),
            "gemm_attention_share_other": b["gemm_attention_share"].to_numpy(),
            "abs_diff_gemm_attention": (a["gemm_attention_share"] - b["gemm_attention_share"]).abs().to_numpy(),
            "kernel_ms": ms_a.to_numpy(), "kernel_ms_other": ms_b.to_numpy()}))
    cols = ["workload_key", "folder", "addressable_fraction", "addressable_fraction_other", "abs_diff_f",
            "gemm_attention_share", "gemm_attention_share_other", "abs_diff_gemm_attention", "kernel_ms",
            "kernel_ms_other"]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)


def classification_table(kernels: pd.DataFrame, keys: list[str] | None = None) -> pd.DataFrame:
    """How each workload's time was classified, one row per workload key (``keys`` order if given).

    Columns: ``name_rule`` (share of time whose kernel name a :data:`~kbstudy.harness.kernel_classes.KERNEL_RULES`
    rule matched), ``op_fallback`` (no name rule matched; sorted by the launching ATen operator), ``op_rule``
    (ATen-operator rows of CPU records, sorted by ``OP_RULES``), ``other`` (nothing matched: the final "other"
    share); these four sum to 1. ``other_by_name_rules`` = ``op_fallback`` + ``other``: what would be "other"
    without the operator fallback, the share the 2% goal is judged on (on CPU records, where the rows are
    operators and there is no fallback, it equals ``other``). ``names``, ``names_fallback``, ``names_other``:
    distinct names in all, sorted by the fallback, left in "other". ``below_target``: ``other_by_name_rules`` <
    :data:`OTHER_SHARE_TARGET`.

    ``kernels`` needs ``workload_key``, ``name``, ``time_us_per_step`` and ``source`` (:func:`reclassify`).
    """
    k = kernels if keys is None else kernels[kernels["workload_key"].isin(keys)]
    pivot = k.pivot_table(index="workload_key", columns="source", values="time_us_per_step", aggfunc="sum",
                          fill_value=0.0)
    pivot = pivot.reindex(columns=["name_rule", "op_fallback", "op_rule", "none"], fill_value=0.0)
    out = pivot.div(pivot.sum(axis=1), axis=0).rename(columns={"none": "other"})
    out["other_by_name_rules"] = out["op_fallback"] + out["other"]
    g = k.groupby("workload_key")
    out["names"] = g["name"].nunique()
    out["names_fallback"] = k[k["source"] == "op_fallback"].groupby("workload_key")["name"].nunique()
    out["names_other"] = k[k["source"] == "none"].groupby("workload_key")["name"].nunique()
    out[["names_fallback", "names_other"]] = out[["names_fallback", "names_other"]].fillna(0).astype(int)
    out["below_target"] = out["other_by_name_rules"] < OTHER_SHARE_TARGET
    out.columns.name = None
    return out.reindex(keys) if keys is not None else out


def unmatched_names(kernels: pd.DataFrame, keys: list[str] | None = None) -> pd.DataFrame:
    """Rows no kernel-name rule matched (source ``op_fallback`` or ``none``), largest share first: workload_key,
    name (shortened to 80 chars), top_op, category (the fallback's, or "other"), share of the workload's time."""
    k = kernels if keys is None else kernels[kernels["workload_key"].isin(keys)]
    share = k["time_us_per_step"] / k.groupby("workload_key")["time_us_per_step"].transform("sum")
    rows = k.assign(share=share)[k["source"].isin(["op_fallback", "none"])]
    rows = rows.sort_values("share", ascending=False)[["workload_key", "name", "top_op", "category", "share"]].copy()
    rows["name"] = rows["name"].str.slice(0, 80)
    return rows.reset_index(drop=True)


def reclassified_names(kernels: pd.DataFrame) -> pd.DataFrame:
    """Distinct names whose current category differs from the recorded one (a rule changed after the run):
    name (80 chars), recorded_category, category, workloads (count)."""
    if "recorded_category" not in kernels:
        return pd.DataFrame(columns=["name", "recorded_category", "category", "workloads"])
    d = kernels[kernels["recorded_category"] != kernels["category"]]
    out = d.groupby(["name", "recorded_category", "category"])["workload_key"].nunique().rename("workloads")
    out = out.reset_index().sort_values(["category", "name"])
    out["name"] = out["name"].str.slice(0, 80)
    return out.reset_index(drop=True)


def workload_table(kernels: pd.DataFrame, workloads: pd.DataFrame, rule=DEFAULT_RULE) -> pd.DataFrame:
    """Per workload (ok ones, in report order): domain, mode, role, model, params, step time (ms), addressable
    fraction under ``rule``, GEMM+attention share, vendor share, "other" share, Amdahl bound, projected speedups, and
    (for reclassified kernels, :func:`reclassify`) ``other_by_name_rules`` of :func:`classification_table`."""
    ok = workloads[workloads["status"] == "ok"].copy()
    ok["_order"] = ok["role"].map(ROLE_ORDER)
    ok = ok.sort_values(["_order"], kind="stable")
    summary = summarize(kernels[kernels["workload_key"].isin(ok["workload_key"])], ok, rule=rule)
    cols = ["workload_key", "domain", "mode", "role", "model", "params", "precision"]
    table = ok[[c for c in cols if c in ok]].set_index("workload_key").join(summary)
    if "source" in kernels:
        table = table.join(classification_table(kernels, list(table.index))[["other_by_name_rules"]])
    return table


def coverage_table(kernels: pd.DataFrame, workloads: pd.DataFrame) -> pd.DataFrame:
    """Every run :func:`kbstudy.profiling.profile_run.plan` schedules (tiny sizes if the records are tiny), in plan order,
    with its status in the records: ``ok``, ``error``, ``skipped``, or ``missing`` when ``workloads.jsonl`` has no row
    for it (an interrupted run). Recorded runs the plan does not name follow. ``kernel_rows`` counts the kernel rows
    of each run (an interrupted run can leave kernel rows without a workload row; they are not used).

    Columns: workload_key, workload, size, role, status, kernel_rows.
    """
    tiny = bool(workloads["tiny"].fillna(False).astype(bool).any()) if "tiny" in workloads and len(workloads) else False
    planned = pd.DataFrame(plan(tiny), columns=["workload", "size", "role"])
    planned.insert(0, "workload_key", planned["workload"] + "@" + planned["size"])
    recorded = workloads.set_index("workload_key") if len(workloads) else pd.DataFrame(columns=["status"])
    planned["status"] = planned["workload_key"].map(recorded["status"]).fillna("missing")
    unplanned = workloads[~workloads["workload_key"].isin(planned["workload_key"])] if len(workloads) else workloads
    cols = ["workload_key", "workload", "size", "role", "status"]
    table = pd.concat([planned[cols], unplanned[[c for c in cols if c in unplanned]]], ignore_index=True)
    counts = kernels["workload_key"].value_counts() if len(kernels) else pd.Series(dtype=int)
    table["kernel_rows"] = table["workload_key"].map(counts).fillna(0).astype(int)
    return table


def missing_runs(coverage: pd.DataFrame, role: str | None = None) -> list[str]:
    """Workload keys of :func:`coverage_table` whose status is not ``ok`` (restricted to ``role`` if given)."""
    rows = coverage if role is None else coverage[coverage["role"] == role]
    return rows.loc[rows["status"] != "ok", "workload_key"].tolist()


def breakdown_table(kernels: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Category shares (0..1), one row per workload key in ``keys`` order, one column per category (display order)."""
    shares = category_shares(kernels[kernels["workload_key"].isin(keys)])
    return shares.reindex(keys)[list(CATEGORIES)]


def top_kernels(kernels: pd.DataFrame, key: str, n: int = 10) -> pd.DataFrame:
    """The ``n`` largest kernels (or operators) of one workload: name (shortened to 80 chars), category, share."""
    k = kernels[kernels["workload_key"] == key].sort_values("time_us_per_step", ascending=False)
    total = k["time_us_per_step"].sum()
    out = k.head(n)[["name", "category", "time_us_per_step", "calls_per_step"]].copy()
    out["share"] = out["time_us_per_step"] / total
    out["name"] = out["name"].str.slice(0, 80)
    return out.reset_index(drop=True)


def sweep_table(table: pd.DataFrame, workloads: pd.DataFrame) -> pd.DataFrame:
    """Transformer size sweep: workload, size, params, addressable fraction, GEMM+attention share, Amdahl bound, step
    time (ms, NaN where the row comes from a kernel table alone) and ``row_from`` (:func:`load_profile_records`), sorted
    by workload then parameter count. A transformer enters with at least three sizes in ``table``."""
    extra = [c for c in ("workload", "size", "row_from") if c in workloads]
    t = table.join(workloads.set_index("workload_key")[extra])
    swept = t.groupby("workload")["size"].transform("nunique") >= 3
    t = t[swept & (t["domain"] == "transformer")]
    cols = ["workload", "size", "params", "addressable_fraction", "gemm_attention_share", "amdahl_bound",
            "step_ms_median", "row_from"]
    return t.reindex(columns=cols).sort_values(["workload", "params"])


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def paper_comparison_notes(table: pd.DataFrame, sweep: pd.DataFrame | None = None, rule=DEFAULT_RULE) -> list[str]:
    """Sentences comparing our numbers with the paper's (:data:`~kbstudy.profiling.addressable.PAPER`, cited as
    :data:`~kbstudy.profiling.addressable.PAPER_CITATION`), every number of ours computed here from ``table``
    (:func:`workload_table`) and ``sweep`` (:func:`sweep_table`): the range of the addressable fraction f over the
    workloads of role ``seven`` and how many fall below, inside or above the paper's range; f per domain; the
    GEMM+attention share of the transformers (role ``seven``) against the paper's 80-86%; f as a share of the
    un-profiled step time (``f_of_step``) where step times exist; and, per swept transformer, how f, the
    GEMM+attention share and the Amdahl bound move from the smallest to the largest size. Raises ``ValueError`` if
    ``table`` has no workload of role ``seven``.
    """
    seven = table[table["role"] == "seven"]
    if not len(seven):
        raise ValueError("no workload of role 'seven' in the table")
    f = seven["addressable_fraction"]
    lo, hi = PAPER["addressable_min"], PAPER["addressable_max"]
    below, above = int((f < lo).sum()), int((f > hi).sum())
    notes = [(f"Paper: {PAPER_CITATION}. Its addressable fraction spans {_pct(lo)}-{_pct(hi)} over seven workloads, "
              f"and GEMM plus attention take {_pct(PAPER['transformer_gemm_attention_min'])}-"
              f"{_pct(PAPER['transformer_gemm_attention_max'])} of transformer runtime."),
             (f"Ours (rule {rule if isinstance(rule, str) else sorted(rule)}), over the {len(seven)} workloads: f from "
              f"{_pct(f.min())} ({f.idxmin()}) to {_pct(f.max())} ({f.idxmax()}); {len(seven) - below - above} inside "
              f"the paper's range, {above} above it, {below} below it; Amdahl bound 1/(1-f) from "
              f"{seven['amdahl_bound'].min():.2f}x to {seven['amdahl_bound'].max():.2f}x.")]
    by_domain = seven.groupby("domain", sort=False)["addressable_fraction"].agg(["min", "max"])
    notes.append("f by domain: " + "; ".join(f"{d} {_pct(r['min'])}-{_pct(r['max'])}" for d, r in by_domain.iterrows())
                 + ".")
    tr = seven[seven["domain"] == "transformer"]
    if len(tr):
        ga = tr["gemm_attention_share"]
        where = ("inside" if ga.min() >= PAPER["transformer_gemm_attention_min"]
                 and ga.max() <= PAPER["transformer_gemm_attention_max"] else
                 "below" if ga.max() < PAPER["transformer_gemm_attention_min"] else
                 "above" if ga.min() > PAPER["transformer_gemm_attention_max"] else "across")
        notes.append(f"GEMM+attention share of kernel time on the {len(tr)} transformers: {_pct(ga.min())} "
                     f"({ga.idxmin()}) to {_pct(ga.max())} ({ga.idxmax()}), {where} the paper's "
                     f"{_pct(PAPER['transformer_gemm_attention_min'])}-{_pct(PAPER['transformer_gemm_attention_max'])}"
                     f".")
    if "f_of_step" in seven and seven["f_of_step"].notna().any():
        fs = seven["f_of_step"].dropna()
        busy = (seven["kernel_us_per_step"] / (seven["step_ms_median"] * 1e3)).dropna()
        notes.append(f"Addressable time as a share of the step time measured without the profiler (f_of_step, "
                     f"{len(fs)} workloads with step times): {_pct(fs.min())} ({fs.idxmin()}) to {_pct(fs.max())} "
                     f"({fs.idxmax()}); the profiled kernel time is {_pct(busy.min())} ({busy.idxmin()}) to "
                     f"{_pct(busy.max())} ({busy.idxmax()}) of the step time.")
    for name, g in (sweep.groupby("workload", sort=True) if sweep is not None and len(sweep) else ()):
        a, b = g.iloc[0], g.iloc[-1]
        steps = g["addressable_fraction"].diff().dropna()
        trend = ("falls at every size step" if (steps < 0).all() else "rises at every size step" if (steps > 0).all()
                 else "falls overall" if b["addressable_fraction"] < a["addressable_fraction"] else "rises overall")
        notes.append(f"{name} from {a['size']} to {b['size']} ({len(g)} sizes): f {trend}, from "
                     f"{_pct(a['addressable_fraction'])} to {_pct(b['addressable_fraction'])}, GEMM+attention from "
                     f"{_pct(a['gemm_attention_share'])} to {_pct(b['gemm_attention_share'])}, Amdahl bound from "
                     f"{a['amdahl_bound']:.2f}x to {b['amdahl_bound']:.2f}x.")
    return notes


def plot_breakdown(breakdown: pd.DataFrame, title: str):
    """Horizontal stacked bars of category shares per workload; returns the matplotlib figure."""
    import matplotlib.pyplot as plt  # the notebooks extra: the tables above need no matplotlib
    import seaborn as sns  # a notebooks extra: loaded only when a figure is drawn

    colors = dict(zip(CATEGORIES, sns.color_palette("tab20", len(CATEGORIES))))
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(breakdown) + 1.6))
    left = pd.Series(0.0, index=breakdown.index)
    for cat in CATEGORIES:
        vals = breakdown[cat]
        if (vals > 0).any():
            ax.barh(breakdown.index, vals, left=left, color=colors[cat], label=CATEGORY_LABELS[cat])
            left += vals
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of time")
    ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3, frameon=False, fontsize=7)
    fig.tight_layout()
    return fig


def plot_addressable_vs_paper(table: pd.DataFrame, title: str):
    """Two panels, one bar per workload of ``table`` (:func:`workload_table` rows): the addressable fraction with the
    paper's range (8.9%-58.2%) shaded, and the GEMM+attention share with the paper's transformer band (80-86%) shaded,
    bars coloured by domain. Returns the matplotlib figure."""
    import matplotlib.pyplot as plt  # the notebooks extra: the tables above need no matplotlib
    from matplotlib.patches import Patch  # a notebooks extra, as above

    domains = list(dict.fromkeys(table["domain"]))
    colors = {d: f"C{i}" for i, d in enumerate(domains)}
    bar_colors = [colors[d] for d in table["domain"]]
    fig, (ax1, ax2) = plt.subplots(1, 2, sharey=True, figsize=(10, 0.4 * len(table) + 2.2))
    bands = [(ax1, "addressable_fraction", "addressable fraction f", PAPER["addressable_min"],
              PAPER["addressable_max"], f"paper: f {PAPER['addressable_min']:.1%}-{PAPER['addressable_max']:.1%}"),
             (ax2, "gemm_attention_share", "GEMM + attention share", PAPER["transformer_gemm_attention_min"],
              PAPER["transformer_gemm_attention_max"],
              (f"paper: GEMM+attention {PAPER['transformer_gemm_attention_min']:.0%}-"
               f"{PAPER['transformer_gemm_attention_max']:.0%} (transformers)"))]
    for ax, col, label, lo, hi, _ in bands:
        ax.axvspan(lo, hi, color="0.85", zorder=0)
        ax.barh(table.index, table[col], color=bar_colors)
        ax.set_xlim(0, 1)
        ax.set_xlabel(label)
    ax1.invert_yaxis()
    handles = [Patch(color="0.85", label=b[-1]) for b in bands] + [Patch(color=colors[d], label=d) for d in domains]
    fig.legend(handles=handles, loc="lower center", ncol=3, frameon=False, fontsize=7)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def plot_sweep(sweep: pd.DataFrame, title: str):
    """Addressable fraction and GEMM+attention share against parameter count (log x), one colour per workload; each f
    point is labelled with its size and Amdahl bound 1/(1-f) (:func:`sweep_table` rows). Returns the figure."""
    import matplotlib.pyplot as plt  # the notebooks extra: the tables above need no matplotlib
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # a notebooks extra, as above

    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (name, g) in enumerate(sweep.groupby("workload")):
        params = g["params"].astype(float)
        ax.plot(params, g["addressable_fraction"], "o-", color=f"C{i}", label=f"{name}: addressable f")
        ax.plot(params, g["gemm_attention_share"], "s--", color=f"C{i}", label=f"{name}: GEMM+attention")
        for x, (_, row) in zip(params, g.iterrows()):
            ax.annotate(f"{row['size']}\n{row['amdahl_bound']:.2f}x", (x, row["addressable_fraction"]),
                        textcoords="offset points", xytext=(0, -22), ha="center", fontsize=6, color=f"C{i}")
    ax.axhspan(PAPER["transformer_gemm_attention_min"], PAPER["transformer_gemm_attention_max"], color="0.85",
               zorder=0, label="paper: GEMM+attention 80-86%")
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 3.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda v, _: next(f"{v / d:g}{u}" for d, u in ((1e9, "B"), (1e6, "M"), (1e3, "k"), (1, "")) if v >= d)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(0, 1)
    ax.set_xlabel("parameters (log scale); labels: size and Amdahl bound 1/(1-f)")
    ax.set_ylabel("share of time")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    fig.tight_layout()
    return fig


__all__ = ["OTHER_SHARE_TARGET", "ROW_FROM_WORKLOADS", "ROW_FROM_KERNELS", "reclassify", "folder_label",
           "workload_rows_from_kernels", "load_profile_records", "row_sources", "folder_agreement",
           "classification_table", "unmatched_names", "reclassified_names", "workload_table", "coverage_table",
           "missing_runs", "breakdown_table", "top_kernels", "sweep_table", "paper_comparison_notes", "plot_breakdown",
           "plot_addressable_vs_paper", "plot_sweep", "paper_comparison"]
