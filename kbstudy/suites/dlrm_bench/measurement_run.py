"""DLRM-Bench measurement run: the machine's ceilings, our twelve Triton kernels through the project's one evaluation
path, and the roofline floors.

    python -m kbstudy.suites.dlrm_bench.measurement_run --out DIR                                     # a GPU, full MLPerf sizes
    python -m kbstudy.suites.dlrm_bench.measurement_run --device cpu --size-scale 0.0078125 --out DIR # CPU, Triton interpreter

Three steps, three kinds of files in ``DIR``:

1. ``machine.json`` -- :func:`kbstudy.suites.dlrm_bench.roofline.measure_machine` (copy bandwidth, bf16/fp32 matrix rates,
   L2 size; timed with :func:`kbstudy.harness.timing.time_callable`), with its content hash as ``key``.
2. ``evaluations.jsonl`` + ``references.jsonl`` -- :func:`kbstudy.harness.orchestrator.evaluate_batch` on the twelve problems and
   our candidates (model configuration ``kbstudy-triton``), exactly as ``kbstudy eval`` runs any candidate: one
   reference process per problem (expected outputs at precision and in float64, eager and ``torch.compile`` timings),
   one fresh worker per candidate, five correctness trials judged by both verdicts (KernelBench's and kbstudy's, with
   the input-mutation, global-state and storage-reuse checks), then timing. Each problem is evaluated at the precision
   it is written in (:func:`kbstudy.suites.dlrm_bench.problem_precision`): one batch at fp32 (problems 1-9, 12) and one at
   bf16 (10, 11), into the same store. Records are keyed as any run's, so an interrupted run resumes.
   ``--candidates PATH`` (repeatable) adds other candidates to the same batches (a folder of
   ``level_5_problem_<id>_sample_<n>_kernel.py`` files, model configuration = the folder's name, or a JSONL), e.g.
   variants of one of our kernels measured beside it on the same machine state and eager timing
   (:func:`kbstudy.analysis.dlrm_variants.variants` lists them); a file identical to ours is measured once and recorded
   for both configurations.
3. ``floors.jsonl`` -- one row per problem: ``problem_id``, ``problem_name``, ``problem_sha256`` (the same hash as the
   evaluation records: the unscaled source), ``size_scale``, ``precision``, compulsory ``bytes`` and ``flops``,
   ``formula``, ``floor_ms``, ``bound``, ``memory_ms``, ``compute_ms``, ``sector_bytes``, ``sector_ms`` (the bytes
   in whole 32-byte DRAM sectors) and ``machine_key`` (``machine.json``'s key); on a GPU also
   ``copy_ms``, ``copy_q1_ms``, ``copy_q3_ms``, ``copy_flush``: the device time of a copy of the problem's compulsory
   bytes (:func:`kbstudy.suites.dlrm_bench.roofline.copy_at_size`), and where ``sector_bytes`` exceeds ``bytes`` (problems 5
   and 6) ``sector_copy_ms``, ``sector_copy_q1_ms``, ``sector_copy_q3_ms``: the same for a copy of ``sector_bytes``.
   Problems 2, 7 and 8 have random totals: their floors use the first input set of the timing pool (seed
   ``EvalConfig.seed``, generated on the device, as the reference process does; the pool's other sets, seeds
   ``seed + 1`` ..., are draws of the same distribution, see ``kbstudy.harness.timing.time_pool``).

Steps 1 and 3 run in a spawned child process, so this orchestrating process opens no CUDA context and executes no
problem code (as :mod:`kbstudy.harness.orchestrator` requires of itself). ``torch.compile`` baselines run on a GPU (``--no-compile``
skips them) and not on a CPU (``--compile`` forces them). CPU timing is cut to a few calls (:data:`CPU_TIMING`): under
Triton's interpreter CPU times say nothing about kernel speed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import sys
import time
from pathlib import Path

import torch

from kbstudy.harness import tensors
from kbstudy.harness.candidates import load_candidates
from kbstudy.harness.config import EvalConfig, resolve_device
from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.harness.problems import scale_source
from kbstudy.records.store import RecordStore
from kbstudy.suites.dlrm_bench import (
    DLRM_LEVEL,
    exec_source,
    load_dlrm_candidates,
    load_dlrm_problems,
    problem_precision,
)
from kbstudy.suites.dlrm_bench.roofline import Machine, copy_at_size, measure_machine, numeric_constants, problem_floor

#: Timing settings (``EvalConfig.timing``) on a CPU: 1 warm-up call, 3 timed calls.
CPU_TIMING = {"warmup_ms": 0.0, "min_warmup": 1, "budget_ms": 0.0, "min_reps": 3, "max_reps": 3}
#: The problems whose totals are random (their floors need the inputs).
INPUT_DEPENDENT = (2, 7, 8)
#: The precisions, in the order their batches run.
PRECISIONS = ("fp32", "bf16")


def measure_and_floors(device: str, size_scale: float, problem_ids: list[int] | None, seed: int,
                       reps: int, machine_dict: dict | None = None) -> tuple[dict, list[dict]]:
    """The machine (``Machine`` as a dict plus ``key``; ``machine_dict`` if given, else measured) and one floor row per
    problem (see the module docstring). Meant for a child process: it opens the device and executes the problems'
    code."""
    machine = Machine.from_dict(machine_dict) if machine_dict else measure_machine(device, reps=reps)
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    key = machine.key()
    rows = []
    for p in load_dlrm_problems(1.0, problem_ids):
        consts, inputs = floor_inputs(p, size_scale, device, seed)
        floor = problem_floor(p.problem_id, consts, machine, inputs)
        if floor["precision"] != problem_precision(p.problem_id):
            raise AssertionError(f"problem {p.problem_id}: floor precision {floor['precision']} != "
                                 f"{problem_precision(p.problem_id)}")
        del inputs
        copy = copy_at_size(floor["bytes"], device) if device.startswith("cuda") else {}
        if copy and floor["sector_bytes"] > floor["bytes"] * (1 + 1e-6):
            # what the DRAM must move in whole sectors exceeds the bytes (unaligned gathered rows): time that too
            copy.update({"sector_" + k: v for k, v in copy_at_size(floor["sector_bytes"], device).items()
                         if k != "copy_flush"})
        rows.append({"problem_id": p.problem_id, "problem_name": p.name, "problem_version": p.version,
                     "problem_sha256": p.sha256, "size_scale": size_scale, **floor, **copy, "machine_key": key,
                     "machine_name": machine.name, "device": machine.device})
    return {**json.loads(machine.to_json()), "key": key}, rows


def floor_inputs(problem, size_scale: float, device: str, seed: int) -> tuple[dict, list | None]:
    """What a DLRM-Bench problem's floor is computed from: its size constants after scaling by ``size_scale``
    (``roofline.numeric_constants``) and, for the problems whose totals are random (:data:`INPUT_DEPENDENT`), the
    input set of ``seed`` built on ``device`` (as the reference process builds the timing pool's first set); ``None``
    for the others."""
    ns = exec_source(scale_source(problem.source, size_scale), problem.name)
    inputs = None
    if problem.problem_id in INPUT_DEPENDENT:
        tensors.set_seed(seed)
        with torch.device(device):
            inputs = ns["get_inputs"]()
    return numeric_constants(ns), inputs


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m kbstudy.suites.dlrm_bench.measurement_run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output folder (machine.json, floors.jsonl, evaluations.jsonl, "
                                                 "references.jsonl)")
    ap.add_argument("--device", default="auto", help="cuda, cuda:N, cpu or auto (default: cuda when visible)")
    ap.add_argument("--size-scale", type=float, default=None,
                    help="problem size scale (default 1 on a GPU, 1/128 on a CPU)")
    ap.add_argument("--problems", default=None, help="comma-separated problem ids (default all twelve)")
    ap.add_argument("--run-name", default=None, help="the records' run label (default: dlrm-<out folder name>, or "
                                                     "the folder's name if it contains 'dlrm')")
    ap.add_argument("--no-compile", action="store_true", help="no torch.compile baseline (default off on a CPU)")
    ap.add_argument("--compile", dest="force_compile", action="store_true", help="torch.compile baseline on a CPU too")
    ap.add_argument("--max-reps", type=int, default=None, help="timed calls per variant at most (default: "
                                                               "EvalConfig's 100 on a GPU, 3 on a CPU)")
    ap.add_argument("--machine-reps", type=int, default=None, help="timed calls of each machine measurement "
                                                                   "(default 20 on a GPU, 3 on a CPU)")
    ap.add_argument("--remeasure", action="store_true", help="measure the machine again even if DIR/machine.json "
                                                              "exists for this device")
    ap.add_argument("--candidates", action="append", default=[], metavar="PATH",
                    help="more candidates to evaluate beside ours (a folder of "
                         "level_5_problem_<id>_sample_<n>_kernel.py files, model configuration = the folder's name, "
                         "or a JSONL; repeat), e.g. variants of one kernel measured in the same run")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    return ap.parse_args(argv)


def run_name_for(out: Path) -> str:
    return out.name if "dlrm" in out.name else f"dlrm-{out.name}"


def main(argv=None) -> int:
    args = parse_args(argv)
    t_start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t_start:7.1f}s] {msg}", flush=True)

    device = resolve_device(args.device)
    is_cuda = device.startswith("cuda")
    size_scale = args.size_scale if args.size_scale is not None else (1.0 if is_cuda else 1 / 128)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run = args.run_name or run_name_for(out)
    ids = [int(x) for x in args.problems.split(",")] if args.problems else None
    defaults = EvalConfig()
    timing = dict(defaults.timing) if is_cuda else dict(CPU_TIMING)
    if args.max_reps:
        timing["max_reps"] = args.max_reps
        timing["min_reps"] = min(timing["min_reps"], args.max_reps)
    compile_baseline = (is_cuda and not args.no_compile) or args.force_compile
    log(f"device {device}, size_scale {size_scale}, run {run!r}, torch.compile baseline {compile_baseline}")

    # 1 + 3: machine and floors, in a child process (no CUDA context, no problem code here). A folder keeps one
    # machine: a rerun (e.g. the remaining problems of a split run) reuses machine.json unless --remeasure, and its
    # floors replace those of the same problems and size scale in floors.jsonl
    previous = None
    if (out / "machine.json").exists() and not args.remeasure:
        previous = json.loads((out / "machine.json").read_text())
        if previous.get("device") != device.split(":")[0]:
            previous = None
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        machine, floors = pool.submit(measure_and_floors, device, size_scale, ids, defaults.seed,
                                      args.machine_reps or (20 if is_cuda else 3), previous).result()
    if previous is not None:
        log(f"machine.json reused (key {machine['key']}; --remeasure to measure again)")
    (out / "machine.json").write_text(json.dumps(machine, indent=2, sort_keys=True) + "\n")
    floors_path = out / "floors.jsonl"
    new = {(r["problem_id"], r["size_scale"]) for r in floors}
    kept = []
    if floors_path.exists():
        kept = [r for r in map(json.loads, filter(str.strip, floors_path.read_text().splitlines()))
                if (r["problem_id"], r["size_scale"]) not in new and r.get("machine_key") == machine["key"]]
    tmp = floors_path.with_suffix(".jsonl.tmp")
    with open(tmp, "w") as fh:
        for row in sorted(kept + floors, key=lambda r: (r["size_scale"], r["problem_id"])):
            fh.write(json.dumps(row, sort_keys=True) + "\n")
    tmp.replace(floors_path)
    log(f"machine {machine['name']}: {machine['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s copy, "
        + ", ".join(f"{k} {v / 1e12:.2f} TFLOP/s" for k, v in machine["matmul_flops_per_s"].items())
        + f"; {len(floors)} floors written")

    # 2: the one evaluation path, one batch per precision
    problems = load_dlrm_problems(1.0, ids)
    candidates = load_dlrm_candidates()
    for path in args.candidates:  # variants, measured in the same run (same machine state) as ours
        candidates += load_candidates(path, levels=[DLRM_LEVEL])
    store = RecordStore(out)
    for precision in PRECISIONS:
        ps = [p for p in problems if problem_precision(p.problem_id) == precision]
        wanted = {p.problem_id for p in ps}
        cs = [c for c in candidates if c.problem_id in wanted]
        if not ps or not cs:
            continue
        cfg = EvalConfig(run=run, precision=precision, device=device, size_scale=size_scale,
                         compile_baseline=compile_baseline, timing=timing, progress=not args.no_progress)
        log(f"evaluate {len(cs)} candidates at {precision} (problems {sorted(wanted)})")
        summary = evaluate_batch(ps, cs, store, cfg)
        log(f"  {summary.written} written, {summary.already_done} already done, outcomes {dict(summary.outcomes)}, "
            f"{summary.seconds:.1f} s")

    floor_ms = {r["problem_id"]: r["floor_ms"] for r in kept + floors if r["size_scale"] == size_scale}
    log("summary (id, model configuration, precision, outcome, kernelbench, kbstudy, eager ms, compile ms, ours ms, "
        "floor ms):")
    rows = [r for r in store.evaluations() if r.get("run") == run and r.get("size_scale") == size_scale]
    for r in sorted(rows, key=lambda r: r["problem_id"]):
        print("  " + json.dumps([r["problem_id"], r["model_config"], r["precision"], r["outcome"],
                                 r["kernelbench_correct"], r["kbstudy_correct"], r["eager_ms_median"],
                                 r["compile_ms_median"], r["candidate_ms_median"], floor_ms.get(r["problem_id"])]),
              flush=True)
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
