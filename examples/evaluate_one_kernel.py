"""Evaluate one kernel file from Python: the API behind ``kbstudy eval``.

    python examples/evaluate_one_kernel.py [--gpu]

Reads the current level-1 problems from the KernelBench data folder (``kbstudy data where``) and writes one record to
``runs/my-run-api/`` (a rerun finds it there and evaluates nothing). On a CPU it runs at 1/16 of the problem's sizes
with no ``torch.compile`` baseline; ``--gpu`` runs on the GPU at a quarter of the sizes (current level-1 problems are
sized for a 141 GB H200).
"""
import sys
from pathlib import Path

from kbstudy.harness.candidates import make_candidate
from kbstudy.harness.config import EvalConfig
from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.harness.problems import load_problems
from kbstudy.pipeline.data import resolve_kernelbench_dir
from kbstudy.records.store import RecordStore

if __name__ == "__main__":  # required: kbstudy's worker processes re-import the main script
    problems = load_problems(resolve_kernelbench_dir() / "kernelbench_levels_1-3.jsonl", levels=[1], problem_ids=[19])
    source = (Path(__file__).parent / "my-kernels" / "level_1_problem_19_sample_0_kernel.py").read_text()
    candidate = make_candidate(source, level=1, problem_id=19, model_config="my-kernels")
    cfg = (EvalConfig(run="my-run-api", device="cuda", size_scale=0.25) if "--gpu" in sys.argv else
           EvalConfig(run="my-run-api", device="cpu", size_scale=0.0625, compile_baseline=False))
    store = RecordStore("runs/my-run-api")
    summary = evaluate_batch(problems, [candidate], store, cfg)
    record = store.evaluations()[-1]
    print(f"{summary.written} records written; outcome {record['outcome']}, "
          f"KernelBench-correct {record['kernelbench_correct']}, kbstudy-correct {record['kbstudy_correct']}, "
          f"speedup over eager {record['speedup_vs_eager']}")
