"""Side-by-side throughput: KernelBench's own evaluation path and kbstudy's, on the same kernels and the same GPU, in
one invocation, from cold and from warm build caches. Writes one JSON record (``--out``).

The kernels: the first ``--n`` (24) level-1 leaderboard kernels of ``--model`` (claude-3.5-sonnet) in problem order,
on their v0 problems, at fp32 (``leaderboard_kernels.jsonl`` and ``kernelbench_v0_problems.jsonl`` of the
KernelBench data folder).

KernelBench runs as its ``scripts/eval_from_generations.py`` runs a batch on one GPU: the CUDA builds first, in a
``spawn`` pool of CPU workers (one per core) calling ``kernelbench.eval.build_compile_cache``; then one kernel at a
time, each in a fresh ``spawn`` ``multiprocessing.Pool(1)`` calling ``eval_kernel_against_ref`` (5 correctness
trials, 100 timed trials, CUDA events, the eager reference timed too: ``check_for_excessive_speedup``) with a 180 s
timeout. Its source is imported from ``--kernelbench-src`` (a folder holding ``src/kernelbench``), never copied here.
It needs ``pydantic`` and ``python-dotenv`` (carry wheels); ``openai`` and ``litellm``, imported by
``kernelbench.utils`` for querying language models only, get empty stand-ins when missing.

kbstudy runs as ``python -m kbstudy eval`` in a process of its own (``--no-compile-baseline``: KernelBench times no
``torch.compile`` baseline), every check on.

Phases (``--phases``): ``cold`` (empty cache folders: every build compiles; KernelBench first) then ``warm`` (the
same cache folders again, a fresh records folder: builds are cache hits; kbstudy first, and KernelBench's phase is
skipped, saying so, if it would not end within ``--budget-s``). Each harness's cache folder is its own. The record holds per
harness and phase the wall time, the build time, per-kernel times and outcomes, and both harnesses' verdicts side by
side, with the hardware and kbstudy's provenance (commit, versions).

    python scripts/bench_vs_kernelbench.py --kernelbench-src .device/kernelbench-src \\
        --kernelbench-data .device/kernelbench --out outputs/benchmarks/vs-kernelbench-h100.json
    python scripts/bench_vs_kernelbench.py --dry-run ...      # list the kernels and the commands only
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_STARTED = time.perf_counter()  # the time budget counts from the start of the invocation
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kbstudy.records import provenance  # noqa: E402

#: KernelBench's evaluation settings, as ``scripts/eval_from_generations.py`` passes them
KB_EVAL = {"seed_num": 42, "num_correct_trials": 5, "num_perf_trials": 100, "measure_performance": True,
           "timing_method": "cuda_event", "backend": "cuda", "check_for_excessive_speedup": True}
KB_TIMEOUT_S = 180.0
#: what KernelBench's evaluation imports beyond the GPU image (module: the package that provides it)
KB_NEEDS = {"pydantic": "pydantic (with pydantic-core, annotated-types, typing-inspection)",
            "dotenv": "python-dotenv"}
#: modules ``kernelbench.utils`` imports only to query language models: empty stand-ins when absent
KB_STANDINS = {"openai": "class OpenAI:\n    def __init__(self, *args, **kwargs):\n        raise RuntimeError('stand-in')\n",
               "litellm": "def completion(*args, **kwargs):\n    raise RuntimeError('stand-in')\n"}


def select_kernels(data: Path, model: str, n: int) -> list[dict]:
    """The first ``n`` level-1 leaderboard kernels of ``model`` in problem order, each with its v0 problem
    (``problem_source``) and its 1-based problem id (``problem``)."""
    rows = [json.loads(line) for line in (data / "leaderboard_kernels.jsonl").read_text().splitlines() if line]
    v0 = {(r["level"], r["problem_id"]): r["code"] for r in
          (json.loads(line) for line in (data / "kernelbench_v0_problems.jsonl").read_text().splitlines() if line)}
    picked = sorted((r for r in rows if r["level"] == 1 and r["display_name"] == model),
                    key=lambda r: r["problem_id"])[:n]
    out = []
    for row in picked:
        problem = row["problem_id"] + 1  # the leaderboard's ids are 0-based, the problem files' 1-based
        out.append({**row, "problem": problem, "problem_source": v0[(1, problem)]})
    return out


def kbstudy_command(candidates: Path, problems: Path, records: Path, cache: Path, kernels: list[dict], device: str,
                    concurrency: int, extra: list[str]) -> list[str]:
    """The ``kbstudy eval`` command line of one phase."""
    cmd = [sys.executable, "-m", "kbstudy", "eval", "--problems", str(problems), "-c", str(candidates),
           "--out", str(records), "--level", "1", "--precision", "fp32", "--device", device,
           "--no-compile-baseline", "--run-timeout", "60", "--cache-dir", str(cache), "--no-progress",
           "--concurrency", str(concurrency)]
    for k in kernels:
        cmd += ["--problem-id", str(k["problem"])]
    return cmd + extra


# ------------------------------------------------------------------------------------------------ KernelBench's path


def _kb_build(source: str, build_dir: str) -> dict:
    """One build in KernelBench's pool worker: ``build_compile_cache``, timed."""
    from kernelbench.eval import build_compile_cache  # in the spawned worker, as KernelBench's pool imports it

    t0 = time.perf_counter()
    ok, _, error = build_compile_cache(source, False, build_dir)
    return {"ok": bool(ok), "error": (error or "")[:500] or None, "seconds": time.perf_counter() - t0}


def _kb_result(result) -> dict:
    """The fields of KernelBench's ``KernelExecResult`` the record keeps."""
    get = (lambda k: getattr(result, k, None)) if not isinstance(result, dict) else result.get
    meta = get("metadata") or {}
    return {"compiled": get("compiled"), "correctness": get("correctness"), "runtime_ms": get("runtime"),
            "ref_runtime_ms": get("ref_runtime"),
            "error": next((str(meta[k])[:300] for k in meta if "error" in k or "exceeded" in k), None)}


def kernelbench_phase(kernels: list[dict], cache: Path, device: str, workers: int) -> dict:
    """KernelBench's evaluation of ``kernels``: builds in a spawn pool, then one fresh spawn process per kernel."""
    import torch
    from kernelbench.eval import eval_kernel_against_ref

    ctx = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    dirs = [str(cache / f"level_1_problem_{k['problem']}_sample_0") for k in kernels]
    with ctx.Pool(workers) as pool:
        builds = pool.starmap(_kb_build, [(k["code"], d) for k, d in zip(kernels, dirs)])
    build_s = time.perf_counter() - started
    per_kernel = []
    for k, d, build in zip(kernels, dirs, builds):
        t0 = time.perf_counter()
        pool = ctx.Pool(1)
        try:
            job = pool.apply_async(eval_kernel_against_ref, (k["problem_source"], k["code"]),
                                   {**KB_EVAL, "build_dir": d, "device": int(device.split(":")[1]) if ":" in device
                                    else 0, "precision": torch.float32})
            result = _kb_result(job.get(timeout=KB_TIMEOUT_S))
        except multiprocessing.TimeoutError:
            result = {"compiled": None, "correctness": None, "error": f"timeout after {KB_TIMEOUT_S:.0f} s"}
        except Exception as exc:  # noqa: BLE001 - KernelBench's script records it and goes on
            result = {"compiled": None, "correctness": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
        finally:
            pool.terminate()
            pool.join()
        per_kernel.append({"problem": k["problem"], "build_s": build["seconds"], "build_ok": build["ok"],
                           "eval_s": time.perf_counter() - t0, **result})
    wall = time.perf_counter() - started
    evals = [p["eval_s"] for p in per_kernel]
    return {"wall_s": wall, "build_s": build_s, "evaluate_s": wall - build_s,
            "median_eval_s": statistics.median(evals) if evals else None, "kernels": per_kernel}


def kernelbench_ready(src: Path, work: Path) -> list[str]:
    """Put KernelBench's source (and stand-ins for its LLM clients) on the path; the missing packages, if any."""
    for path in (src / "src", work / "kb_standins"):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(src / "src"), str(work / "kb_standins"),
                                                os.environ.get("PYTHONPATH", "")])
    (work / "kb_standins").mkdir(parents=True, exist_ok=True)
    missing = []
    for name, text in KB_STANDINS.items():
        try:
            __import__(name)
        except ImportError:
            (work / "kb_standins" / f"{name}.py").write_text(text)
    for module, package in KB_NEEDS.items():
        try:
            __import__(module)
        except ImportError:
            missing.append(package)
    return missing


# ------------------------------------------------------------------------------------------------ kbstudy's path


def kbstudy_phase(cmd: list[str], records: Path, timeout_s: float) -> dict:
    """Run ``kbstudy eval`` and read what its records say about time and verdicts."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "PYTHONUNBUFFERED": "1"}
    started = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
        rc, tail = proc.returncode, (proc.stdout + proc.stderr)[-2000:]
    except subprocess.TimeoutExpired as exc:
        rc, tail = None, f"timeout after {timeout_s:.0f} s: {str(exc.stdout or '')[-1000:]}"
    wall = time.perf_counter() - started
    evaluations = _jsonl(records / "evaluations.jsonl")
    references = {r["key"]: r for r in _jsonl(records / "references.jsonl")}
    per_kernel, builds, built = [], [], []
    for row in evaluations:
        meta = row.get("metadata") or {}
        ref = references.get(row.get("reference_key") or "") or {}
        if meta.get("build_seconds") is not None:
            builds.append(meta["build_seconds"])
        if meta.get("build_done_s") is not None:
            built.append(meta["build_done_s"])
        per_kernel.append({"problem": row["problem_id"], "outcome": row["outcome"],
                           "kernelbench_correct": row.get("kernelbench_correct"),
                           "kbstudy_correct": row.get("kbstudy_correct"),
                           "kbstudy_failure": row.get("kbstudy_failure"), "error": (row.get("error_message") or "")[:300]
                           or None, "worker_wall_s": row.get("worker_wall_s"), "build_s": meta.get("build_seconds"),
                           "stage_seconds": meta.get("stage_seconds"),
                           "reference_stage_seconds": (ref.get("metadata") or {}).get("stage_seconds"),
                           "candidate_ms_median": row.get("candidate_ms_median"),
                           "speedup_vs_eager": row.get("speedup_vs_eager")})
    walls = [p["worker_wall_s"] for p in per_kernel if p["worker_wall_s"] is not None]
    batch = next((r["metadata"]["batch"] for r in evaluations if (r.get("metadata") or {}).get("batch")), None)
    ends = [(r.get("metadata") or {}).get("span_unix", [None, None])[1] for r in evaluations]
    ends = sorted(e for e in ends if e is not None)
    started = (batch or {}).get("started_unix")
    return {"wall_s": wall, "returncode": rc, "output_tail": tail if rc != 0 else None,
            # builds overlap the evaluation: when the last one ended (s after the batch started), and their wall
            # times summed over build processes
            "build_s": max(built) if built else None, "build_process_s": sum(builds) if builds else None,
            "batch_s": ends[-1] - started if ends and started else None,
            "first_record_s": ends[0] - started if ends and started else None,
            "median_worker_wall_s": statistics.median(walls) if walls else None, "batch": batch,
            "kernels": sorted(per_kernel, key=lambda p: p["problem"])}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []


# ------------------------------------------------------------------------------------------------ the record


def side_by_side(kernels: list[dict], kb: dict | None, ks: dict | None) -> list[dict]:
    """Both harnesses' verdicts per kernel: KernelBench's ``correctness``, kbstudy's KernelBench verdict and its own."""
    kb_by = {p["problem"]: p for p in (kb or {}).get("kernels", [])}
    ks_by = {p["problem"]: p for p in (ks or {}).get("kernels", [])}
    rows = []
    for k in kernels:
        a, b = kb_by.get(k["problem"], {}), ks_by.get(k["problem"], {})
        rows.append({"problem": k["problem"], "kernelbench": a.get("correctness"),
                     "kbstudy_kernelbench_verdict": b.get("kernelbench_correct"),
                     "kbstudy_verdict": b.get("kbstudy_correct"), "kbstudy_outcome": b.get("outcome"),
                     "agree": None if a.get("correctness") is None or b.get("kernelbench_correct") is None
                     else bool(a["correctness"]) == bool(b["kernelbench_correct"])})
    return rows


def ratios(phase: dict) -> dict:
    """kbstudy's wall time over KernelBench's, and both in kernels per minute, for one phase."""
    kb, ks = phase.get("kernelbench"), phase.get("kbstudy")
    n = phase.get("n_kernels") or 0
    out = {}
    if kb and ks and kb.get("wall_s") and ks.get("wall_s"):
        out["kbstudy_over_kernelbench_wall"] = ks["wall_s"] / kb["wall_s"]
        out["speedup_over_kernelbench"] = kb["wall_s"] / ks["wall_s"]
    for name, h in (("kernelbench", kb), ("kbstudy", ks)):
        if h and h.get("wall_s"):
            out[f"{name}_kernels_per_minute"] = n / (h["wall_s"] / 60.0)
    return out


def hardware(device: str) -> str:
    from kbstudy.harness.config import hardware_label  # torch's import: only once the kernels are listed

    return hardware_label(device)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench-src", type=Path, default=ROOT.parent / "shared" / "kernelbench-src",
                        help="KernelBench's source (a folder holding src/kernelbench)")
    parser.add_argument("--kernelbench-data", type=Path,
                        default=Path(os.environ.get("KBSTUDY_KERNELBENCH_DIR", ROOT.parent / "shared" / "kernelbench")),
                        help="folder with leaderboard_kernels.jsonl and kernelbench_v0_problems.jsonl")
    parser.add_argument("--out", type=Path, required=True, help="the JSON record")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "bench_vs_kernelbench",
                        help="cache and records folders, emptied first (default: in the temporary folder)")
    parser.add_argument("--model", default="claude-3.5-sonnet")
    parser.add_argument("--n", type=int, default=24)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--phases", default="cold,warm")
    parser.add_argument("--harness", default="kernelbench,kbstudy", help="comma-separated: kernelbench, kbstudy")
    parser.add_argument("--build-workers", type=int, default=os.cpu_count() or 1,
                        help="KernelBench's build pool (its script: one per CPU core)")
    parser.add_argument("--budget-s", type=float, default=560.0,
                        help="the invocation's time budget: KernelBench's warm phase, the last, is skipped (and "
                             "recorded so) when its cold evaluation time says it would not end within it")
    parser.add_argument("--concurrency", type=int, default=4, help="kbstudy eval --concurrency (problems in flight)")
    parser.add_argument("--kbstudy-arg", action="append", default=[],
                        help="an extra argument for kbstudy eval (repeat), e.g. --kbstudy-arg=--build-jobs=8")
    parser.add_argument("--dry-run", action="store_true", help="list the kernels and commands; run nothing")
    args = parser.parse_args(argv)

    kernels = select_kernels(args.kernelbench_data, args.model, args.n)
    work = args.work.resolve()
    phases = [p for p in args.phases.split(",") if p]
    harnesses = [h for h in args.harness.split(",") if h]
    candidates = work / "candidates.jsonl"
    problems = args.kernelbench_data.resolve() / "kernelbench_v0_problems.jsonl"
    commands = {p: kbstudy_command(candidates, problems, work / f"kbstudy-{p}-records", work / "kbstudy-cache",
                                   kernels, args.device, args.concurrency, args.kbstudy_arg) for p in phases}
    if args.dry_run:
        print(json.dumps({"kernels": [{"problem": k["problem"], "model": k["display_name"]} for k in kernels],
                          "kernelbench": {"src": str(args.kernelbench_src), "eval": KB_EVAL,
                                          "timeout_s": KB_TIMEOUT_S, "build_workers": args.build_workers},
                          "kbstudy": {p: " ".join(c) for p, c in commands.items()}}, indent=2))
        return 0

    shutil.rmtree(work, ignore_errors=True)  # cold means empty
    work.mkdir(parents=True)
    candidates.write_text("".join(json.dumps({k: v for k, v in r.items() if k not in ("problem", "problem_source")})
                                  + "\n" for r in kernels))
    record = {"benchmark": "bench_vs_kernelbench", "model": args.model, "level": 1, "problem_version": "v0",
              "precision": "fp32", "n_kernels": len(kernels), "problems": [k["problem"] for k in kernels],
              "device": args.device, "hardware": hardware(args.device), "cpu_count": os.cpu_count(),
              "provenance": provenance.collect("cpu"), "kernelbench_src": str(args.kernelbench_src),
              "kernelbench_eval": {**KB_EVAL, "timeout_s": KB_TIMEOUT_S, "build_workers": args.build_workers},
              "kbstudy_commands": {p: " ".join(c) for p, c in commands.items()}, "phases": {}}
    missing = kernelbench_ready(args.kernelbench_src.resolve(), work) if "kernelbench" in harnesses else []
    args.out.parent.mkdir(parents=True, exist_ok=True)
    began = _STARTED
    # KernelBench first from cold caches, as in the measurement the issue quotes; from warm ones kbstudy first, so
    # that KernelBench's longer warm phase is the one the time budget can leave out
    for phase in phases:
        result: dict = {"n_kernels": len(kernels)}
        record["phases"][phase] = result
        for harness in (harnesses if phase == phases[0] else list(reversed(harnesses))):
            print(f"[{phase}] {harness} ...", file=sys.stderr, flush=True)
            left = args.budget_s - (time.perf_counter() - began)
            cold_kb = record["phases"][phases[0]].get("kernelbench") or {}
            if harness == "kernelbench" and phase != phases[0] and cold_kb.get("evaluate_s") and \
                    cold_kb["evaluate_s"] * 1.1 + 20 > left:
                result["kernelbench"] = {"skipped": f"time budget: {left:.0f} s left of --budget-s "
                                                    f"{args.budget_s:.0f}, its cold evaluation took "
                                                    f"{cold_kb['evaluate_s']:.0f} s"}
            elif harness == "kernelbench":
                if missing:
                    result["kernelbench"] = {"skipped": "missing: " + ", ".join(missing)}
                elif not args.device.startswith("cuda"):
                    result["kernelbench"] = {"skipped": "KernelBench's eval_kernel_against_ref needs a GPU"}
                else:
                    result["kernelbench"] = kernelbench_phase(kernels, work / "kernelbench-cache", args.device,
                                                              args.build_workers)
            elif harness == "kbstudy":
                result["kbstudy"] = kbstudy_phase(commands[phase], work / f"kbstudy-{phase}-records",
                                                  max(60.0, left))
            summary = result.get(harness, {})
            print(f"[{phase}] {harness}: wall {summary.get('wall_s', float('nan')):.1f} s "
                  f"{summary.get('skipped') or ''}", file=sys.stderr, flush=True)
        result["verdicts"] = side_by_side(kernels, result.get("kernelbench"), result.get("kbstudy"))
        result["ratios"] = ratios(result)
        compared = [v["agree"] for v in result["verdicts"] if v["agree"] is not None]
        result["verdicts_agree"] = f"{sum(compared)} of {len(compared)}" if compared else None
        args.out.write_text(json.dumps(record, indent=2, default=str) + "\n")  # what is done so far survives a kill
    print(json.dumps({p: r["ratios"] for p, r in record["phases"].items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
