"""What ``kbstudy calibrate`` runs: the null candidates evaluated on every problem, one record folder per precision
(:func:`run_calibration`), the problems split between calibration lanes that share a GPU (:func:`assign_lanes`) and
selected by their size on PyTorch's ``meta`` device (:func:`problem_footprint`, :func:`select_by_footprint`).

The calibration rule and its findings (which null must fail, which must pass, what a breach is) are in
:mod:`kbstudy.analysis.calibration`; the report each precision prints is read as notebook 02 reads the records
(:func:`kbstudy.analysis.audit.folder_findings`).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Callable, Iterable, NamedTuple, Sequence

from torch.utils.flop_counter import FlopCounterMode

from kbstudy.analysis.audit import folder_findings
from kbstudy.analysis.calibration import latest_per, print_calibration
from kbstudy.harness.candidates import null_candidates
from kbstudy.harness.config import EvalConfig, hardware_label, resolve_device
from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.harness.problems import scale_source
from kbstudy.records.store import RecordStore, append_jsonl, iter_jsonl


class CalibrationTotals(NamedTuple):
    """What :func:`run_calibration` found over its precisions: ``violations`` of the calibration rule (must be 0), and
    ``not_evaluated`` null records (latest per null and problem) whose outcome is not ``evaluated`` (a machine
    failure, or a problem the null or the reference cannot run): no verdict, so not covered by the rule."""

    violations: int
    not_evaluated: int


def complete_problems(evaluations, kinds: Sequence[str], size_scale: float, hardware: str) -> set[str]:
    """The ``problem_sha256`` of problems whose latest record of every null kind in ``kinds`` (without the ``null:``
    prefix) at ``size_scale`` on ``hardware`` is ``evaluated``, whatever checks version made it (what
    ``kbstudy calibrate --skip-complete`` leaves out, so a calibration begun under an older version is completed
    rather than redone). ``evaluations``: a frame of evaluation records."""
    if not len(evaluations):
        return set()
    ev = evaluations[evaluations.model_config.isin([f"null:{k}" for k in kinds])
                     & evaluations.size_scale.eq(float(size_scale)) & evaluations.hardware.eq(hardware)]
    latest = latest_per(ev, ["problem_sha256", "model_config"])
    done = latest[latest.outcome.eq("evaluated")].groupby("problem_sha256").model_config.nunique()
    return set(done[done >= len(set(kinds))].index)


def run_calibration(problems: Sequence, out: str | Path, precisions: Iterable[str], *, nulls: Sequence[str],
                    device: str = "auto", size_scale: float = 1.0, trials: int = 5, run_timeout_s: float = 300.0,
                    cache_dir: str = ".cache/kbstudy", progress: bool = True,
                    echo: Callable[[str], None] = print, selection: list[dict] | None = None,
                    retry_outcomes: Sequence[str] = (), skip_complete: bool = False,
                    evaluate: Callable = evaluate_batch) -> CalibrationTotals:
    """Evaluate ``null:reference`` and ``nulls`` on every problem, one record folder per precision
    (``<out>-<precision>``), through :func:`kbstudy.harness.orchestrator.evaluate_batch` with no timing (calibration times
    nothing); print each precision's findings on ``problems`` (:func:`kbstudy.analysis.calibration.print_calibration`; the folder may hold others,
    e.g. another lane's).

    Args:
        problems: :class:`kbstudy.harness.problems.Problem` objects (KernelBench or DLRM-Bench).
        out: folder prefix; records go to ``<out.parent>/<out.name>-<precision>`` (resumed if present).
        precisions: ``fp32``, ``fp16`` and/or ``bf16``.
        nulls: null kinds (``kbstudy.harness.candidates.NULL_CANDIDATES``) to run beside ``reference``.
        device, size_scale, trials, run_timeout_s, cache_dir, progress: as :class:`kbstudy.harness.orchestrator.EvalConfig`.
        echo: where progress lines go.
        selection: the report of :func:`select_by_footprint`, if the problems were selected by it: written as
            ``selection.jsonl`` (one line per problem considered, sorted keys) into each precision's folder.
        retry_outcomes: outcomes whose records are evaluated again (``EvalConfig.retry_outcomes``), e.g.
            ``("out_of_memory", "crashed")`` after a run whose lanes shared one GPU.
        skip_complete: leave out the problems :func:`complete_problems` finds in the precision's folder (made on
            this device's hardware at this size, under any checks version).
        evaluate: the batch runner, ``evaluate_batch`` or one with its signature (``kbstudy calibrate --ray``:
            :func:`kbstudy.pipeline.ray_batch.evaluate_batch_ray` bound to a cluster address).
    Returns :class:`CalibrationTotals` over the precisions: the violations (:func:`kbstudy.analysis.calibration.calibration_findings`; excused
    findings on flagged problems are not counted) and the null records not evaluated. Raises ``KeyError`` for an
    unknown null kind and ``RuntimeError`` from ``evaluate_batch``.
    """
    out = Path(out)
    kinds = ("reference",) + tuple(k for k in nulls if k != "reference")
    cands = [c for p in problems for c in null_candidates(p, kinds)]
    failures = not_evaluated = 0
    for prec in precisions:
        folder = out.parent / f"{out.name}-{prec}"
        store = RecordStore(folder)
        if selection is not None:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "selection.jsonl").write_text("".join(json.dumps(row, sort_keys=True) + "\n"
                                                            for row in selection))
        cfg = EvalConfig(run=folder.name, precision=prec, device=device, size_scale=size_scale, trials=trials,
                         compile_baseline=False, eager_baseline=False, time_candidates=False,
                         run_timeout_s=run_timeout_s, cache_dir=str(cache_dir), progress=progress,
                         retry_outcomes=tuple(retry_outcomes))
        todo = cands
        if skip_complete:
            done = complete_problems(store.evaluations_frame(), kinds, size_scale,
                                     hardware_label(resolve_device(device)))
            left = [p for p in problems if p.sha256 not in done]
            todo = [c for p in left for c in null_candidates(p, kinds)]
            echo(f"{folder}: {len(problems) - len(left)} problems already complete, {len(left)} to calibrate")
        summary = evaluate(problems, todo, store, cfg)
        echo(f"{folder}: {summary.written} records written, {summary.already_done} already present, "
             f"{summary.seconds:.1f} s")
        findings = folder_findings(store)
        if len(findings):  # this call's problems only: lanes share a folder, and each reports (and fails) on its own
            ours = {(int(p.level), int(p.problem_id)) for p in problems}
            findings = findings[[(int(lv), int(pid)) in ours for lv, pid in zip(findings.level, findings.problem_id)]]
        print_calibration(findings, f"calibration {prec}, size scale {size_scale}")
        if len(findings):
            failures += int(findings["violation"].sum())
            not_evaluated += int((findings["outcome"] != "evaluated").sum())
    return CalibrationTotals(failures, not_evaluated)


# ------------------------------------------------------------------------------------------------ problem selection


def problem_footprint(problem, size_scale: float = 1.0) -> dict:
    """The size of one forward call of ``problem`` at ``size_scale``, measured on PyTorch's ``meta`` device (shapes
    only: no memory, no arithmetic, the same answer on any machine).

    The scaled source (:func:`kbstudy.harness.problems.scale_source`) is executed in a fresh namespace of this process, its
    ``Model`` built and called under ``torch.device("meta")`` with ``torch.utils.flop_counter.FlopCounterMode``
    counting (matmul, convolution and attention FLOPs, 2 per multiply-add).

    Returns ``{"output_numel": int|None (first output's elements), "input_numel": int|None (sum over tensor inputs),
    "flops": int|None (per forward call), "error": str|None}``; ``None`` values and the error text when the problem
    cannot run on the meta device (an op without a meta kernel, ``.item()``, or a size the scaling broke). Never
    raises.
    """
    import torch  # loaded on first use: `kbstudy --help` and the lane plan from a cache need no torch

    result = {"output_numel": None, "input_numel": None, "flops": None, "error": None}
    try:
        namespace: dict = {}
        exec(compile(scale_source(problem.source, size_scale), problem.name, "exec"), namespace)  # noqa: S102
        with warnings.catch_warnings(), torch.device("meta"), torch.no_grad():
            warnings.simplefilter("ignore")
            model = namespace["Model"](*namespace["get_init_inputs"]())
            inputs = namespace["get_inputs"]()
            counter = FlopCounterMode(display=False)
            with counter:
                out = model(*inputs)
        first = out[0] if isinstance(out, (tuple, list)) else out
        result["output_numel"] = int(first.numel()) if isinstance(first, torch.Tensor) else 1
        result["input_numel"] = int(sum(x.numel() for x in inputs if isinstance(x, torch.Tensor)))
        result["flops"] = int(counter.get_total_flops())
    except Exception as exc:  # noqa: BLE001 - a problem the meta device cannot run is reported, not raised
        result["error"] = f"{type(exc).__name__}: {exc}"[:300]
    return result


#: Elements (inputs plus first output, :func:`problem_footprint`) above which a problem is calibrated in the *solo*
#: lane, alone on its GPU, rather than in a lane that shares the GPU. At full size one lane needed about 100 GB for
#: level-1 5_Matrix_scalar_multiplication (2.1e9 elements of input and output: about 50 bytes per element, for the
#: float64 references and the input sets; outputs/records/kernelbench/h200/calibration/README.md), so a shared lane
#: under this bound needs at most about 20 GB, and three of them fit an H200's 141 GB with room for their CUDA
#: contexts and the allocator's caches.
SHARED_LANE_NUMEL = 4 * 10**8
#: The lane name :func:`assign_lanes` gives the problems too large to share a GPU (or whose size is unknown).
SOLO_LANE = "solo"


def cached_footprints(problems: Sequence, size_scale: float = 1.0, cache_dir: str | Path | None = None) -> list[dict]:
    """:func:`problem_footprint` of each problem, in order, remembered in ``<cache_dir>/footprints.jsonl`` (one line
    per problem source SHA-256 and size scale; a problem whose source changes gets a new line). The cache is read once
    and only the problems it lacks are sized and appended. The meta-device run costs up to ~25 s of CPU for a level-3
    RNN (38_LSTMBidirectional), 95-130 s for levels 2-3 together on one core, which every calibration lane would
    otherwise pay again. ``cache_dir=None`` computes without caching. Never raises; an unwritable cache is skipped."""
    if cache_dir is None:
        return [problem_footprint(p, size_scale) for p in problems]
    path = Path(cache_dir) / "footprints.jsonl"
    fields = ("output_numel", "input_numel", "flops", "error")
    known: dict = {}
    try:
        for row in iter_jsonl(path):
            known[(row.get("problem_sha256"), row.get("size_scale"))] = {k: row.get(k) for k in fields}
    except OSError:
        pass
    out = []
    for problem in problems:
        key = (problem.sha256, float(size_scale))
        if key not in known:
            known[key] = problem_footprint(problem, size_scale)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                append_jsonl(path, {"problem_sha256": key[0], "size_scale": key[1], "problem_name": problem.name,
                                    **known[key]})
            except OSError:
                pass
        out.append(known[key])
    return out


def assign_lanes(problems: Sequence, lanes: int, size_scale: float = 1.0, *, solo_numel: int = SHARED_LANE_NUMEL,
                 cache_dir: str | Path | None = None) -> list[dict]:
    """Split ``problems`` between ``lanes`` calibration processes that share one GPU, plus a *solo* lane that runs
    alone after them. A calibration times nothing, so lanes sharing a GPU change no recorded value; they only overlap
    the per-problem costs that leave the GPU idle (process and CUDA context start, input generation, the float64
    reference, the host side of the checks: about 13 s per level-2 problem in one lane).

    A problem goes to the solo lane when its inputs plus first output exceed ``solo_numel`` elements, or when the meta
    device cannot size it (:func:`problem_footprint`'s ``error``); the others are dealt round-robin, in their order,
    to lanes ``0 .. lanes-1``. Deterministic, and the same on any machine with the same packages (shapes from the meta
    device; a problem that imports a module the machine lacks, e.g. ``einops``, is unsizable there), so every lane
    process on one machine computes the same plan on its own.

    Returns one dict per problem, in order: ``level``, ``problem_id``, ``problem_name``, ``numel`` (int or ``None``),
    ``lane`` (int, or :data:`SOLO_LANE`), ``error``. Raises ``ValueError`` if ``lanes < 1``.
    """
    if lanes < 1:
        raise ValueError(f"lanes must be at least 1, not {lanes}")
    plan, shared = [], 0
    for problem, fp in zip(problems, cached_footprints(problems, size_scale, cache_dir)):
        numel = None if fp["error"] else int(fp["input_numel"] or 0) + int(fp["output_numel"] or 0)
        if numel is None or numel > solo_numel:
            lane: int | str = SOLO_LANE
        else:
            lane, shared = shared % lanes, shared + 1
        plan.append({"level": problem.level, "problem_id": problem.problem_id, "problem_name": problem.name,
                     "numel": numel, "lane": lane, "error": fp["error"]})
    return plan


def select_by_footprint(problems: Sequence, size_scale: float, *, max_output_numel: int, max_input_numel: int,
                        max_flops: float) -> tuple[list, list[dict]]:
    """The problems whose :func:`problem_footprint` at ``size_scale`` is within every bound: the deterministic,
    machine-independent subset rule of the CPU calibration for KernelBench levels 2 and 3 (their module-level sizes
    scale, but spatial sizes written inside ``get_inputs`` do not, so some scaled problems stay GPU-sized).

    Returns ``(kept, report)``: the kept problems in their order, and one dict per problem (``level``,
    ``problem_id``, ``problem_name``, the footprint's fields, ``kept`` bool, ``reason`` str) for the record of what
    was left out and why. Problems the meta device cannot run are left out (reason ``meta: <error>``).
    """
    kept, report = [], []
    for problem in problems:
        fp = problem_footprint(problem, size_scale)
        if fp["error"]:
            reason = f"meta: {fp['error']}"
        elif fp["output_numel"] > max_output_numel:
            reason = f"output {fp['output_numel']} > {max_output_numel} elements"
        elif fp["input_numel"] > max_input_numel:
            reason = f"inputs {fp['input_numel']} > {max_input_numel} elements"
        elif fp["flops"] > max_flops:
            reason = f"{fp['flops'] / 1e9:.3g} GFLOP > {max_flops / 1e9:.3g}"
        else:
            reason = ""
        report.append({"level": problem.level, "problem_id": problem.problem_id, "problem_name": problem.name, **fp,
                       "kept": not reason, "reason": reason})
        if not reason:
            kept.append(problem)
    return kept, report
