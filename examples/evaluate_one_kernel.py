"""Evaluate one kernel file from Python: the API behind ``kbstudy eval``.

    python examples/evaluate_one_kernel.py [KERNELBENCH_JSONL] [--gpu]

Writes one record to ``runs/my-run-api/`` (a rerun finds it there and evaluates nothing). On a CPU it runs
at 1/16 of the problem's sizes with no ``torch.compile`` baseline; ``--gpu`` runs at full size on the GPU.
"""
import sys
from pathlib import Path

from kbstudy.harness.candidates import make_candidate
from kbstudy.harness.config import EvalConfig
from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.harness.problems import load_problems
from kbstudy.records.store import RecordStore

if __name__ == "__main__":  # required: kbstudy's worker processes re-import the main script
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    data = args[0] if args else "../shared/kernelbench/kernelbench_levels_1-3.jsonl"
    gpu = "--gpu" in sys.argv
    problems = load_problems(data, levels=[1], problem_ids=[19])
    source = (Path(__file__).parent / "my-kernels" / "level_1_problem_19_sample_0_kernel.py").read_text()
    candidate = make_candidate(source, level=1, problem_id=19, model_config="my-kernels")
    cfg = (EvalConfig(run="my-run-api", device="cuda") if gpu else
           EvalConfig(run="my-run-api", device="cpu", size_scale=0.0625, compile_baseline=False))
    store = RecordStore("runs/my-run-api")
    summary = evaluate_batch(problems, [candidate], store, cfg)
    record = store.evaluations()[-1]
    print(f"{summary.written} records written; outcome {record['outcome']}, "
          f"KernelBench-correct {record['kernelbench_correct']}, kbstudy-correct {record['kbstudy_correct']}, "
          f"speedup over eager {record['speedup_vs_eager']}")
