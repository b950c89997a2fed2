"""``python -m kbstudy.substitution.gpu_run --out DIR``: substitution on the seven workloads, eager and production.

For each workload and configuration: the LLM-written case (the fastest verified leaderboard kernel per operator, from
``--records``), and for the two DLRM-DCNv2 workloads also the expert case (our DLRM-Bench Triton kernels). One record
per case in ``DIR/substitutions.jsonl`` (:mod:`kbstudy.substitution.measure`); a summary table on stdout. Plain Python
with the GPU image's packages (torch, triton, numpy, pandas).

Sized for about 8 minutes on one H100: a case whose places are all refused is not timed (it only builds the workload
and runs one forward), and the timed cases run ``--reps`` x ``--steps`` steps per side. ``--budget-s`` stops starting
cases after that many seconds (the rest are recorded as ``skipped_budget``). The leaderboard kernels' CUDA builds are
cached in ``$TORCH_EXTENSIONS_DIR`` (default ``.cache/kbstudy/substitution_extensions``), shared by the processes.

The KernelBench data (``leaderboard_kernels.jsonl`` and the problem files) are read from ``--kb-dir`` (default
``$KBSTUDY_KERNELBENCH_DIR``, else ``.device/kernelbench``, what the device scripts carry).

Dry run on a CPU: ``--device cpu --tiny`` (the tiny workload configurations; every CUDA kernel is then refused by
the guard, and the Triton kernels run under ``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

from kbstudy.profiling.workloads import SEVEN
from kbstudy.substitution.kernels import dlrm_choices, kernelbench_dir, leaderboard_choices
from kbstudy.substitution.measure import CONFIGS, measure_case
from kbstudy.substitution.store import append_record

DEFAULT_RECORDS = "outputs/records/kernelbench/h200/leaderboard"
DLRM_WORKLOADS = ("dlrm_dcnv2_train", "dlrm_dcnv2_infer")


def cases(workload_names, configs) -> list[tuple[str, str, str]]:
    """(workload, config, kernel source) in run order: the eager expert cases (timed), every LLM case (mostly not
    timed: their places are refused), then the production expert cases (each process compiles the model)."""
    expert = [w for w in workload_names if w in DLRM_WORKLOADS]
    out = [(w, "eager", "expert") for w in expert if "eager" in configs]  # the timed cases first
    out += [(w, c, "llm") for c in configs for w in workload_names]
    out += [(w, c, "expert") for c in configs if c != "eager" for w in expert]  # compiled twice: the slowest
    return out


def _summary_line(r: dict) -> str:
    saving = r.get("saving_fraction")
    return (f"{r['workload']:18s} {r['config']:10s} {r['kernel_source']:6s} {r.get('outcome', '?'):18s} "
            f"subst {len(r.get('places_substituted') or []):2d} n/a {len(r.get('places_not_applicable') or []):3d} "
            f"base {r.get('baseline_ms_median') or float('nan'):9.3f} ms  sub {r.get('substituted_ms_median') or float('nan'):9.3f} ms"
            f"  saving {'-' if saving is None else f'{100 * saving:+.2f}%'}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for substitutions.jsonl")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="the tiny workload configurations (CPU dry run)")
    ap.add_argument("--workloads", nargs="*", default=list(SEVEN))
    ap.add_argument("--configs", nargs="*", default=list(CONFIGS), choices=CONFIGS)
    ap.add_argument("--sources", nargs="*", default=["llm", "expert"], choices=["llm", "expert"])
    ap.add_argument("--records", default=DEFAULT_RECORDS, help="leaderboard evaluation records (the LLM case)")
    ap.add_argument("--kb-dir", default=None, help="KernelBench data folder (default: $KBSTUDY_KERNELBENCH_DIR)")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=470.0)
    ap.add_argument("--purpose", default="first")
    ap.add_argument("--shape-variants", nargs="*", default=[],
                    help="verifier variants (kbstudy_variants) whose passing makes a leaderboard kernel shape-generic")
    ap.add_argument("--assume-shape-generic", action="store_true",
                    help="treat every kernel as shape-generic (exploration and CPU dry runs; recorded per kernel)")
    args = ap.parse_args(argv)

    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(Path(".cache/kbstudy/substitution_extensions").resolve()))
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    kb_dir = Path(args.kb_dir) if args.kb_dir else kernelbench_dir()
    generic = args.assume_shape_generic
    llm, llm_missing = [], {}
    if "llm" in args.sources:
        llm, llm_missing = leaderboard_choices(args.records, kb_dir, shape_variants=tuple(args.shape_variants))
    llm = [dataclasses.replace(c, shape_generic=True) for c in llm] if generic else llm
    expert = dlrm_choices(shape_generic=generic) if "expert" in args.sources else []
    start = time.monotonic()
    print(f"LLM kernels: {[c.operator + '=' + c.problem for c in llm]}; without a verified kernel: "
          f"{sorted(llm_missing)}; expert kernels: {[c.operator for c in expert]}", flush=True)
    for workload, config, source in cases(args.workloads, args.configs):
        if source not in args.sources:
            continue
        choices, missing = (llm, llm_missing) if source == "llm" else (expert, {})
        if time.monotonic() - start > args.budget_s:
            record = {"record_type": "substitution", "workload": workload, "config": config,
                      "kernel_source": source, "outcome": "skipped_budget", "purpose": args.purpose}
        else:
            record = measure_case(workload, config, source, choices, missing, device=args.device,
                                  size="tiny" if args.tiny else None, reps=args.reps, steps=args.steps,
                                  warmup=args.warmup, purpose=args.purpose)
        append_record(args.out, record)
        print(_summary_line(record), f"[{time.monotonic() - start:.0f} s]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
