"""Where a timed call's time goes, for our DLRM-Bench kernels on a GPU: host, cold cache, or the kernels' own work.

The study times a candidate per call (``kbstudy.harness.timing``): flush the L2, synchronise, record the start event on an
idle GPU, call, record the end event, synchronise. Such a time exceeds the kernels' device time (``top_kernels`` in
the records: one profiled call, warm, after one warm-up) by what notebook 4 calls the *gap*. This script splits the
gap in two by timing each forward three ways on the same inputs, ``--reps`` calls each, medians in us:

* ``per_call``: the study's timed-call sequence (above), on one input set in this process (the study cycles a pool
  of input sets in a worker process, so this script's times are not a run's: it shows what a gap is made of);
* ``cold_device``: the device time's flush (``kbstudy.harness.timing.l2_flusher``, ``"read"``: the L2 left clean), then
  ``torch.cuda._sleep`` (a spin kernel, ``--sleep-us`` long) enqueued *before*
  the start event, so that the host enqueues the forward's launches while the GPU is still spinning: the events then
  see the kernels back to back with a cold L2 and none of the host's time (a call whose host work outlasts the spin is
  counted in ``host_overran``, over both device-bound ways; its sample still counts, but then includes host time);
* ``warm_device``: the same with no flush (what the profiled device time measures, with events instead of CUPTI).

``host = per_call - cold_device`` is what the host adds to a timed call (Python, launches, allocations, a host sync
inside the forward) plus the write-back of the per-call flush's dirty lines (``"write"``, KernelBench's; 2.5-8.4 us
for our kernels on the H200, ``scripts/bench_l2_flush.py``); ``cold_cache = cold_device - warm_device`` is what the
flushed L2 costs the kernels (inputs that the warm call found in L2); ``enqueue`` is the wall time of the forward
call itself in the per-call way, so ``host - enqueue`` is what remains between the host's submission and the GPU's
work on an idle GPU. GPU only (``torch.cuda._sleep`` is PyTorch's
own test helper; there is no spin kernel on a CPU). Example, on the GPU machine::

    python3 scripts/bench_dlrm_gap.py --out $OUT/gap.csv
    python3 scripts/bench_dlrm_gap.py --problems 4 5 --candidates .device/dlrm-variants-final/kbstudy-triton-s12
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere: the repository's kbstudy

#: the columns of :func:`split_gap`'s row, in order
GAP_COLUMNS = ("per_call_us", "cold_device_us", "warm_device_us", "host_us", "cold_cache_us", "enqueue_us",
               "host_overran")


def split_gap(per_call_us: list[float], cold_device_us: list[float], warm_device_us: list[float],
              enqueue_us: list[float] | None = None, host_overran: int = 0) -> dict:
    """The medians of the three timings (us) and the two shares of the gap: ``host_us = per_call - cold_device``,
    ``cold_cache_us = cold_device - warm_device`` (either may be slightly negative: medians of noisy samples);
    ``enqueue_us``, the median wall time of the forward call itself in the per-call way (the host's Python and
    launches until the call returns; ``nan`` if not given): a ``host_us`` well above it is time the GPU takes to start
    work submitted to it while idle, not the host's.

    Raises ``ValueError`` if a list is empty."""
    if not per_call_us or not cold_device_us or not warm_device_us:
        raise ValueError("each timing needs at least one sample")
    p, c, w = (statistics.median(x) for x in (per_call_us, cold_device_us, warm_device_us))
    q = statistics.median(enqueue_us) if enqueue_us else float("nan")
    return dict(zip(GAP_COLUMNS, (p, c, w, p - c, c - w, q, int(host_overran))))


def time_three_ways(fn, *, device: str, reps: int, sleep_us: float, per_call_flush, device_flush) -> dict:
    """``fn`` timed ``reps`` times each way (module docstring) on ``device`` (CUDA), the three ways interleaved;
    ``per_call_flush`` and ``device_flush`` clear the L2 (``kbstudy.harness.timing.l2_flusher``, ``"write"`` and ``"read"``
    as the study uses them); each call goes through ``kbstudy.harness.timing.device_timed_call``. Returns :func:`split_gap`'s
    row."""
    import torch

    from kbstudy.harness.timing import device_timed_call, spin_cycles_per_us

    stream = torch.cuda.current_stream(device)
    cycles = int(sleep_us * spin_cycles_per_us(device))
    per_call, cold, warm, enqueue, overran = [], [], [], [], 0
    for _ in range(3):  # warm-up (autotuning, compilation, caches)
        fn()
    torch.cuda.synchronize(device)
    for _ in range(reps):
        ms, call_ms, _ = device_timed_call(fn, device=device, stream=stream, flush=per_call_flush, spin_cycles=0)
        per_call.append(ms * 1e3)
        enqueue.append(call_ms * 1e3)
        for samples, flush_first in ((cold, device_flush), (warm, None)):
            ms, _, host_ms = device_timed_call(fn, device=device, stream=stream, flush=flush_first, spin_cycles=cycles)
            samples.append(ms * 1e3)
            overran += host_ms * 1e3 > sleep_us  # the spin must outlast the host's enqueueing, else events saw host
    return split_gap(per_call, cold, warm, enqueue, overran)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, nargs="*", help="problem ids (default: all twelve)")
    parser.add_argument("--candidates", help="a folder of level_5_problem_{id}_sample_0_kernel.py files to use "
                        "instead of the shipped kernels (problems without a file there are skipped)")
    parser.add_argument("--reps", type=int, default=30, help="calls per way (default 30)")
    parser.add_argument("--sleep-us", type=float, default=1500.0,
                        help="the spin before a device-bound call, us (default 1500; above any forward's host time)")
    parser.add_argument("--out", help="also write the table as CSV here")
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        sys.exit("bench_dlrm_gap.py needs a CUDA GPU (it times with CUDA events and a spin kernel)")
    from kbstudy.harness.candidates import load_candidates
    from kbstudy.harness.timing import DEVICE_FLUSH_MODE, l2_flusher
    from kbstudy.suites.dlrm_bench import instantiate, load_dlrm_candidates, load_dlrm_problems

    device = "cuda"
    cands = ({c.problem_id: c for c in load_candidates(args.candidates, model_config=Path(args.candidates).name)}
             if args.candidates else {c.problem_id: c for c in load_dlrm_candidates()})
    torch.set_grad_enabled(False)
    per_call_flush, device_flush = l2_flusher(device, "write"), l2_flusher(device, DEVICE_FLUSH_MODE)
    label = Path(args.candidates).name if args.candidates else "kbstudy-triton"
    header = ("problem_id", "problem", "model_config") + GAP_COLUMNS
    rows = []
    print(f"{args.reps} calls per way, spin {args.sleep_us:g} us; medians in us")
    print(" ".join(f"{h:>14}" for h in header))
    for problem in load_dlrm_problems(1.0):
        pid = problem.problem_id
        if (args.problems and pid not in args.problems) or pid not in cands:
            continue
        _, model, inputs = instantiate(problem, cands[pid].source, device)
        row = time_three_ways(lambda: model(*inputs), device=device, reps=args.reps, sleep_us=args.sleep_us,
                              per_call_flush=per_call_flush, device_flush=device_flush)
        rows.append((pid, problem.name, label) + tuple(row[c] for c in GAP_COLUMNS))
        print(" ".join(f"{v:>14.1f}" if isinstance(v, float) else f"{v!s:>14}" for v in rows[-1]), flush=True)
        model = inputs = None  # free them before the next problem (a del here reads as undefined names in the lambda)
        torch.cuda.empty_cache()
    if args.out:
        import pandas as pd

        pd.DataFrame(rows, columns=header).to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
