"""Harness overhead per evaluation: wall time the evaluation path adds around a candidate's own work.

Evaluates ``null:reference`` (the reference as its own candidate) on a set of level-1 problems at a small size scale,
with timing and the torch.compile baseline off, and reports per evaluation: the worker's wall time and its stages
(``metadata.stage_seconds``: load, construct, inputs, run_first, run, verify), plus the batch's wall time per
evaluation. Run on a CPU here (numbers labelled CPU) or on a GPU with ``--device cuda``.

    python scripts/bench_overhead.py --kernelbench ../shared/kernelbench --problems 19 20 21 22 23 --size-scale 0.0625
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", default="../shared/kernelbench", help="folder with kernelbench_levels_1-3.jsonl")
    parser.add_argument("--problems", type=int, nargs="+", default=[19, 20, 21, 22, 23, 24, 25, 26])
    parser.add_argument("--size-scale", type=float, default=0.0625)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", help="also write the summary here")
    args = parser.parse_args()

    from kbstudy.harness.candidates import null_candidates
    from kbstudy.harness.config import EvalConfig, hardware_label
    from kbstudy.harness.orchestrator import evaluate_batch
    from kbstudy.harness.problems import load_problems
    from kbstudy.records.store import RecordStore

    problems = load_problems(Path(args.kernelbench) / "kernelbench_levels_1-3.jsonl", levels=[1],
                             problem_ids=args.problems)
    candidates = [c for p in problems for c in null_candidates(p, ["reference"])]
    with tempfile.TemporaryDirectory() as tmp:
        store = RecordStore(tmp)
        cfg = EvalConfig(run="bench-overhead", device=args.device, size_scale=args.size_scale, compile_baseline=False,
                         eager_baseline=False, time_candidates=False, progress=False)
        t0 = time.perf_counter()
        evaluate_batch(problems, candidates, store, cfg)
        batch_s = time.perf_counter() - t0
        rows = store.evaluations()
    stages: dict[str, list[float]] = {}
    for row in rows:
        for stage, seconds in (row["metadata"].get("stage_seconds") or {}).items():
            stages.setdefault(stage, []).append(seconds)
    summary = {
        "device": args.device, "hardware": hardware_label(args.device), "size_scale": args.size_scale,
        "evaluations": len(rows), "batch_s_per_evaluation": batch_s / max(1, len(rows)),
        "worker_wall_s_median": statistics.median(r["worker_wall_s"] for r in rows),
        "stage_s_median": {k: statistics.median(v) for k, v in sorted(stages.items())},
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
