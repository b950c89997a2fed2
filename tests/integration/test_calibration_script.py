"""The order of work in scripts/h200_calibration.sh, with the calibrate command replaced by a stub that logs its
arguments (the real command runs on the H200; its CPU path is tested in tests/integration/test_calibration.py, its
lanes in tests/integration/test_audit.py)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, **env) -> list[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.txt"
    stub = bin_dir / "python3"
    stub.write_text(f"#!/bin/sh\necho \"$CUDA_VISIBLE_DEVICES $*\" >> {log}\n")
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    full = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "OUT": str(tmp_path / "out"),
            "RECORDS_DIR": str(tmp_path / "records"), "KBSTUDY_GIT_COMMIT": "test", "TMPDIR": str(tmp_path / "tmp"),
            **env}
    (tmp_path / "out").mkdir()
    (tmp_path / "tmp").mkdir()
    run = subprocess.run(["bash", str(REPO / "scripts" / "h200_calibration.sh"), "300"], cwd=REPO, env=full,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "out" / "calibration.tar.gz").exists()
    assert not any((tmp_path / "tmp").iterdir()), "the script's working copy must not outlive it"
    return log.read_text().splitlines()


def _step(call: str) -> str:
    """'level1', 'level1 45', 'dlrm' or 'level23' (with its lane), with the precision; 'plan' for the lane plan."""
    words = call.split()
    if "--plan-lanes" in words:
        return "plan " + words[words.index("--lanes") + 1]
    prec = words[words.index("--precision") + 1]
    lane = f" lane {words[words.index('--lane') + 1]}" if "--lane" in words else ""
    ids = [words[i + 1] for i, w in enumerate(words) if w == "--problem-id"]
    if "--dlrm" in words:
        return f"dlrm {prec}"
    if "2" in [words[i + 1] for i, w in enumerate(words) if w == "--level"]:
        return f"level23 {prec}{lane}"
    return f"level1 {prec} " + (" ".join(ids) if len(ids) < 10 else f"{len(ids)} problems")


def _in_order(steps: list[str]) -> list[str]:
    """The steps, with each group of shared lanes sorted (they run at once: their log order is the scheduler's)."""
    out, group = [], []
    for step in steps:
        if re.search(r" lane \d+$", step):
            group.append(step)
        else:
            out, group = out + sorted(group) + [step], []
    return out + sorted(group)


def test_one_gpu_defers_problem_45_after_everything_else(tmp_path):
    calls = _run(tmp_path, GPUS="0")
    steps = [_step(c) for c in calls]
    # the lane plan runs once, in the background from the start, and before any level-2/3 lane
    assert steps.count("plan 3") == 1
    assert steps.index("plan 3") < min(i for i, step in enumerate(steps) if step.startswith("level23"))
    assert _in_order([step for step in steps if step != "plan 3"]) == [
        "level1 fp32 99 problems", "level1 bf16 99 problems", "dlrm fp32", "dlrm bf16",
        "level23 fp32 lane 0", "level23 fp32 lane 1", "level23 fp32 lane 2", "level23 fp32 lane solo",
        "level23 bf16 lane 0", "level23 bf16 lane 1", "level23 bf16 lane 2", "level23 bf16 lane solo",
        "level1 fp32 45", "level1 bf16 45"]
    assert all(c.startswith("0 -m kbstudy calibrate") for c in calls if "--plan-lanes" not in c)
    assert " --problem-id 45 " not in calls[0] + " "
    assert all("--lanes 3" in c for c in calls if "--level 2" in c)


def test_two_gpus_one_precision_each_and_defer_can_be_emptied(tmp_path):
    calls = _run(tmp_path, GPUS="0 1", DEFER="", LANES="1")  # LANES=1: one process per GPU, no plan
    by_gpu = {gpu: [_step(c) for c in calls if c.startswith(gpu + " ")] for gpu in ("0", "1")}
    assert by_gpu == {"0": ["level1 fp32 100 problems", "dlrm fp32", "level23 fp32"],
                      "1": ["level1 bf16 100 problems", "dlrm bf16", "level23 bf16"]}
    assert not any("--lane" in c for c in calls)


def test_two_gpus_run_their_precisions_lanes_on_their_own_gpu_after_one_plan(tmp_path):
    calls = _run(tmp_path, GPUS="0 1", DEFER="")
    assert sum("--plan-lanes" in c for c in calls) == 1
    by_gpu = {gpu: sorted(_step(c) for c in calls if c.startswith(gpu + " ") and "--level 2" in c) for gpu in "01"}
    assert by_gpu == {"0": [f"level23 fp32 lane {k}" for k in ("0", "1", "2", "solo")],
                      "1": [f"level23 bf16 lane {k}" for k in ("0", "1", "2", "solo")]}
