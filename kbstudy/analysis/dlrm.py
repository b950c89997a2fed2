"""Tables for notebook 4: per problem eager, ``torch.compile``, ours and the floor, read from run records.

Two layouts are read:

* ``evaluate_batch`` (:func:`kbstudy.suites.dlrm_bench.measurement_run.main`, the current one): ``evaluations.jsonl`` and
  ``references.jsonl`` in the :mod:`kbstudy.records.store` schema (both verdicts, timings), ``floors.jsonl`` (one floor per
  problem) and ``machine.json``. Per problem the record of our candidate (model configuration ``kbstudy-triton``) at
  the problem's precision (:func:`kbstudy.suites.dlrm_bench.problem_precision`) is used, the latest if there are several.
* ``preliminary`` (the benchmark's former runner, e.g. ``outputs/records/dlrm_bench/h200/preliminary``): floors and a
  self-check (relative L2 error against float64) in each evaluation record's ``metadata``, verdict fields null. Read
  as it is: ``correct`` is the self-check there, and ``kernelbench_correct``/``kbstudy_correct`` are empty.

Definitions (speedup = ratio of median times, > 1 means ours is faster):

* *correct*: both verdicts passed (KernelBench's and kbstudy's, all five trials); in the preliminary layout, the
  self-check passed;
* a *win* is a correct kernel faster than eager PyTorch (``speedup_vs_eager > 1``);
* *win rate* = wins / problems with a record (failures count as non-wins);
* *median speedup* is reported over all correct kernels and over the wins alone, since the paper's 1.552x does not say
  which of the two it is.

Launch-aware view (beside, never instead of, the floor): ``launch_ms`` is the median time of an empty Triton kernel
launch timed exactly as candidates are (:func:`kbstudy.suites.dlrm_bench.roofline.launch_latency_ms`; absent from machines
measured before it was recorded, and on a CPU); a problem is *launch-bound* when its floor is below
:data:`~kbstudy.suites.dlrm_bench.roofline.LAUNCH_BOUND_FACTOR` launches, so the 1.25x target is out of reach of any kernel
timed per call; ``ours_over_floor_plus_launch`` = ours / (floor + one launch). :func:`launch_gap` restates it per
memory-bound problem as the best ratio any kernel timed per call can reach, ``1 + launch / floor`` (the 1.25x target is
out of reach when the floor is below 4 launches), and :func:`floor_notes` says it in sentences, numbers from the
records.

Two runs of the same kernels' problems (e.g. the H200 records before and after a kernel rework) are compared per
problem by :func:`compare_runs`; :func:`kernel_moves` and :func:`move_notes` add which kernel files the two runs share
(same ``candidate_sha256``, ours or a variant): how far those moved is the band a changed kernel must leave before a
difference between the runs says anything about it.

Variants (other model configurations in the same folder, beside ours) are in :mod:`kbstudy.analysis.dlrm_variants`;
the device-time view (the view the 1.25x target is judged by, beside the per-call time that speedups use) is in
:mod:`kbstudy.analysis.dlrm_device`. Both read the records through :func:`latest_records`.

Gather bandwidth (:func:`achieved_bandwidth`, :func:`gather_notes`): the machine's ``details.gather_bytes_per_s``
(``torch.index_select`` of random 512-byte rows, :func:`kbstudy.suites.dlrm_bench.roofline._measure_gather`) beside the copy
bandwidth and beside what our kernels reach (compulsory bytes / our median time). No floor uses it.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pandas as pd

from kbstudy.records.frames import load_frames
from kbstudy.suites.dlrm_bench import (
    MODEL_CONFIG,
    PAPER_MEDIAN_SPEEDUP,
    PAPER_WIN_RATE,
    PROBLEMS_DIR,
    problem_precision,
)
from kbstudy.suites.dlrm_bench.roofline import LAUNCH_BOUND_FACTOR, launch_bound, launch_latency_ms

#: The memory-bound target of DLRM-Bench: our kernel within this factor of the floor.
FLOOR_TARGET = 1.25
#: The columns of :func:`load_run`, in order.
COLUMNS = ("problem_id", "problem", "precision", "bound", "eager_ms", "compile_ms", "ours_ms", "floor_ms",
           "ours_q1_ms", "ours_q3_ms", "speedup_vs_eager", "speedup_vs_compile", "ours_over_floor", "eager_over_floor",
           "kernelbench_correct", "kbstudy_correct", "correct", "rel_l2_error", "outcome", "error", "launch_ms",
           "launch_bound", "ours_over_floor_plus_launch", "speedup_significant", "eager_q1_ms", "eager_q3_ms")
#: Its numeric columns: float, NaN where the record has no value.
NUMERIC_COLUMNS = ("eager_ms", "compile_ms", "ours_ms", "floor_ms", "ours_q1_ms", "ours_q3_ms", "speedup_vs_eager",
                   "speedup_vs_compile", "ours_over_floor", "eager_over_floor", "rel_l2_error", "launch_ms",
                   "ours_over_floor_plus_launch", "eager_q1_ms", "eager_q3_ms")
#: The two record layouts (see the module docstring).
LAYOUTS = ("evaluate_batch", "preliminary")
#: The problems that gather (or scatter) random embedding rows (the gather bandwidth's view applies to them).
GATHER_PROBLEMS = (1, 2, 3, 4, 5, 6)
#: The columns of :func:`kernel_moves`, in order.
MOVE_COLUMNS = ("problem_id", "problem", "model_config", "same_file", "before_ms", "after_ms", "delta_us",
                "after_over_before")


def run_layout(folder: str | Path) -> str:
    """``"evaluate_batch"`` if the folder has ``floors.jsonl`` or verdicts in its records, else ``"preliminary"``.
    Raises ``FileNotFoundError`` if the folder has no ``evaluations.jsonl``."""
    folder = Path(folder)
    if not (folder / "evaluations.jsonl").exists():
        raise FileNotFoundError(f"{folder}: no evaluations.jsonl")
    if (folder / "floors.jsonl").exists():
        return "evaluate_batch"
    verdicts = _evaluations(folder)[["kernelbench_correct", "kbstudy_correct"]]
    return "evaluate_batch" if bool(verdicts.notna().to_numpy().any()) else "preliminary"


def _evaluations(folder: str | Path) -> pd.DataFrame:
    """The folder's evaluation records (one column per schema field)."""
    return load_frames([folder]).evaluations.drop(columns="records_folder")


def load_floors(folder: str | Path) -> pd.DataFrame:
    """``floors.jsonl`` as a frame (empty, with its key columns, when absent)."""
    path = Path(folder) / "floors.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    return pd.DataFrame(rows, columns=None if rows else ["problem_id", "problem_sha256", "size_scale", "floor_ms",
                                                         "bound", "machine_key"])


def _problem_label(name: str) -> str:
    return name.removesuffix(".py").split("_", 1)[1]


def _ratio(a, b):
    return a / b if a and b and a == a and b == b else None


def _as_flag(value):
    """A record's boolean field as ``True``/``False``, ``None`` when absent (records before schema v2 have no
    speedup intervals, so no significance)."""
    if value is None or value != value:
        return None
    return bool(value)


def _select_records(ev: pd.DataFrame, model_config: str | None = MODEL_CONFIG) -> pd.DataFrame:
    """Our candidate's record per problem at the problem's precision, the latest one if there are several
    (``model_config=None``: the latest per problem and model configuration, every configuration)."""
    if model_config is not None:
        ev = ev[ev["model_config"] == model_config]
    ev = ev[[prec == problem_precision(pid) for pid, prec in zip(ev["problem_id"], ev["precision"])]]
    ev = ev.sort_values("created_utc", na_position="first", kind="stable")
    return ev.groupby(["problem_id", "model_config"], as_index=False).tail(1)


def _floor_row(floors: pd.DataFrame, record):
    """The ``floors.jsonl`` row of a record's problem (same id, source hash and size scale; the last if several), or
    ``None``."""
    match = floors[(floors["problem_id"] == record["problem_id"])
                   & (floors["problem_sha256"] == record["problem_sha256"])
                   & (floors["size_scale"] == record["size_scale"])]
    return match.iloc[-1] if len(match) else None


def _floor_of(floors: pd.DataFrame, record) -> float | None:
    row = _floor_row(floors, record)
    return None if row is None else float(row["floor_ms"])


def _floor_and_bound(floors: pd.DataFrame, record, layout: str) -> tuple:
    """``(floor_ms, bound)`` of a record: from ``floors.jsonl`` (layout ``evaluate_batch``) or from the record's own
    ``metadata`` (``preliminary``); ``(None, None)`` where there is none."""
    if layout == "preliminary":
        meta = record["metadata"] or {}
        return meta.get("floor_ms"), meta.get("bound")
    row = _floor_row(floors, record)
    return (None, None) if row is None else (float(row["floor_ms"]), row["bound"])


def latest_records(folder: str | Path) -> pd.DataFrame:
    """Every model configuration's record per problem (at the problem's precision, the latest of each; ours and any
    variants), as :func:`kbstudy.records.frames.load_frames` reads them. A preliminary folder's records are returned
    as they are. Raises ``FileNotFoundError`` if the folder has no ``evaluations.jsonl``."""
    layout = run_layout(folder)
    ev = _evaluations(folder)
    if layout == "evaluate_batch":
        ev = _select_records(ev, model_config=None)
    return ev.sort_values(["problem_id", "model_config"], kind="stable").reset_index(drop=True)


def load_run(folder: str | Path) -> tuple[pd.DataFrame, dict]:
    """One row per problem (columns :data:`COLUMNS`) and the machine dict from ``machine.json`` (``{}`` if absent).

    Either layout (:func:`run_layout`). Raises ``FileNotFoundError`` if the folder has no ``evaluations.jsonl``.
    """
    folder = Path(folder)
    layout = run_layout(folder)
    machine = json.loads((folder / "machine.json").read_text()) if (folder / "machine.json").exists() else {}
    ev = _evaluations(folder)
    floors = load_floors(folder)
    launch = launch_latency_ms(machine)
    if layout == "evaluate_batch":
        ev = _select_records(ev)
    rows = []
    for _, r in ev.sort_values("problem_id").iterrows():
        floor, bound = _floor_and_bound(floors, r, layout)
        if layout == "preliminary":
            kb = kbs = None
            correct = (r["metadata"] or {}).get("check_passed")
        else:
            kb, kbs = r["kernelbench_correct"], r["kbstudy_correct"]
            correct = bool(kb is True and kbs is True) if r["outcome"] == "evaluated" else False
        ours, eager, comp = r["candidate_ms_median"], r["eager_ms_median"], r["compile_ms_median"]
        rows.append({
            "problem_id": int(r["problem_id"]), "problem": _problem_label(r["problem_name"]),
            "precision": r["precision"], "bound": bound, "eager_ms": eager, "compile_ms": comp, "ours_ms": ours,
            "floor_ms": floor, "ours_q1_ms": r["candidate_ms_q1"], "ours_q3_ms": r["candidate_ms_q3"],
            "speedup_vs_eager": r["speedup_vs_eager"], "speedup_vs_compile": r["speedup_vs_compile"],
            "ours_over_floor": _ratio(ours, floor), "eager_over_floor": _ratio(eager, floor),
            "kernelbench_correct": kb, "kbstudy_correct": kbs, "correct": correct,
            "rel_l2_error": r["rel_l2_error"], "outcome": r["outcome"], "error": r["error_message"],
            "launch_ms": launch, "launch_bound": launch_bound(floor, launch),
            "ours_over_floor_plus_launch": _ratio(ours, floor + launch) if floor and launch else None,
            "speedup_significant": _as_flag(r.get("speedup_significant")),
            "eager_q1_ms": r.get("eager_ms_q1"), "eager_q3_ms": r.get("eager_ms_q3"),
        })
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    for col in NUMERIC_COLUMNS:
        table[col] = pd.to_numeric(table[col], errors="coerce").astype(float)
    return table, machine


def expected_problems() -> pd.DataFrame:
    """The twelve DLRM-Bench problems (``problem_id``, ``problem``) from the file names in ``problems/``."""
    rows = []
    for path in PROBLEMS_DIR.glob("*.py"):
        pid, _, name = path.stem.partition("_")
        if pid.isdigit():
            rows.append({"problem_id": int(pid), "problem": name})
    return pd.DataFrame(rows, columns=["problem_id", "problem"]).sort_values("problem_id").reset_index(drop=True)


def missing(table: pd.DataFrame, machine: dict) -> list[str]:
    """What a run's records lack, one sentence each (empty when nothing is missing): ``machine.json``, problems
    without a record, records that are not ``evaluated`` or not correct, and absent times or floors."""
    notes = []
    if not machine:
        notes.append("machine.json absent: no measured bandwidth or matrix rate")
    expected = expected_problems()
    absent = expected[~expected["problem_id"].isin(table["problem_id"])]
    if len(absent):
        notes.append(f"{len(absent)} of {len(expected)} problems have no record: "
                     + ", ".join(f"{r.problem_id} {r.problem}" for r in absent.itertuples()))

    def _list(rows: pd.DataFrame) -> str:
        return ", ".join(str(i) for i in rows["problem_id"])

    bad = table[table["outcome"] != "evaluated"]
    if len(bad):
        notes.append(f"{len(bad)} records not evaluated (problems {_list(bad)}): "
                     + ", ".join(sorted(set(bad["outcome"].astype(str)))))
    failed = table[table["correct"] != True]  # noqa: E712  (None: no check recorded)
    if len(failed):
        notes.append(f"{len(failed)} kernels not correct (problems {_list(failed)})")
    for col, what in (("eager_ms", "eager times"), ("compile_ms", "torch.compile times"), ("ours_ms", "kernel times"),
                      ("floor_ms", "floors")):
        gone = table[table[col].isna()]
        if len(gone):
            notes.append(f"{what} absent for {len(gone)} of {len(table)} problems (problems {_list(gone)})")
    return notes


def _count_true(column: pd.Series):
    """How many entries are ``True``; ``None`` when none was recorded (the preliminary layout has no verdicts)."""
    if column.isna().all():
        return None
    return int((column == True).sum())  # noqa: E712


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Win rate and median speedups of ours beside the paper's (41.7 %, 1.552x), plus the floor target's tally and
    the launch-aware view (launch latency, launch-bound problems, memory-bound problems within the target of
    floor + one launch; ``None`` when the machine has no launch latency)."""
    ok = table[(table["correct"] == True) & table["speedup_vs_eager"].notna()]  # noqa: E712
    wins = ok[ok["speedup_vs_eager"] > 1]
    mem = table[table["bound"] == "memory"]
    within = mem[mem["ours_over_floor"].notna() & (mem["ours_over_floor"] <= FLOOR_TARGET)]
    rows = [
        ("problems", len(table), 12),
        ("KernelBench verdict passed", _count_true(table["kernelbench_correct"]), None),
        ("kbstudy verdict passed", _count_true(table["kbstudy_correct"]), None),
        ("correct", _count_true(table["correct"]), None),
        ("wins over eager", len(wins), None),
        ("win rate over eager", len(wins) / len(table) if len(table) else None, PAPER_WIN_RATE),
        ("median speedup vs eager, correct kernels", statistics.median(ok["speedup_vs_eager"]) if len(ok) else None,
         PAPER_MEDIAN_SPEEDUP),
        ("median speedup vs eager, wins only", statistics.median(wins["speedup_vs_eager"]) if len(wins) else None,
         PAPER_MEDIAN_SPEEDUP),
        ("wins over eager, significant", _count_true(wins["speedup_significant"]) if len(wins) else None, None),
        ("wins over eager, interquartile ranges disjoint", int((wins["ours_q3_ms"] < wins["eager_q1_ms"]).sum())
         if len(wins) and wins["eager_q1_ms"].notna().all() else None, None),
        ("wins over torch.compile", int((ok["speedup_vs_compile"] > 1).sum()), None),
        ("memory-bound problems", len(mem), None),
        (f"memory-bound within {FLOOR_TARGET}x of floor (per call)", len(within), None),
    ]
    launch = table["launch_ms"].dropna()
    measured = len(launch) > 0
    near = mem[mem["ours_over_floor_plus_launch"].notna() & (mem["ours_over_floor_plus_launch"] <= FLOOR_TARGET)]
    rows += [
        ("launch latency, empty Triton kernel (ms)", float(launch.iloc[0]) if measured else None, None),
        (f"launch-bound problems (floor < {LAUNCH_BOUND_FACTOR:g} launches)",
         int((table["launch_bound"] == True).sum()) if measured else None, None),  # noqa: E712
        (f"memory-bound within {FLOOR_TARGET}x of floor + 1 launch (per call)", len(near) if measured else None,
         None),
    ]
    return pd.DataFrame(rows, columns=["quantity", "ours", "paper"])


def long_times(table: pd.DataFrame) -> pd.DataFrame:
    """The four times per problem in long form (problem, variant, ms) for a grouped bar chart."""
    cols = {"eager_ms": "eager", "compile_ms": "torch.compile", "ours_ms": "ours (Triton)", "floor_ms": "floor"}
    out = table.melt(id_vars=["problem_id", "problem"], value_vars=list(cols), var_name="variant", value_name="ms")
    out["variant"] = out["variant"].map(cols)
    out["label"] = out["problem_id"].astype(str) + " " + out["problem"]
    return out.dropna(subset=["ms"])


def launch_view(table: pd.DataFrame) -> pd.DataFrame:
    """Per problem the floor beside one launch latency: ``problem_id``, ``problem``, ``bound``, ``floor_ms``,
    ``launch_ms``, ``floor_in_launches`` (floor / launch), ``launch_bound``, ``ours_over_floor`` and
    ``ours_over_floor_plus_launch`` (NaN / None where the machine has no launch latency)."""
    view = table[["problem_id", "problem", "bound", "floor_ms", "launch_ms", "launch_bound", "ours_over_floor",
                  "ours_over_floor_plus_launch"]].copy()
    view.insert(5, "floor_in_launches", view["floor_ms"] / view["launch_ms"])
    return view


def launch_latencies(machine: dict) -> dict:
    """The medians (ms) of the machine's two launch measurements (:func:`kbstudy.suites.dlrm_bench.roofline.measure_machine`,
    timed as candidates are): ``triton_ms`` (an empty Triton kernel, ``details["launch_triton_ms"]``) and
    ``torch_ms`` (a one-element ``zero_()``, ``details["launch_torch_ms"]``); ``None`` where not measured."""
    details = (machine or {}).get("details") or {}
    torch_samples = details.get("launch_torch_ms")
    return {"triton_ms": launch_latency_ms(machine),
            "torch_ms": statistics.median(torch_samples) if torch_samples else None}


def launch_gap(table: pd.DataFrame) -> pd.DataFrame:
    """Per memory-bound problem, the floor against one launch: ``floor_ms``, ``ours_ms``, ``ours_over_floor``,
    ``best_ratio_one_launch`` (``1 + launch / floor``: the best ratio to the floor any kernel timed per call can
    reach, its own time aside), ``target_reachable`` (that best ratio within :data:`FLOOR_TARGET`),
    ``gap_in_launches`` (``(ours - floor) / launch``) and ``ours_over_floor_plus_launch``. Launch columns NaN / None
    where the machine has no launch latency."""
    mem = table[table["bound"] == "memory"]
    out = mem[["problem_id", "problem", "floor_ms", "ours_ms", "ours_over_floor", "launch_ms"]].copy()
    out["best_ratio_one_launch"] = 1 + out["launch_ms"] / out["floor_ms"]
    out["target_reachable"] = [None if b != b else bool(b <= FLOOR_TARGET) for b in out["best_ratio_one_launch"]]
    out["gap_in_launches"] = (out["ours_ms"] - out["floor_ms"]) / out["launch_ms"]
    out["ours_over_floor_plus_launch"] = mem["ours_over_floor_plus_launch"]
    return out.reset_index(drop=True)


def _ids(rows: pd.DataFrame) -> str:
    return ", ".join(str(i) for i in rows["problem_id"])


def floor_notes(table: pd.DataFrame, machine: dict) -> list[str]:
    """The floor target in sentences, every number from the records: which memory-bound problems are within
    :data:`FLOOR_TARGET` of their floor, and how much of the gap one launch (the machine's measured latency)
    explains."""
    gap = launch_gap(table)
    timed = gap[gap["ours_over_floor"].notna()]
    if not len(timed):
        return ["no memory-bound problem has both a kernel time and a floor"]
    within = timed[timed["ours_over_floor"] <= FLOOR_TARGET]
    best = timed.sort_values("ours_over_floor").head(2)
    notes = [f"memory-bound problems within {FLOOR_TARGET}x of the floor: "
             + (", ".join(f"{r.problem_id} {r.problem} ({r.ours_over_floor:.2f}x)" for r in within.itertuples())
                if len(within) else "none")
             + " (closest: " + ", ".join(f"{r.problem_id} at {r.ours_over_floor:.2f}x" for r in best.itertuples())
             + f"; {len(timed)} memory-bound problems)"]
    lat = launch_latencies(machine)
    if lat["triton_ms"] is None:
        notes.append("launch latency not measured for this machine: the gap to the floor is not split")
        return notes
    torch_part = f", a one-element torch op {lat['torch_ms'] * 1e3:.1f} us" if lat["torch_ms"] is not None else ""
    notes.append(f"one launch, timed as candidates are: an empty Triton kernel {lat['triton_ms'] * 1e3:.1f} us"
                 f"{torch_part} (medians of machine.json's details.launch_triton_ms / launch_torch_ms); a problem "
                 f"needs a floor of at least {1 / (FLOOR_TARGET - 1):g} launches "
                 f"({lat['triton_ms'] / (FLOOR_TARGET - 1) * 1e3:.1f} us) for {FLOOR_TARGET}x to be reachable at all")
    out_of_reach = timed[timed["target_reachable"] == False]  # noqa: E712
    if len(out_of_reach):
        notes.append(
            f"out of reach for {len(out_of_reach)} (problems {_ids(out_of_reach)}): floors "
            f"{out_of_reach['floor_ms'].min() * 1e3:.1f}-{out_of_reach['floor_ms'].max() * 1e3:.1f} us, so a kernel "
            f"timed per call reaches at best {out_of_reach['best_ratio_one_launch'].min():.2f}-"
            f"{out_of_reach['best_ratio_one_launch'].max():.2f}x; against floor + one launch ours are "
            f"{out_of_reach['ours_over_floor_plus_launch'].min():.2f}-"
            f"{out_of_reach['ours_over_floor_plus_launch'].max():.2f}x")
    reachable = timed[timed["target_reachable"] == True]  # noqa: E712
    if len(reachable):
        notes.append(
            f"reachable for {len(reachable)} (problems {_ids(reachable)}): floors "
            f"{reachable['floor_ms'].min() * 1e3:.1f}-{reachable['floor_ms'].max() * 1e3:.1f} us, one launch costs "
            f"only {reachable['best_ratio_one_launch'].min():.2f}-{reachable['best_ratio_one_launch'].max():.2f}x; "
            f"ours are {reachable['ours_over_floor_plus_launch'].min():.2f}-"
            f"{reachable['ours_over_floor_plus_launch'].max():.2f}x of floor + one launch: ours exceed the floor by "
            f"{reachable['gap_in_launches'].min():.1f}-{reachable['gap_in_launches'].max():.1f} launches' worth, of "
            f"which one launch explains one; the rest is the kernels' own (bandwidth below the copy's, and further "
            f"launches or library work where a kernel has them)")
    return notes


def _finite(value) -> float | None:
    """A record's or floor row's number as a float, ``None`` where absent (``None``, or NaN in a frame)."""
    return float(value) if isinstance(value, (int, float)) and value == value else None


def compare_runs(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Per problem present in both tables (:func:`load_run`): our kernel's median time before and after
    (``before_ms``, ``after_ms``, ``after_over_before``: below 1 means faster now), correctness in each, ratio to
    each run's floor, and each run's eager time (the baseline moves between runs too: ``eager_after_over_before``)."""
    cols = ["problem_id", "problem", "ours_ms", "correct", "ours_over_floor", "eager_ms", "speedup_vs_eager"]
    both = before[cols].merge(after[cols], on=["problem_id", "problem"], suffixes=("_before", "_after"))
    out = pd.DataFrame({
        "problem_id": both["problem_id"], "problem": both["problem"],
        "before_ms": both["ours_ms_before"], "after_ms": both["ours_ms_after"],
        "after_over_before": both["ours_ms_after"] / both["ours_ms_before"],
        "before_correct": both["correct_before"], "after_correct": both["correct_after"],
        "before_over_floor": both["ours_over_floor_before"], "after_over_floor": both["ours_over_floor_after"],
        "before_speedup_vs_eager": both["speedup_vs_eager_before"],
        "after_speedup_vs_eager": both["speedup_vs_eager_after"],
        "eager_after_over_before": both["eager_ms_after"] / both["eager_ms_before"],
    })
    return out.sort_values("problem_id").reset_index(drop=True)


def kernel_moves(before_folder: str | Path, after_folder: str | Path) -> pd.DataFrame:
    """Per record of the later run (ours and variants; columns :data:`MOVE_COLUMNS`): ``same_file`` when the earlier
    run holds a record of the same problem with the same ``candidate_sha256`` (any model configuration), whose median
    is then ``before_ms``; otherwise ``before_ms`` is our kernel's median in the earlier run (the file the record
    replaces). ``delta_us`` = after - before in microseconds, ``after_over_before`` their ratio (below 1: faster now).
    Records without a counterpart in the earlier run are left out."""
    before, after = latest_records(before_folder), latest_records(after_folder)
    by_file = {(int(r.problem_id), r.candidate_sha256): r.candidate_ms_median for r in before.itertuples()}
    ours_before = {int(r.problem_id): r.candidate_ms_median for r in before.itertuples()
                   if r.model_config == MODEL_CONFIG}
    rows = []
    for r in after.itertuples():
        pid = int(r.problem_id)
        same = (pid, r.candidate_sha256) in by_file
        prev = by_file[(pid, r.candidate_sha256)] if same else ours_before.get(pid)
        if prev is None or prev != prev:
            continue
        rows.append({"problem_id": pid, "problem": _problem_label(r.problem_name), "model_config": r.model_config,
                     "same_file": same, "before_ms": prev, "after_ms": r.candidate_ms_median,
                     "delta_us": (r.candidate_ms_median - prev) * 1e3,
                     "after_over_before": _ratio(r.candidate_ms_median, prev)})
    out = pd.DataFrame(rows, columns=list(MOVE_COLUMNS))
    for col in ("before_ms", "after_ms", "delta_us", "after_over_before"):
        out[col] = pd.to_numeric(out[col], errors="coerce").astype(float)
    return out


def _label(row) -> str:
    return f"{row.problem_id}" + ("" if row.model_config == MODEL_CONFIG else f" ({row.model_config})")


def move_notes(moves: pd.DataFrame) -> list[str]:
    """:func:`kernel_moves` in sentences: how far the kernel files present in both runs moved (the band), and for each
    changed kernel its change and whether it lies inside that band (no evidence either way) or outside it."""
    same, changed = moves[moves["same_file"]], moves[~moves["same_file"]]
    if not len(same):
        notes = ["no kernel file is in both runs: there is no band to judge a change by"]
        lo = hi = None
    else:
        lo, hi = same["delta_us"].min(), same["delta_us"].max()
        files = ", ".join(_label(r) for r in same.itertuples())
        notes = [(f"kernel files in both runs: {len(same)} (problems {files}); they moved {lo:+.0f} to {hi:+.0f} us "
                  f"({same['after_over_before'].min():.2f}-{same['after_over_before'].max():.2f}x), the band a "
                  f"changed kernel must leave")]
    for r in changed.itertuples():
        where = ""
        if lo is not None:
            where = (": inside the band" if lo <= r.delta_us <= hi
                     else (": below the band" if r.delta_us < lo else ": above the band"))
        notes.append(f"changed kernel {_label(r)}: {r.before_ms:.3f} -> {r.after_ms:.3f} ms ({r.delta_us:+.0f} us, "
                     f"{r.after_over_before:.2f}x){where}")
    return notes


def gather_bandwidth(machine: dict) -> float | None:
    """The machine's measured gather bandwidth (bytes/s, ``details.gather_bytes_per_s``); ``None`` where the machine
    was measured before it was recorded."""
    value = ((machine or {}).get("details") or {}).get("gather_bytes_per_s")
    return float(value) if value else None


def achieved_bandwidth(folder: str | Path) -> pd.DataFrame:
    """Per memory-bound problem: compulsory ``bytes`` (``floors.jsonl``), our median, what that is as a bandwidth
    (``achieved_bytes_per_s`` = bytes / ours) and as fractions of the copy bandwidth (``over_copy``, = floor / ours)
    and of the gather bandwidth (``over_gather``; NaN without one), whether the problem gathers rows
    (:data:`GATHER_PROBLEMS`) and ``ours_over_gather_floor`` = ours / (bytes / gather bandwidth): what ours / floor
    would be were the floor taken at the gather bandwidth (it is not; below 1 means ours beats that rate)."""
    folder = Path(folder)
    table, machine = load_run(folder)
    floors = load_floors(folder)
    copy_bw = (machine or {}).get("bandwidth_bytes_per_s")
    gather_bw = gather_bandwidth(machine)
    rows = []
    for r in table[table["bound"] == "memory"].itertuples():
        match = floors[floors["problem_id"] == r.problem_id]
        nbytes = float(match["bytes"].iloc[-1]) if len(match) and "bytes" in match else float("nan")
        achieved = nbytes / (r.ours_ms * 1e-3) if r.ours_ms == r.ours_ms and r.ours_ms else float("nan")
        rows.append({"problem_id": r.problem_id, "problem": r.problem, "gathers": r.problem_id in GATHER_PROBLEMS,
                     "bytes": nbytes, "ours_ms": r.ours_ms, "achieved_bytes_per_s": achieved,
                     "over_copy": achieved / copy_bw if copy_bw else float("nan"),
                     "over_gather": achieved / gather_bw if gather_bw else float("nan"),
                     "ours_over_gather_floor": gather_bw / achieved if gather_bw else float("nan")})
    return pd.DataFrame(rows, columns=["problem_id", "problem", "gathers", "bytes", "ours_ms", "achieved_bytes_per_s",
                                       "over_copy", "over_gather", "ours_over_gather_floor"])


def gather_notes(bandwidth: pd.DataFrame, machine: dict) -> list[str]:
    """The gather bandwidth in sentences (numbers from ``machine.json`` and :func:`achieved_bandwidth`): its value
    against the copy's, and which of our gather kernels reach more than it in compulsory bytes per second."""
    gather_bw = gather_bandwidth(machine)
    if gather_bw is None:
        return ["gather bandwidth not measured for this machine (machine.json predates it)"]
    details = machine.get("details") or {}
    copy_bw = machine["bandwidth_bytes_per_s"]
    notes = [(f"gather bandwidth (index_select of {details.get('gather_n', 0):,} random "
              f"{details.get('gather_row_bytes', 0)}-byte rows of a {details.get('gather_rows', 0):,}-row table, "
              f"read + written bytes, fastest call): {gather_bw / 1e9:.1f} GB/s = {gather_bw / copy_bw:.3f} of the "
              f"copy bandwidth ({copy_bw / 1e9:.1f} GB/s)")]
    gathers = bandwidth[bandwidth["gathers"] & bandwidth["over_gather"].notna()]
    above = gathers[gathers["over_gather"] > 1]
    if len(gathers):
        notes.append("our gather kernels in compulsory bytes per second: "
                     + ", ".join(f"{r.problem_id}: {r.achieved_bytes_per_s / 1e9:.0f} GB/s ({r.over_gather:.2f}x the "
                                 f"gather bandwidth)" for r in gathers.itertuples()))
        notes.append(("above the gather bandwidth: " + ", ".join(str(i) for i in above["problem_id"])
                      + ", so index_select's rate is no ceiling for a gather kernel here; a floor taken at it would "
                        "put these kernels below their floor")
                     if len(above) else "none of our gather kernels exceeds the gather bandwidth")
    return notes
