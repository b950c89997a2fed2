"""``scripts/bench_l2_flush.py`` (what an L2 flush leaves behind). Its timing needs a GPU; on a CPU it must say so and
stop. Its byte counts are the floors': checked against the committed H200 run's ``floors.jsonl``
(``outputs/records/dlrm_bench/h200/final``; every H200 run's floors hold the same bytes)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from bench_l2_flush import STATES, problem_bytes, quartile_row  # noqa: E402
from support.committed import RECORDS, committed_records  # noqa: E402

from kbstudy.suites.dlrm_bench import load_dlrm_problems  # noqa: E402

H200_FLOORS = RECORDS / "dlrm_bench" / "h200" / "final" / "floors.jsonl"


def test_problem_bytes_are_the_floors_bytes():
    """Problems 1 and 9 (sizes fixed by their constants, not by random totals): the script moves exactly the
    compulsory bytes the committed H200 floors were computed from."""
    committed_records(H200_FLOORS.parent, file=H200_FLOORS.name)
    floors = {r["problem_id"]: r["bytes"] for r in map(json.loads, H200_FLOORS.read_text().splitlines())}
    for problem in load_dlrm_problems(1.0, [1, 9]):
        assert problem_bytes(problem, "cpu") == pytest.approx(floors[problem.problem_id], rel=1e-12)


def test_states_and_quartiles():
    assert STATES == ("write", "write_read", "read", "none")  # the per-call timing's flush first, warm last
    assert quartile_row([4.0, 1.0, 3.0, 2.0]) == (2.5, 1.75, 3.25)
    with pytest.raises(ValueError):
        quartile_row([])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU refusal")
@pytest.mark.parametrize("script", [["bench_l2_flush.py", "--no-kernels"], ["bench_l2_fetch_granularity.py"]],
                         ids=["flush", "fetch_granularity"])
def test_benchmark_refuses_to_run_without_a_gpu(script):
    """Both scripts time with CUDA events and a spin kernel (the fetch one also sets a CUDA device limit): on a CPU
    they say so and stop, before anything else."""
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / script[0]), *script[1:]],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode != 0 and "needs a CUDA GPU" in proc.stderr
