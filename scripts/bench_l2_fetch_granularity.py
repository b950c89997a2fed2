"""Does the L2's DRAM fetch granularity cost our gathers? Device times of DLRM-Bench kernels under each setting of
``cudaLimitMaxL2FetchGranularity``.

The floors count compulsory bytes, ``kbstudy.suites.dlrm_bench.roofline``'s ``sector_bytes`` the same traffic in whole
32-byte sectors. But the L2 may fetch more than the sectors a request touches: CUDA's ``cudaLimitMaxL2FetchGranularity``
(0-128 bytes, "a hint", CUDA Runtime API, ``cudaDeviceSetLimit``) bounds how much it fetches from DRAM per miss. If the
default is 64 bytes, each of problem 6's 136-byte int8 rows (five 32-byte sectors; 8-byte aligned, so it starts at most
56 bytes into a 64-byte block and always spans three) costs three 64-byte fetches (192 bytes), and no kernel can
approach the sector count. This script reads the default, then times kernels with
the limit set to each of 32, 64 and 128 bytes and left at the default, interleaved call by call; each call timed as the
device time is (``kbstudy.harness.timing.device_timed_call`` after ``l2_flusher(device, "read")``: a clean, cold L2, the host
hidden behind a spin kernel, CUDA events). Workloads: the shipped kernels of problems 1 (512-byte rows, whole sectors:
a control), 5 (4-byte state entries) and 6 at full size on their first input set, and copies of problem 6's
compulsory and sector bytes (streams: a control). The limit is process-wide state: this is a diagnostic outside the
evaluation (no candidate may set it; the harness never does). GPU only::

    python3 scripts/bench_l2_fetch_granularity.py --out $OUT/fetch.csv
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere: the repository's kbstudy

#: ``cudaLimitMaxL2FetchGranularity`` in ``enum cudaLimit`` (CUDA Runtime API, driver_types.h)
LIMIT_L2_FETCH = 0x05
#: the settings interleaved, bytes; ``None``: the default read at start
SETTINGS = (None, 32, 64, 128)
COLUMNS = ("kind", "label", "bytes", "granularity", "median_us", "q1_us", "q3_us", "reps", "host_overran")


def cudart():
    """The CUDA runtime library torch loaded (``libcudart.so*`` from the process's mapped libraries, else torch's
    ``nvidia/*/lib`` wheels, else the loader's default). Raises ``OSError`` if none loads."""
    names = []
    try:
        with open("/proc/self/maps") as maps:
            names += sorted({line.split()[-1] for line in maps if "libcudart.so" in line})
    except OSError:
        pass
    import torch

    site = Path(torch.__file__).resolve().parents[1]
    names += sorted(glob.glob(str(site / "nvidia" / "*" / "lib" / "libcudart.so*")))
    names += ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise OSError("no libcudart found")


def get_limit(rt) -> int:
    """``cudaDeviceGetLimit(cudaLimitMaxL2FetchGranularity)`` in bytes. Raises ``RuntimeError`` on a CUDA error."""
    value = ctypes.c_size_t(0)
    err = rt.cudaDeviceGetLimit(ctypes.byref(value), LIMIT_L2_FETCH)
    if err:
        raise RuntimeError(f"cudaDeviceGetLimit: error {err}")
    return int(value.value)


def set_limit(rt, nbytes: int) -> None:
    """``cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, nbytes)``. Raises ``RuntimeError`` on a CUDA error."""
    err = rt.cudaDeviceSetLimit(LIMIT_L2_FETCH, ctypes.c_size_t(nbytes))
    if err:
        raise RuntimeError(f"cudaDeviceSetLimit({nbytes}): error {err}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20, help="timed calls per setting (default 20)")
    parser.add_argument("--spin-us", type=float, default=2000.0, help="the spin before each call, us (default 2000)")
    parser.add_argument("--problems", default="1,5,6", help="shipped kernels to time (default 1,5,6)")
    parser.add_argument("--out", help="write the table as CSV here")
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        sys.exit("bench_l2_fetch_granularity.py needs a CUDA GPU (it sets a CUDA device limit and times with events)")
    from bench_l2_flush import interleaved_device_times, problem_bytes, quartile_row

    from kbstudy.harness.timing import l2_flusher, spin_cycles_per_us
    from kbstudy.suites.dlrm_bench import instantiate, load_dlrm_candidates, load_dlrm_problems
    from kbstudy.suites.dlrm_bench.measurement_run import floor_inputs
    from kbstudy.suites.dlrm_bench.roofline import compulsory_work

    device = "cuda"
    torch.set_grad_enabled(False)
    torch.zeros(1, device=device)  # the primary context, which the runtime calls below act on
    rt = cudart()
    default = get_limit(rt)
    flush = l2_flusher(device, "read")
    cycles = int(args.spin_us * spin_cycles_per_us(device))
    print(f"{torch.cuda.get_device_name(device)}: cudaLimitMaxL2FetchGranularity default {default} bytes; "
          f"{args.reps} calls per setting, medians in us", flush=True)
    rows = []

    def measure(kind: str, label: str, nbytes: float, fn) -> None:
        def setting_then_flush(setting):
            def prepare():
                torch.cuda.synchronize(device)
                set_limit(rt, default if setting is None else setting)
                flush()
            return prepare

        samples, overran = interleaved_device_times(fn, {s: setting_then_flush(s) for s in SETTINGS}, reps=args.reps,
                                                    device=device, spin_cycles=cycles, spin_us=args.spin_us)
        torch.cuda.synchronize(device)
        set_limit(rt, default)
        for setting in SETTINGS:
            rows.append((kind, label, float(nbytes), "default" if setting is None else str(setting),
                         *quartile_row(samples[setting]), args.reps, overran[setting]))
        print(f"{kind:>6} {label:>8} {nbytes / 1e6:8.1f} MB " + " ".join(
            f"{'default' if s is None else s}={statistics.median(samples[s]):.1f}" for s in SETTINGS)
            + f" overran={sum(overran.values())}", flush=True)

    ids = [int(x) for x in args.problems.split(",") if x.strip()]
    (p6,) = load_dlrm_problems(1.0, [6])
    consts, inputs = floor_inputs(p6, 1.0, device, 42)
    work6 = compulsory_work(6, consts, inputs)
    for label, nbytes in (("p6", work6.bytes), ("p6-sect", work6.sector_bytes)):
        src = torch.ones(int(nbytes) // 2, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        measure("copy", label, nbytes, lambda: dst.copy_(src))
        src = dst = None  # freed before the next size
        torch.cuda.empty_cache()
    cands = {c.problem_id: c for c in load_dlrm_candidates()}
    for problem in load_dlrm_problems(1.0, ids):
        _, model, inputs = instantiate(problem, cands[problem.problem_id].source, device)
        measure("kernel", f"p{problem.problem_id}", problem_bytes(problem, device), lambda: model(*inputs))
        model = inputs = None
        torch.cuda.empty_cache()
    if args.out:
        import pandas as pd

        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        table = pd.DataFrame(rows, columns=COLUMNS)
        table.insert(4, "default_granularity", default)  # the limit's value before the script set it
        table.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
