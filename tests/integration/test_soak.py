"""Issue 32: the short soak (``scripts/soak.py``): 60 candidates, every hostile kind of ``tests/adversarial/hostile/``
among them, the orchestrator killed with SIGKILL once and resumed. Nothing lost, duplicated or leaked, every hostile
candidate with its expected outcome, no candidate output in the orchestrator's console, in under 90 s."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbstudy.pipeline.data import resolve_kernelbench_dir

REPO = Path(__file__).resolve().parents[2]
KERNELBENCH = resolve_kernelbench_dir(required=False)
HOSTILE_KINDS = sorted(p.stem for p in (REPO / "tests" / "adversarial" / "hostile").glob("*.py"))


@pytest.fixture(scope="module")
def soak(tmp_path_factory):
    if not (KERNELBENCH / "kernelbench_levels_1-3.jsonl").is_file():
        pytest.skip(f"shared KernelBench data not found in {KERNELBENCH}")
    if not sys.platform.startswith("linux"):
        pytest.skip("the soak reads /proc")
    work = tmp_path_factory.mktemp("soak")
    out = work / "report.json"
    # one honest problem, verdicts only and two KernelBench trials: the robustness, not the verdicts, is under test
    command = [sys.executable, str(REPO / "scripts" / "soak.py"), "--candidates", "60",
               "--hostile-share", str(len(HOSTILE_KINDS) / 60), "--kills", "1", "--problems", "19",
               "--size-scale", "0.01", "--trials", "2", "--fresh-trials", "0", "--variants", "",
               "--structural-variants", "", "--no-timing", "--run-timeout", "5", "--file-size-limit", str(32 << 20),
               "--leak-wait", "8", "--seed", "3",
               "--kernelbench", str(KERNELBENCH), "--work", str(work / "run"), "--out", str(out)]
    started = time.monotonic()
    run = subprocess.run(command, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    seconds = time.monotonic() - started
    assert run.returncode == 0, run.stderr[-3000:]
    return {"report": json.loads(out.read_text()), "seconds": seconds}


@pytest.mark.slow
def test_nothing_lost_duplicated_or_dead(soak):
    report = soak["report"]
    assert report["candidates"] == 60 and report["records"] >= 60
    assert report["lost"] == 0 and report["duplicated"] == 0
    assert len(report["kills"]) == 1 and report["batch_deaths"] == []


@pytest.mark.slow
def test_every_hostile_kind_ran_with_its_expected_outcome(soak):
    report = soak["report"]
    assert set(HOSTILE_KINDS) <= set(report["outcomes_by_kind"]), report["outcomes_by_kind"]
    assert report["wrong_outcomes"] == []
    assert report["escaped_processes_by_kind"]["sleeping_children"] >= 2  # both sleepers found and killed


@pytest.mark.slow
def test_nothing_leaked(soak):
    leaked = soak["report"]["leaked"]
    assert leaked["descriptors"] == 0 and leaked["processes"] == 0 and leaked["shm_files"] == 0, leaked
    assert soak["report"]["kills"][0]["processes_left"] == 0
    assert soak["report"]["console_leaks"] == 0  # the output flood stayed in its own record


@pytest.mark.slow
def test_the_short_soak_is_short(soak):
    assert soak["seconds"] < 90, soak["seconds"]
