"""``scripts/bench_vs_kernelbench.py`` on a CPU: the kernels it picks and the commands it runs (``--dry-run``), and a
run on two kernels that writes the JSON record (KernelBench's path is recorded as skipped without a GPU, kbstudy's
records the CUDA candidates as skipped)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_vs_kernelbench.py"
#: the first 24 level-1 leaderboard kernels of claude-3.5-sonnet, as 1-based problem ids
FIRST_24 = [1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 13, 14, 16, 17, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28]

pytestmark = pytest.mark.timeout(900)


def _run(kernelbench_dir: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, str(SCRIPT), "--kernelbench-data", str(kernelbench_dir), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_dry_run_lists_the_kernels_and_the_commands(kernelbench_dir, tmp_path):
    proc = _run(kernelbench_dir, "--dry-run", "--out", str(tmp_path / "bench.json"))
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert [k["problem"] for k in plan["kernels"]] == FIRST_24
    assert {k["model"] for k in plan["kernels"]} == {"claude-3.5-sonnet"}
    assert plan["kernelbench"]["eval"]["num_correct_trials"] == 5 and plan["kernelbench"]["timeout_s"] == 180
    assert set(plan["kbstudy"]) == {"cold", "warm"}
    cold = plan["kbstudy"]["cold"]
    assert "--no-compile-baseline" in cold and "--concurrency 4" in cold and "kernelbench_v0_problems" in cold
    assert cold.count("--problem-id") == 24
    assert not (tmp_path / "bench.json").exists()


def test_a_cpu_run_writes_the_record(kernelbench_dir, tmp_path):
    out = tmp_path / "bench.json"
    proc = _run(kernelbench_dir, "--n", "2", "--device", "cpu", "--out", str(out), "--work", str(tmp_path / "work"),
                "--kernelbench-src", str(tmp_path / "no-kernelbench-here"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(out.read_text())
    assert record["problems"] == FIRST_24[:2] and record["n_kernels"] == 2
    assert record["provenance"]["git_commit"] and record["hardware"] and record["cpu_count"]
    assert set(record["phases"]) == {"cold", "warm"}
    for phase in record["phases"].values():
        assert "skipped" in phase["kernelbench"]
        kbstudy = phase["kbstudy"]
        assert kbstudy["returncode"] == 0 and kbstudy["wall_s"] > 0
        assert [k["outcome"] for k in kbstudy["kernels"]] == ["skipped", "skipped"]  # CUDA kernels, no GPU
        assert [v["problem"] for v in phase["verdicts"]] == FIRST_24[:2]
        assert all(v["agree"] is None for v in phase["verdicts"])  # nothing to compare without a GPU
        assert "kbstudy_kernels_per_minute" in phase["ratios"]
