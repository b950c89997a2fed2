"""DLRM-Bench measurement run: machine ceilings, then per problem eager, ``torch.compile`` (Inductor) and our Triton
kernel, a correctness check of ours, and the roofline floor.

    python -m kbstudy.dlrm_bench.gpu_run --out DIR                                  # the H200 (full MLPerf sizes)
    python -m kbstudy.dlrm_bench.gpu_run --device cpu --size-scale 0.0625 --out DIR # CPU, Triton interpreter

Writes three files into ``DIR``, in the :mod:`kbstudy.records` schema so the notebooks read them like any run:

* ``machine.json`` -- :class:`~kbstudy.dlrm_bench.roofline.Machine` (measured bandwidth, matrix rates, L2 size);
* ``references.jsonl`` -- one :class:`~kbstudy.records.ReferenceRecord` per problem (eager and compile timings);
* ``evaluations.jsonl`` -- one :class:`~kbstudy.records.EvaluationRecord` per problem for our candidate, with the
  floor and the check in ``metadata`` (``floor_ms``, ``bound``, ``bytes``, ``flops``, ``check_passed``, ...).

Order: phase 1 measures eager and ours for every problem and appends records at once; phase 2 compiles each
reference with ``torch.compile`` (Inductor, default mode) while a time budget (``--budget-s``, default 330 s since the
start) lasts, then re-appends the records with the same keys (the stores keep the last line of a key). A failure in
one problem is recorded (``outcome`` = ``runtime_error``/``out_of_memory``/``reference_error``) and the run goes on.

Timing (GPU): CUDA events around each call; before each call an L2 flush (writing a buffer of 2x the L2 size); 3
warm-up calls; then up to ``--reps`` calls or ``--time-per-variant-s`` seconds, at least 5; median, quartiles, mean,
std, min, max in ms. CPU: ``time.perf_counter``, 1 warm-up and at most 2 timed calls (labelled ``cpu_perf_counter``; Triton kernels run in the
interpreter, so CPU times of ours say nothing about kernel speed).

Check (self-contained, before the core harness's verdict): the reference ``Model`` converted to float64
(``.double()``, float inputs cast to float64) gives the expected output; ours (built from the same seed) is compared
by relative L2 error ``||ours - ref|| / ||ref||`` and max abs error, passing below :data:`REL_L2_TOL` for the output's
dtype (integer outputs must match exactly). The eager fp32/bf16 model's own error is recorded beside it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

#: Relative-L2 tolerance of the self-check by output dtype (int64 outputs: exact).
REL_L2_TOL = {"torch.float32": 1e-4, "torch.bfloat16": 3e-2, "torch.int64": 0.0}
SETTINGS = "dlrm_bench.gpu_run/v1"
INIT_SEED = 42
INPUT_SEED = 1234


def _numeric_constants(ns: dict) -> dict:
    return {k: v for k, v in ns.items() if not k.startswith("_") and isinstance(v, (int, float, tuple, list))
            and not isinstance(v, bool)}


def _stats(times: list[float]) -> dict:
    times = sorted(times)
    n = len(times)
    q = statistics.quantiles(times, n=4) if n >= 2 else [times[0]] * 3
    return {"median": statistics.median(times), "q1": q[0], "q3": q[2], "mean": statistics.fmean(times),
            "std": statistics.pstdev(times) if n > 1 else 0.0, "min": times[0], "max": times[-1], "n": n}


class Timer:
    """Times a zero-argument callable. GPU: CUDA events with an L2 flush before each call; CPU: perf_counter."""

    def __init__(self, device, l2_bytes: int, reps: int, seconds: float, min_reps: int = 5, warmup: int = 3):
        import torch

        self.torch = torch
        self.device = device
        self.is_cuda = device.type == "cuda"
        self.reps, self.seconds, self.min_reps, self.warmup = reps, seconds, min_reps, warmup
        flush_bytes = max(2 * l2_bytes, 128 << 20) if self.is_cuda else 0
        self.flush = torch.empty(flush_bytes, dtype=torch.uint8, device=device) if self.is_cuda else None

    def __call__(self, fn) -> dict:
        torch = self.torch
        for _ in range(self.warmup):
            fn()
        times = []
        t_start = time.perf_counter()
        while len(times) < self.reps and (len(times) < self.min_reps or time.perf_counter() - t_start < self.seconds):
            if self.is_cuda:
                self.flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                fn()
                times.append(1e3 * (time.perf_counter() - t0))
        return _stats(times)


def _rel_l2(out, ref) -> tuple[float, float]:
    import torch

    a, b = out.detach().to(torch.float64).reshape(-1), ref.detach().to(torch.float64).reshape(-1)
    if a.shape != b.shape:
        return math.inf, math.inf
    diff = a - b
    den = float(torch.linalg.vector_norm(b))
    num = float(torch.linalg.vector_norm(diff))
    rel = num / den if den > 0 else (0.0 if num == 0 else math.inf)
    return rel, float(diff.abs().max()) if diff.numel() else 0.0


def _outcome_of(exc: BaseException) -> str:
    import torch

    if isinstance(exc, torch.OutOfMemoryError):
        return "out_of_memory"
    if "CUDA" in str(exc) or "cuda" in type(exc).__name__.lower():
        return "cuda_error"
    return "runtime_error"


def _free(device) -> None:
    import gc

    import torch

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


class ProblemRun:
    """Everything measured for one problem (filled in by the phases)."""

    def __init__(self, problem, candidate):
        self.problem, self.candidate = problem, candidate
        self.eager = self.compile = self.ours = None
        self.floor = {}
        self.check = {}
        self.error = None
        self.error_stage = None
        self.compile_error = None
        self.compile_s = None
        self.output_shape = self.output_dtype = None


def _build(ns: dict, cls_name: str, device, problem_ns: dict | None = None):
    """``ns[cls_name](*get_init_inputs())`` on ``device`` after ``torch.manual_seed(INIT_SEED)`` (the problem's
    ``get_init_inputs``, so Model and ModelNew get identical parameters)."""
    import torch

    init = (problem_ns or ns)["get_init_inputs"]
    torch.manual_seed(INIT_SEED)
    with torch.device(device):
        return ns[cls_name](*init())


def _inputs(ns: dict, device):
    import torch

    torch.manual_seed(INPUT_SEED)
    with torch.device(device):
        return [x.contiguous() if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]


def phase_eager_and_ours(run: ProblemRun, device, timer: Timer, machine, log) -> None:
    """Check ours against the float64 reference, time eager and ours, compute the floor."""
    import torch

    from kbstudy.dlrm_bench import exec_source
    from kbstudy.dlrm_bench.roofline import problem_floor

    p = run.problem
    ns = exec_source(p.source, p.name)
    inputs = _inputs(ns, device)
    run.floor = problem_floor(p.problem_id, _numeric_constants(ns), machine, inputs)
    cand_ns = exec_source(run.candidate.source, Path(run.candidate.origin or f"cand_{p.problem_id}").name)
    with torch.no_grad():
        # -- check: float64 reference vs ours, fresh models from the same seed (problem 5 mutates its state)
        run.error_stage = "reference"
        ref64 = _build(ns, "Model", device).double()
        inputs64 = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
        expected = ref64(*inputs64).detach().clone()
        del ref64
        _free(device)
        eager_model = _build(ns, "Model", device)
        eager_out = eager_model(*inputs).detach().clone()
        run.output_shape, run.output_dtype = list(eager_out.shape), str(eager_out.dtype)
        eager_rel, eager_max = _rel_l2(eager_out, expected)
        del eager_out, eager_model
        _free(device)
        run.error_stage = "candidate"
        ours_model = _build(cand_ns, "ModelNew", device, ns)
        ours_out = ours_model(*inputs)
        if device.type == "cuda":
            torch.cuda.synchronize()
        ours_out = ours_out.detach().clone()
        rel, mx = _rel_l2(ours_out, expected)
        tol = REL_L2_TOL.get(run.output_dtype, 1e-4)
        shape_ok = list(ours_out.shape) == run.output_shape
        dtype_ok = str(ours_out.dtype) == run.output_dtype
        run.check = {"check_passed": bool(shape_ok and dtype_ok and rel <= tol), "rel_l2_error": rel,
                     "max_abs_error": mx, "rel_l2_threshold": tol, "eager_rel_l2_error": eager_rel,
                     "eager_max_abs_error": eager_max, "shape_ok": shape_ok, "dtype_ok": dtype_ok}
        del ours_out, expected
        _free(device)
        log(f"  check: rel_l2={rel:.2e} (eager {eager_rel:.2e}, tol {tol:g}) passed={run.check['check_passed']}")
        # -- timing: eager, then ours
        run.error_stage = "reference"
        eager_model = _build(ns, "Model", device)
        run.eager = timer(lambda: eager_model(*inputs))
        del eager_model
        _free(device)
        run.error_stage = "candidate"
        run.ours = timer(lambda: ours_model(*inputs))
        del ours_model
        _free(device)
        run.error_stage = None


def phase_compile(run: ProblemRun, device, timer: Timer, log) -> None:
    """Time ``torch.compile(Model)`` (Inductor, default mode); the first call's wall time is the compile time."""
    import torch

    from kbstudy.dlrm_bench import exec_source

    p = run.problem
    ns = exec_source(p.source, p.name)
    inputs = _inputs(ns, device)
    try:
        torch._dynamo.reset()
        model = _build(ns, "Model", device)
        compiled = torch.compile(model)
        with torch.no_grad():
            t0 = time.perf_counter()
            compiled(*inputs)
            if device.type == "cuda":
                torch.cuda.synchronize()
            run.compile_s = time.perf_counter() - t0
            run.compile = timer(lambda: compiled(*inputs))
    except Exception as exc:  # noqa: BLE001 -- recorded, the run goes on
        run.compile_error = f"{type(exc).__name__}: {str(exc)[:400]}"
        log(f"  compile failed: {run.compile_error}")
    finally:
        _free(device)


def _records(run: ProblemRun, args, device, hardware: str, prov: dict, machine):
    from kbstudy.records import EvaluationRecord, ReferenceRecord, evaluation_key, reference_key

    p, c = run.problem, run.candidate
    precision = run.floor.get("precision", "fp32")
    common = dict(level=p.level, problem_id=p.problem_id, problem_name=p.name, problem_version=p.version,
                  problem_sha256=p.sha256, precision=precision, size_scale=args.size_scale, device=device.type,
                  hardware=hardware, timing_method="cuda_events_l2flush" if device.type == "cuda" else "cpu_perf_counter")
    prov_fields = {k: prov.get(k) for k in ("git_commit", "kbstudy_version", "python_version", "torch_version",
                                             "triton_version", "cuda_version", "hostname", "created_utc")}
    rkey = reference_key(p.sha256, precision, args.size_scale, hardware, SETTINGS)
    ref_failed = run.error is not None and run.error_stage == "reference"
    ref = ReferenceRecord(key=rkey, run=args.run_name, outcome="reference_error" if ref_failed else "evaluated",
                          error_message=run.error if ref_failed else None, compile_error=run.compile_error,
                          output_shape=run.output_shape, output_dtype=run.output_dtype, reference_dtype="torch.float64",
                          metadata={"compile_s": run.compile_s, "settings": SETTINGS}, **common, **prov_fields)
    for name in ("eager", "compile"):
        s = getattr(run, name)
        if s:
            for stat in ("median", "q1", "q3", "mean", "std", "min", "max"):
                setattr(ref, f"{name}_ms_{stat}", s[stat])
            setattr(ref, f"{name}_timing_trials", s["n"])
    if ref_failed:
        outcome = "reference_error"
    elif run.error is not None:
        outcome = run.error.split(":", 1)[0] if run.error.split(":", 1)[0] in ("out_of_memory", "cuda_error") \
            else "runtime_error"
    else:
        outcome = "evaluated"
    meta = {"settings": SETTINGS, **run.floor, **run.check, "compile_s": run.compile_s,
            "machine_bandwidth_bytes_per_s": machine.bandwidth_bytes_per_s,
            "machine_matmul_flops_per_s": machine.matmul_flops_per_s, "label": args.label}
    ev = EvaluationRecord(
        key=evaluation_key(p.sha256, c.sha256, precision, args.size_scale, hardware, SETTINGS), run=args.run_name,
        category="dlrm", candidate_id=c.candidate_id, candidate_sha256=c.sha256, model_config=c.model_config,
        sample_id=c.sample_id, backend=c.backend, outcome=outcome, error_message=run.error,
        compiled=run.error is None or run.error_stage != "candidate",
        rel_l2_error=run.check.get("rel_l2_error"), rel_l2_threshold=run.check.get("rel_l2_threshold"),
        shape_ok=run.check.get("shape_ok"), dtype_ok=run.check.get("dtype_ok"), reference_dtype="torch.float64",
        reference_key=rkey, metadata=meta, **common, **prov_fields)
    if run.ours:
        for stat in ("median", "q1", "q3", "mean", "std", "min", "max"):
            setattr(ev, f"candidate_ms_{stat}", run.ours[stat])
        ev.candidate_timing_trials = run.ours["n"]
    for name in ("eager", "compile"):
        s = getattr(run, name)
        if s:
            setattr(ev, f"{name}_ms_median", s["median"])
            setattr(ev, f"{name}_ms_q1", s["q1"])
            setattr(ev, f"{name}_ms_q3", s["q3"])
    if run.ours and run.eager:
        ev.speedup_vs_eager = run.eager["median"] / run.ours["median"]
    if run.ours and run.compile:
        ev.speedup_vs_compile = run.compile["median"] / run.ours["median"]
    return ref, ev


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m kbstudy.dlrm_bench.gpu_run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output folder (machine.json, references.jsonl, evaluations.jsonl)")
    ap.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    ap.add_argument("--size-scale", type=float, default=None, help="problem size scale (default 1 on cuda, 1/16 on cpu)")
    ap.add_argument("--problems", default=None, help="comma-separated problem ids (default all twelve)")
    ap.add_argument("--reps", type=int, default=None, help="timed calls per variant at most (default 100 GPU, 2 CPU)")
    ap.add_argument("--time-per-variant-s", type=float, default=None, help="stop timing a variant after this (s)")
    ap.add_argument("--budget-s", type=float, default=330.0, help="no new torch.compile after this many s from start")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (default on CPU)")
    ap.add_argument("--compile", dest="force_compile", action="store_true", help="torch.compile even on CPU")
    ap.add_argument("--run-name", default=None, help="the records' run label (default: the out folder's name)")
    args = ap.parse_args(argv)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    t_start = time.perf_counter()
    if args.device is None or args.device == "cpu":
        # Triton kernels on CPU tensors need the interpreter; it must be set before triton is imported
        if args.device == "cpu":
            os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch

    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
        if args.device == "cpu":
            os.environ.setdefault("TRITON_INTERPRET", "1")
    device = torch.device(args.device)
    is_cuda = device.type == "cuda"
    if args.size_scale is None:
        args.size_scale = 1.0 if is_cuda else 0.0625
    args.reps = args.reps or (100 if is_cuda else 2)
    args.time_per_variant_s = args.time_per_variant_s or (1.0 if is_cuda else 5.0)
    do_compile = (is_cuda and not args.no_compile) or args.force_compile
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    args.run_name = args.run_name or out.name
    args.label = ("GPU" if is_cuda else "CPU (Triton interpreter; times are not kernel speed)")

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t_start:7.1f}s] {msg}", flush=True)

    from kbstudy import provenance
    from kbstudy.dlrm_bench import load_dlrm_candidates, load_dlrm_problems
    from kbstudy.dlrm_bench.roofline import measure_machine
    from kbstudy.records import RecordStore

    ids = [int(x) for x in args.problems.split(",")] if args.problems else None
    problems = load_dlrm_problems(args.size_scale, ids)
    candidates = {c.problem_id: c for c in load_dlrm_candidates()}
    prov = provenance.collect(args.device)
    hardware = prov["hardware"] if is_cuda else f"CPU: {prov['hardware']}"
    log(f"device {args.device} ({hardware}), size_scale {args.size_scale}, {len(problems)} problems, "
        f"torch {torch.__version__}, triton {prov.get('triton_version')}, interpret={os.environ.get('TRITON_INTERPRET')}")
    machine = measure_machine(args.device, reps=20 if is_cuda else 3)
    (out / "machine.json").write_text(machine.to_json() + "\n")
    log(f"machine: {machine.bandwidth_bytes_per_s / 1e9:.0f} GB/s copy, "
        + ", ".join(f"{k} {v / 1e12:.1f} TFLOP/s" for k, v in machine.matmul_flops_per_s.items())
        + f", L2 {machine.l2_bytes / 2**20:.0f} MiB")
    store = RecordStore(out)
    timer = Timer(device, machine.l2_bytes, args.reps, args.time_per_variant_s, min_reps=5 if is_cuda else 1,
                  warmup=3 if is_cuda else 1)
    if is_cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    runs = []
    for p in problems:
        cand = candidates.get(p.problem_id)
        if cand is None:
            log(f"problem {p.problem_id}: no candidate, skipped")
            continue
        run = ProblemRun(p, cand)
        runs.append(run)
        log(f"problem {p.problem_id} {p.name}")
        try:
            phase_eager_and_ours(run, device, timer, machine, log)
        except Exception as exc:  # noqa: BLE001 -- recorded, the run goes on
            run.error = f"{_outcome_of(exc)}: {type(exc).__name__}: {str(exc)[:600]}"
            log(f"  FAILED in {run.error_stage}: {run.error}")
            traceback.print_exc(limit=4, file=sys.stdout)
            _free(device)
        ref, ev = _records(run, args, device, hardware, prov, machine)
        store.append(ref)
        store.append(ev)
        e, o, f = run.eager, run.ours, run.floor.get("floor_ms")
        if e and o:
            log(f"  eager {e['median']:.4f} ms, ours {o['median']:.4f} ms, floor {f:.4f} ms ({run.floor['bound']}), "
                f"speedup {e['median'] / o['median']:.2f}x, ours/floor {o['median'] / f:.2f}")
    if do_compile:
        for run in runs:
            if run.error_stage == "reference":
                continue
            if time.perf_counter() - t_start > args.budget_s:
                run.compile_error = f"skipped: time budget of {args.budget_s:.0f} s spent before compiling"
                log(f"problem {run.problem.problem_id}: {run.compile_error}")
            else:
                log(f"problem {run.problem.problem_id}: torch.compile")
                phase_compile(run, device, timer, log)
                if run.compile:
                    log(f"  compile {run.compile['median']:.4f} ms (compiled in {run.compile_s:.1f} s)")
            ref, ev = _records(run, args, device, hardware, prov, machine)
            store.append(ref)
            store.append(ev)
    else:
        for run in runs:
            run.compile_error = "skipped: torch.compile not run on this device (use --compile)"
            ref, ev = _records(run, args, device, hardware, prov, machine)
            store.append(ref)
            store.append(ev)
    summary = [(r.problem.problem_id, r.eager and r.eager["median"], r.compile and r.compile["median"],
                r.ours and r.ours["median"], r.floor.get("floor_ms"), r.check.get("check_passed"), r.error)
               for r in runs]
    log("summary (id, eager ms, compile ms, ours ms, floor ms, check, error):")
    for row in summary:
        print("  " + json.dumps(row), flush=True)
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
