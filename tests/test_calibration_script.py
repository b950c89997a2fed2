"""The order of work in scripts/h200_calibration.sh, with the calibrate command replaced by a stub that logs its
arguments (the real command runs on the H200; its CPU path is tested in tests/core/test_calibration.py)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, **env) -> list[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.txt"
    stub = bin_dir / "python3"
    stub.write_text(f"#!/bin/sh\necho \"$CUDA_VISIBLE_DEVICES $*\" >> {log}\n")
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    full = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "OUT": str(tmp_path / "out"),
            "RECORDS_DIR": str(tmp_path / "records"), "KBSTUDY_GIT_COMMIT": "test", **env}
    (tmp_path / "out").mkdir()
    run = subprocess.run(["bash", str(REPO / "scripts" / "h200_calibration.sh"), "300"], cwd=REPO, env=full,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "out" / "calibration.tar.gz").exists()
    return log.read_text().splitlines()


def _step(call: str) -> str:
    """'level1', 'level1 45', 'dlrm' or 'level23', with the precision."""
    words = call.split()
    prec = words[words.index("--precision") + 1]
    ids = [words[i + 1] for i, w in enumerate(words) if w == "--problem-id"]
    if "--dlrm" in words:
        return f"dlrm {prec}"
    if "2" in [words[i + 1] for i, w in enumerate(words) if w == "--level"]:
        return f"level23 {prec}"
    return f"level1 {prec} " + (" ".join(ids) if len(ids) < 10 else f"{len(ids)} problems")


def test_one_gpu_defers_problem_45_after_everything_else(tmp_path):
    calls = _run(tmp_path, GPUS="0")
    assert [_step(c) for c in calls] == [
        "level1 fp32 99 problems", "level1 bf16 99 problems", "dlrm fp32", "dlrm bf16", "level23 fp32",
        "level23 bf16", "level1 fp32 45", "level1 bf16 45"]
    assert all(c.startswith("0 -m kbstudy calibrate") for c in calls)
    assert " --problem-id 45 " not in calls[0] + " "


def test_two_gpus_one_precision_each_and_defer_can_be_emptied(tmp_path):
    calls = _run(tmp_path, GPUS="0 1", DEFER="")
    by_gpu = {gpu: [_step(c) for c in calls if c.startswith(gpu + " ")] for gpu in ("0", "1")}
    assert by_gpu == {"0": ["level1 fp32 100 problems", "dlrm fp32", "level23 fp32"],
                      "1": ["level1 bf16 100 problems", "dlrm bf16", "level23 bf16"]}
