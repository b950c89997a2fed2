"""``scripts/bench_dlrm_gap.py`` (where a timed call's time goes: host, cold cache, kernels). Its timing needs a GPU;
on a CPU it must say so and stop, and its arithmetic -- the two shares of the gap from three medians -- is checked
here with real numbers of the H200's shape (``outputs/records/dlrm_bench/h200/host-gap/gap``)."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from bench_dlrm_gap import GAP_COLUMNS, split_gap  # noqa: E402


def test_split_gap_takes_medians_and_splits_the_gap_into_host_and_cold_cache():
    row = split_gap([150.0, 160.0, 400.0], [60.0, 58.0, 61.0], [41.0, 40.0, 39.0], [30.0, 35.0, 90.0],
                    host_overran=2)
    assert list(row) == list(GAP_COLUMNS)
    assert row["per_call_us"] == 160.0 and row["cold_device_us"] == 60.0 and row["warm_device_us"] == 40.0
    assert row["host_us"] == 100.0 and row["cold_cache_us"] == 20.0 and row["host_overran"] == 2
    assert row["enqueue_us"] == 35.0
    # the three parts add up to the per-call median
    assert row["warm_device_us"] + row["cold_cache_us"] + row["host_us"] == row["per_call_us"]
    assert split_gap([1.0], [1.0], [1.0])["enqueue_us"] != split_gap([1.0], [1.0], [1.0])["enqueue_us"]  # nan
    with pytest.raises(ValueError):
        split_gap([], [1.0], [1.0])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU refusal")
def test_gap_benchmark_refuses_to_run_without_a_gpu():
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_dlrm_gap.py"), "--problems", "9"],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode != 0 and "needs a CUDA GPU" in proc.stderr
