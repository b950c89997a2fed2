"""Host time per call of our DLRM-Bench kernels: the Python a timed call runs before (and between) its launches.

A per-call timing (``kbstudy.harness.timing``) starts its clock with the device idle, so every microsecond of host work before
the first kernel starts is in the measured time. This prints, per problem, the host time of one ``ModelNew.forward``:

* ``--device cpu`` (default; numbers are CPU numbers): each kernel file's ``_launch`` is replaced by a counter, so the
  time is the forward's own Python and torch calls *without* the launches (problems at ``--size-scale``, small, so
  allocations cost little);
* ``--device cuda``: the real launches included, at full size; ``--calls`` calls are issued without a sync in between
  and timed on the host (the device is synchronised before and after; with fewer calls than the launch queue holds,
  the host does not wait for the device).

Medians over ``--repeats`` repeats of ``--calls`` calls, in us per call. Examples::

    python scripts/bench_dlrm_host.py                       # CPU, launches excluded
    python3 scripts/bench_dlrm_host.py --device cuda        # on the GPU machine, launches included
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere: the repository's kbstudy


def host_us_per_call(forward, inputs, calls: int, repeats: int, sync) -> float:
    """Median over ``repeats`` of the host time of ``calls`` back-to-back calls, in us per call."""
    forward(*inputs)  # first call: autotuning, compilation, caches
    forward(*inputs)
    samples = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            forward(*inputs)
        samples.append((time.perf_counter() - start) / calls * 1e6)
        sync()
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--size-scale", type=float, default=None, help="default: 1/512 on cpu, 1 on cuda")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--problems", type=int, nargs="*", help="problem ids (default: all twelve)")
    args = parser.parse_args()

    import torch

    from kbstudy.suites.dlrm_bench import instantiate, load_dlrm_candidates, load_dlrm_problems

    scale = args.size_scale if args.size_scale is not None else (1 / 512 if args.device == "cpu" else 1.0)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    candidates = {c.problem_id: c for c in load_dlrm_candidates()}
    torch.set_grad_enabled(False)
    print(f"device {args.device}, size scale {scale:g}, {args.calls} calls x {args.repeats} repeats "
          f"({'launches excluded' if args.device == 'cpu' else 'launches included'})")
    print(f"{'id':>3} {'problem':<40} {'host us/call':>12} {'launches':>9}")
    for problem in load_dlrm_problems(scale):
        if args.problems and problem.problem_id not in args.problems:
            continue
        cn, model, inputs = instantiate(problem, candidates[problem.problem_id].source, args.device)
        launches = [0]
        if args.device == "cpu":
            def counted(*a, **k):
                launches[0] += 1
            cn["_launch"] = counted  # the forward looks its module-level _launch up at call time
        us = host_us_per_call(model, inputs, args.calls, args.repeats, sync)
        per_call = launches[0] / (2 + args.calls * args.repeats) if args.device == "cpu" else float("nan")
        print(f"{problem.problem_id:>3} {problem.name:<40} {us:>12.1f} {per_call:>9.0f}")


if __name__ == "__main__":
    main()
