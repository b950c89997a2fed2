"""Profile the seven workloads, the transformer size sweep and the extras; write three record files.

Usage (GPU, from the repository root)::

    python -m kbstudy.profiling.profile_run --out outputs/records/profiles/h200/eager

The production setup (``torch.compile`` in its default mode; :mod:`kbstudy.profiling.production`), each setup in its
own folder::

    python -m kbstudy.profiling.profile_run --config production --no-sweep --no-extras \
        --out outputs/records/profiles/h100/production

CPU (tiny configurations, per-ATen-operator self time; the same code path)::

    python -m kbstudy.profiling.profile_run --device cpu --tiny --out outputs/records/profiles/cpu/study --overwrite

Files written under ``--out`` (JSONL through :func:`kbstudy.records.store.append_jsonl`, one line per record):

* ``kernels.jsonl``      one row per (workload, kernel name) -- or (workload, ATen operator) on CPU: time in µs
  (summed over the active steps, and per step), calls, category, launching operator;
* ``workloads.jsonl``    one row per workload: status, configuration, kernel time per step (µs), step time (ms:
  median, q1, q3 from a separate run without the profiler), addressable fraction under the default rule, "other"
  share, provenance;
* ``kernel_names.json``  every distinct kernel name seen, with its category, the rule that matched, the launching
  operator and the workloads it appeared in (the source of ``tests/profiling/fixtures/kernel_names.csv``).

A workload that fails (out of memory, a CUDA error, a missing kernel) is recorded with ``status="error"`` and the run
goes on; work left when ``--budget-s`` seconds have passed is recorded as ``status="skipped"``. Needs only torch,
numpy and pandas.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import traceback
from pathlib import Path

import torch

from kbstudy.harness.kernel_classes import (
    CATEGORIES,
    SOURCES,
    classify_kernel_source,
    classify_op_source,
    matching_rule,
)
from kbstudy.profiling import workloads as W
from kbstudy.profiling.addressable import DEFAULT_RULE, addressable_fraction, rule_categories
from kbstudy.profiling.capture import profile_steps, time_steps
from kbstudy.records.provenance import collect
from kbstudy.records.store import append_jsonl

KERNELS_FILE, WORKLOADS_FILE, NAMES_FILE = "kernels.jsonl", "workloads.jsonl", "kernel_names.json"


def plan(tiny: bool, names: list[str] | None = None, sweep: bool = True, extras: bool = True) -> list[tuple[str, str, str]]:
    """The runs in order, as ``(workload, size, role)`` with role ``"seven"``, ``"sweep"`` or ``"extra"``.

    The seven come first at their default (or tiny) size, then the transformer sweep sizes not already run, then the
    extras. ``names`` restricts the workloads (unknown names raise ``KeyError``).
    """
    selected = list(names) if names else list(W.SEVEN) + (list(W.EXTRAS) if extras else [])
    for n in selected:
        if n not in W.WORKLOADS:
            raise KeyError(f"unknown workload {n!r}; known: {sorted(W.WORKLOADS)}")
    base = [n for n in selected if n not in W.EXTRAS]
    runs = [(n, "tiny" if tiny else W.WORKLOADS[n].default_size, "seven" if n in W.SEVEN else "extra") for n in base]
    if sweep:
        table = W.TINY_SIZE_SWEEP if tiny else W.SIZE_SWEEP
        done = {(n, s) for n, s, _ in runs}
        runs += [(n, s, "sweep") for n in base for s in table.get(n, ()) if (n, s) not in done]
    runs += [(n, "tiny" if tiny else W.WORKLOADS[n].default_size, "extra") for n in selected if n in W.EXTRAS]
    return runs


def _free(device: str, setup: str = "eager") -> None:
    if setup == "production":  # drop the compiled graphs of the workload just profiled
        torch._dynamo.reset()
    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _log(msg: str) -> None:
    print(f"[profile_run {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(out: str | os.PathLike, device: str | None = None, tiny: bool | None = None, names: list[str] | None = None,
        sweep: bool = True, extras: bool = True, wait: int = 1, warmup: int = 2, active: int = 3,
        timing_warmup: int = 3, trials: int = 10, budget_s: float = 330.0, overwrite: bool = False,
        rule: str = DEFAULT_RULE, setup: str = "eager") -> dict:
    """Profile and time every planned workload (:func:`plan`) in ``setup`` (``"eager"`` or ``"production"``,
    :data:`kbstudy.profiling.workloads.SETUPS`; recorded in each row's ``config``) and write the three record files
    under ``out``.

    ``device`` defaults to ``"cuda"`` when available, else ``"cpu"``; ``tiny`` defaults to ``True`` on CPU. Raises
    ``FileExistsError`` if ``out`` already holds records and ``overwrite`` is false. Returns a summary dict
    (counts of ok / error / skipped and the output paths).
    """
    if setup not in W.SETUPS:
        raise ValueError(f"unknown setup {setup!r}; known: {W.SETUPS}")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = torch.device(device).type == "cuda"
    tiny = (not cuda) if tiny is None else tiny
    out = Path(out)
    paths = {k: out / k for k in (KERNELS_FILE, WORKLOADS_FILE, NAMES_FILE)}
    if any(p.exists() for p in paths.values()):
        if not overwrite:
            raise FileExistsError(f"{out} already holds records; pass overwrite=True (--overwrite) to replace them")
        for p in paths.values():
            p.unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)

    prov = collect(device)  # after the device is chosen: collect() asks for the device name
    run_id = out.name
    level = "kernel" if cuda else "aten_op"
    basis = "device kernel time (torch.profiler, CUDA events)" if cuda else "ATen operator self CPU time (torch.profiler)"
    runs = plan(tiny, names, sweep, extras)
    _log(f"device={device} ({prov['hardware']}), torch {torch.__version__}, tiny={tiny}, setup={setup}, "
         f"{len(runs)} runs -> {out}")
    t_start = time.perf_counter()
    names_seen: dict[str, dict] = {}
    counts = {"ok": 0, "error": 0, "skipped": 0}
    add_cats = rule_categories(rule)

    for i, (name, size, role) in enumerate(runs, 1):
        spec = W.WORKLOADS[name]
        row = {
            "run": run_id, "workload": name, "size": size, "workload_key": f"{name}@{size}", "role": role,
            "domain": spec.domain, "mode": spec.mode, "device": device, "tiny": tiny, "level": level,
            "time_basis": basis, "status": None, "error": None,
            "profile_schedule": {"wait": wait, "warmup": warmup, "active": active},
            "addressable_rule": rule,
        }
        elapsed = time.perf_counter() - t_start
        if elapsed > budget_s:
            row.update(status="skipped", error=f"time budget of {budget_s:.0f} s spent ({elapsed:.0f} s elapsed)")
            counts["skipped"] += 1
            _log(f"[{i}/{len(runs)}] {name}@{size}: skipped (budget)")
            append_jsonl(paths[WORKLOADS_FILE], json.dumps({**row, **prov}, default=str))
            continue
        _log(f"[{i}/{len(runs)}] {name}@{size} ({role}): building")
        wl = None
        try:
            torch.manual_seed(0)
            t0 = time.perf_counter()
            wl = W.build(name, device, size=size, setup=setup)
            row.update(model=wl.model_name, precision=wl.precision, params=wl.params, items_per_step=wl.items_per_step,
                       tokens_per_step=wl.tokens_per_step, config=wl.config)
            row["build_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            res = profile_steps(wl.step, device, wait=wait, warmup=warmup, active=active)
            row["profile_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            row.update(time_steps(wl.step, device, warmup=timing_warmup, trials=trials))
            row["timing_s"] = time.perf_counter() - t0
            table = res.table
            total = float(table["time_us_per_step"].sum())
            by_cat = table.groupby("category")["time_us_per_step"].sum()
            shares = {c: float(by_cat.get(c, 0.0)) / total for c in CATEGORIES}
            by_source = dict.fromkeys(SOURCES, 0.0)  # how each row was sorted: name rule, op fallback, ...
            for n, top, t in zip(table["name"], table["top_op"], table["time_us_per_step"]):
                src = classify_op_source(n)[1] if level == "aten_op" else classify_kernel_source(n, top)[1]
                by_source[src] += float(t) / total
            row.update(
                status="ok", kernel_us_per_step=total, unattributed_us_per_step=res.unattributed_us,
                n_names=int(len(table)), category_shares=shares, other_share=shares["other"],
                source_shares=by_source, other_share_name_rules=by_source["op_fallback"] + by_source["none"],
                addressable_fraction=addressable_fraction(shares, add_cats),
            )
            for rec in table.to_dict("records"):
                append_jsonl(paths[KERNELS_FILE], json.dumps({
                    "run": run_id, "workload": name, "size": size, "workload_key": row["workload_key"], "role": role,
                    "device": device, "hardware": prov["hardware"], "level": level, **rec}, default=str))
                seen = names_seen.setdefault(rec["name"], {
                    "name": rec["name"], "category": rec["category"], "top_op": rec["top_op"],
                    "rule": (matching_rule(rec["name"]) or (None, None, None))[1], "workloads": [],
                    "max_share": 0.0})
                seen["workloads"].append(row["workload_key"])
                seen["max_share"] = max(seen["max_share"], rec["time_us_per_step"] / total)
            counts["ok"] += 1
            _log(f"[{i}/{len(runs)}] {name}@{size}: {len(table)} names, {total / 1e3:.2f} ms {level} time/step, "
                 f"step {row['step_ms_median']:.2f} ms, addressable {row['addressable_fraction']:.3f}, "
                 f"other {row['other_share']:.4f}, by name rules {row['other_share_name_rules']:.4f} "
                 f"({time.perf_counter() - t_start:.0f} s elapsed)")
        except Exception as exc:  # record and go on: one workload's failure must not lose the others
            row.update(status="error", error=f"{type(exc).__name__}: {exc}"[:2000],
                       traceback=traceback.format_exc()[-4000:])
            counts["error"] += 1
            _log(f"[{i}/{len(runs)}] {name}@{size}: ERROR {type(exc).__name__}: {str(exc)[:300]}")
        finally:
            del wl
            _free(device, setup)
        append_jsonl(paths[WORKLOADS_FILE], json.dumps({**row, **prov}, default=str))

    bundle = {
        "run": run_id, "level": level, "device": device, "hardware": prov["hardware"],
        "torch_version": prov.get("torch_version"), "cuda_version": prov.get("cuda_version"),
        "names": sorted(names_seen.values(), key=lambda d: (d["category"], d["name"])),
    }
    tmp = paths[NAMES_FILE].with_suffix(".json.tmp")
    tmp.write_text(json.dumps(bundle, indent=1, default=str))
    tmp.replace(paths[NAMES_FILE])
    _log(f"done in {time.perf_counter() - t_start:.0f} s: {counts}; {len(names_seen)} distinct names")
    return {**counts, "names": len(names_seen), **{k: str(v) for k, v in paths.items()}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kbstudy.profiling.profile_run", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output folder for kernels.jsonl, workloads.jsonl, kernel_names.json")
    p.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--tiny", dest="tiny", action="store_true", default=None, help="tiny configurations (CPU default)")
    g.add_argument("--full", dest="tiny", action="store_false", help="full configurations (GPU default)")
    p.add_argument("--workloads", default=None, help="comma-separated subset (default: the seven + extras)")
    p.add_argument("--no-sweep", dest="sweep", action="store_false", help="skip the transformer size sweep")
    p.add_argument("--no-extras", dest="extras", action="store_false", help="skip the extra workloads (ViT-B/16)")
    p.add_argument("--wait", type=int, default=1)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--active", type=int, default=3)
    p.add_argument("--timing-warmup", type=int, default=3)
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--budget-s", type=float, default=330.0, help="skip runs not started after this many seconds")
    p.add_argument("--rule", default=DEFAULT_RULE, help="addressable rule for the summary column")
    p.add_argument("--config", "--setup", dest="setup", default="eager", choices=W.SETUPS,
                   help="eager (as built) or production (torch.compile, default mode); one folder per setup")
    p.add_argument("--overwrite", action="store_true", help="replace records already in --out")
    a = p.parse_args(argv)
    summary = run(a.out, a.device, a.tiny, a.workloads.split(",") if a.workloads else None, a.sweep, a.extras,
                  a.wait, a.warmup, a.active, a.timing_warmup, a.trials, a.budget_s, a.overwrite, a.rule, a.setup)
    return 0 if summary["ok"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
