"""What an L2 flush leaves behind: device times of copies and of our DLRM-Bench kernels after each kind of flush.

A timed call is preceded by an L2 flush so that it finds none of its operands in the cache. KernelBench's
``clear_l2_cache`` and ``triton.testing.do_bench`` flush by *writing* a buffer larger than the L2; that leaves the L2
full of the buffer's dirty lines, and the next call, as it evicts them, pays for their write-back to DRAM. This script
measures that cost. Each call is timed as the device time is (``kbstudy.harness.timing.device_timed_call``: a 2 ms spin kernel
enqueued before the start event hides the host; CUDA events), after one of four L2 states, interleaved call by call:

* ``write``: the flush buffer zeroed (``kbstudy.harness.timing.l2_flusher(device, "write")``, the per-call timing's flush);
* ``write_read``: zeroed, then a second buffer as large read (its dirty lines written back before the call);
* ``read``: the flush buffer read only (``l2_flusher(device, "read")``, the device time's flush);
* ``none``: no flush (warm: what the previous call left).

Workloads: ``dst.copy_(src)`` moving each DLRM-Bench problem's compulsory bytes (half read, half written; the floors'
``bytes`` at full size, ``kbstudy.suites.dlrm_bench.roofline``), copies of generic sizes, and the shipped kernels of the twelve
problems at full size on their first input set (``kbstudy.suites.dlrm_bench.instantiate``). Medians, first and third
quartiles over ``--reps`` calls per state, in us; ``host_overran`` counts calls (over all four states) whose host work
outlasted the spin. GPU only. On the H200 (commit e19095a, ``outputs/records/dlrm_bench/h200/flush-states``)::

    python3 scripts/bench_l2_flush.py --out $OUT/flush.csv
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere: the repository's kbstudy

#: the L2 states before a timed call, in the order they are interleaved
STATES = ("write", "write_read", "read", "none")
#: generic copy sizes, MiB moved (read + written)
GENERIC_MIB = (4, 8, 16, 32, 64, 128, 256, 512, 2048)
COLUMNS = ("kind", "label", "bytes", "state", "median_us", "q1_us", "q3_us", "reps", "host_overran")


def quartile_row(samples_us: list[float]) -> tuple[float, float, float]:
    """``(median, q1, q3)`` of per-call times (us; inclusive quartiles, as ``kbstudy.harness.timing_stats.summarize``). Raises
    ``ValueError`` on an empty list."""
    from kbstudy.harness.timing_stats import summarize

    stats = summarize(samples_us)
    return stats.median, stats.q1, stats.q3


def interleaved_device_times(fn, before: dict, *, reps: int, device: str, spin_cycles: int,
                             spin_us: float) -> tuple[dict, dict]:
    """Device times of ``fn()`` under several states, interleaved call by call: three warm-up calls, then ``reps``
    rounds, each running ``before[label]()`` (if not ``None``) and one :func:`kbstudy.harness.timing.device_timed_call` (no
    flush of its own; a spin of ``spin_cycles`` hides the host) for every label in order. Returns ``(samples,
    overran)``: per label, the times in us, and how many of its calls had host work outlasting the spin (``spin_us``).
    Shared by this script (L2 states) and ``bench_l2_fetch_granularity.py`` (fetch-granularity settings)."""
    import torch

    from kbstudy.harness.timing import device_timed_call

    for _ in range(3):  # warm-up: autotuning, compilation, allocator
        fn()
    torch.cuda.synchronize(device)
    stream = torch.cuda.current_stream(device)
    samples = {label: [] for label in before}
    overran = {label: 0 for label in before}
    for _ in range(reps):
        for label, prepare in before.items():
            if prepare is not None:
                prepare()
            ms, _, host_ms = device_timed_call(fn, device=device, stream=stream, flush=None, spin_cycles=spin_cycles)
            samples[label].append(ms * 1e3)
            overran[label] += host_ms * 1e3 > spin_us
    return samples, overran


def problem_bytes(problem, device: str, seed: int = 42) -> float:
    """Compulsory bytes of DLRM-Bench ``problem`` at full size (``kbstudy.suites.dlrm_bench.roofline.compulsory_work``, from
    what the floors are computed from: ``kbstudy.suites.dlrm_bench.measurement_run.floor_inputs``; for the problems whose totals are
    random (2, 7, 8) on the input set of ``seed`` built on ``device``)."""
    from kbstudy.suites.dlrm_bench.measurement_run import floor_inputs
    from kbstudy.suites.dlrm_bench.roofline import compulsory_work

    consts, inputs = floor_inputs(problem, 1.0, device, seed)
    return float(compulsory_work(problem.problem_id, consts, inputs).bytes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20, help="timed calls per state (default 20)")
    parser.add_argument("--spin-us", type=float, default=2000.0, help="the spin before each call, us (default 2000)")
    parser.add_argument("--no-kernels", action="store_true", help="copies only (no DLRM-Bench kernels)")
    parser.add_argument("--out", help="write the table as CSV here")
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        sys.exit("bench_l2_flush.py needs a CUDA GPU (it times with CUDA events and a spin kernel)")
    from kbstudy.harness.timing import l2_flusher, spin_cycles_per_us
    from kbstudy.suites.dlrm_bench import instantiate, load_dlrm_candidates, load_dlrm_problems

    device = "cuda"
    torch.set_grad_enabled(False)
    write, read = l2_flusher(device, "write"), l2_flusher(device, "read")
    second = l2_flusher(device, "read")  # another buffer, so write_read's read evicts the zeroed one's lines
    flushes = {"write": write, "write_read": lambda: (write(), second()), "read": read, "none": None}
    cycles = int(args.spin_us * spin_cycles_per_us(device))
    props = torch.cuda.get_device_properties(device)
    print(f"{props.name}: L2 {props.L2_cache_size / 2**20:.0f} MiB; {args.reps} calls per state, medians in us")
    rows = []

    def measure(kind: str, label: str, nbytes: float, fn) -> None:
        samples, per_state = interleaved_device_times(fn, {state: flushes[state] for state in STATES}, reps=args.reps,
                                                      device=device, spin_cycles=cycles, spin_us=args.spin_us)
        overran = sum(per_state.values())  # (over the four states, as the table has always counted it)
        for state in STATES:
            rows.append((kind, label, float(nbytes), state, *quartile_row(samples[state]), args.reps, overran))
        print(f"{kind:>6} {label:>6} {nbytes / 1e6:8.1f} MB " +
              " ".join(f"{s}={statistics.median(samples[s]):.1f}" for s in STATES) + f" overran={overran}",
              flush=True)

    problems = load_dlrm_problems(1.0)
    work = {p.problem_id: problem_bytes(p, device) for p in problems}
    sizes = [(f"p{pid}", nbytes) for pid, nbytes in sorted(work.items())] + [("gen", mib << 20) for mib in GENERIC_MIB]
    for label, nbytes in sizes:
        src = torch.ones(int(nbytes) // 2, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        measure("copy", label, nbytes, lambda: dst.copy_(src))
        src = dst = None  # free them before the next size (a del here reads as undefined names in the lambda)
        torch.cuda.empty_cache()
    if not args.no_kernels:
        cands = {c.problem_id: c for c in load_dlrm_candidates()}
        for problem in problems:
            _, model, inputs = instantiate(problem, cands[problem.problem_id].source, device)
            measure("kernel", f"p{problem.problem_id}", work[problem.problem_id], lambda: model(*inputs))
            model = inputs = None
            torch.cuda.empty_cache()
    if args.out:
        import pandas as pd

        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows, columns=COLUMNS).to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
