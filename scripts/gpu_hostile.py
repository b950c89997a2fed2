"""Every hostile candidate file (tests/adversarial/hostile/) through evaluate_batch on a GPU: 19_ReLU at 1/4 size, no
timing, each record printed beside the outcome its file expects.

    KBSTUDY_KERNELBENCH_DIR=<data folder> python3 scripts/gpu_hostile.py OUT
"""
import json
import os
import sys
from pathlib import Path

from kbstudy.harness.candidates import make_candidate
from kbstudy.harness.config import EvalConfig
from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.harness.problems import load_problems
from kbstudy.records.store import RecordStore

if __name__ == "__main__":
    out = Path(sys.argv[1])
    problems = load_problems(os.environ["KBSTUDY_KERNELBENCH_DIR"] + "/kernelbench_levels_1-3.jsonl", levels=[1],
                             problem_ids=[19])
    cands, expected = [], {}
    for path in sorted(Path("tests/adversarial/hostile").glob("*.py")):
        text = path.read_text()
        expected[path.stem] = text.splitlines()[1].split(":", 1)[1].strip()
        cands.append(make_candidate(text, level=1, problem_id=19, model_config=path.stem))
    cfg = EvalConfig(run="gpu-hostile", device="cuda", size_scale=0.25, time_candidates=False,
                     compile_baseline=False, run_timeout_s=60, progress=False)
    store = RecordStore(out)
    evaluate_batch(problems, cands, store, cfg)
    for row in store.evaluations():
        m = row["model_config"]
        print(json.dumps({"candidate": m, "outcome": row["outcome"], "expected": expected.get(m),
                          "escaped": (row.get("metadata") or {}).get("escaped_processes"),
                          "error": (row.get("error_message") or "")[:100]}))
