"""``kbstudy eval --ray`` (kbstudy.pipeline.ray_batch) against a real local Ray cluster, no mocks of Ray: CPU-only
workers with two fake GPUs, so two lanes schedule; the device is the CPU.

What it pins: a batch spreads over both lanes and its records equal the plain path's (minus timing and host fields);
a lane killed mid-candidate (by the candidate itself, through its process tree) is replaced, the problem evaluated
once more and every record written exactly once with ``metadata.ray_retries``; a driver killed mid-batch loses only
the problems in flight and a plain rerun evaluates only those; the plain path never imports Ray."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray

from kbstudy.harness.candidates import load_candidates, null_candidates
from kbstudy.harness.config import EvalConfig
from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.harness.problems import load_problems
from kbstudy.pipeline.ray_batch import evaluate_batch_ray
from kbstudy.records.store import RecordStore
from kbstudy.verdict.trials import STRUCTURAL_VARIANTS

pytestmark = [pytest.mark.ray, pytest.mark.slow]

#: level-1 problems small at this scale: 19_ReLU, 21_Sigmoid
PROBLEM_IDS = [19, 21]
SIZE_SCALE = 0.03
#: fields that differ between two runs of one batch: when, where and how long
VOLATILE = ("created_utc", "hostname", "cuda_visible_devices", "git_commit",
            "candidate_timing_trials")  # timed calls: as many as fit the timing budget, so a timing field too
#: a fixed set of extra-trial seeds (one per extra trial: no fresh ones, then the two variants), so two runs compare
EXTRA_SEEDS = [11, 12]
#: fewer trials than KernelBench's five: the tests are about where records go, not about the verdicts
TRIALS = 2

#: a candidate for 19_ReLU that, the first time it loads, kills its lane: the process that started the fork server
#: (the candidate process's grandparent) -- as a node or a lane lost mid-candidate would
LANE_KILLER = '''
import os, signal, time
import torch
import torch.nn as nn

MARKER = {marker!r}
if not os.path.exists(MARKER):
    open(MARKER, "w").close()
    with open(f"/proc/{{os.getppid()}}/stat") as fh:
        lane = int(fh.read().rsplit(")", 1)[1].split()[1])
    os.kill(lane, signal.SIGKILL)
    time.sleep(60)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''

#: a candidate for 21_Sigmoid that stalls its first load long enough for the driver to be killed mid-batch
STALLER = '''
import os, time
import torch
import torch.nn as nn

MARKER = {marker!r}
if not os.path.exists(MARKER):
    open(MARKER, "w").close()
    time.sleep(120)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x)
'''


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster: 2 CPUs, 2 fake GPUs (lanes schedule on them; they evaluate on the CPU)."""
    # on a loaded machine the node's agent can start later than the raylet waits for it (the raylet then exits and
    # ray.init raises): a few attempts
    for attempt in range(3):
        try:
            ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False,
                     object_store_memory=80 << 20)
            break
        except Exception:  # noqa: BLE001 - ray.init raises a bare Exception when its node did not start
            ray.shutdown()
            if attempt == 2:
                raise
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(scope="module")
def problems(levels_file):
    return load_problems(levels_file, levels=[1], problem_ids=PROBLEM_IDS)


def _cfg(tmp: Path, run: str = "ray-test", structural: bool = False) -> EvalConfig:
    """The batch settings; the structural variants only where a test is about them (they add seven trials)."""
    return EvalConfig(run=run, device="cpu", size_scale=SIZE_SCALE, compile_baseline=False, progress=False,
                      trials=TRIALS, fresh_trials=0, structural_variants=STRUCTURAL_VARIANTS if structural else (),
                      extra_seeds=list(EXTRA_SEEDS),
                      cache_dir=str(tmp / "cache"),
                      timing={"warmup_ms": 5.0, "budget_ms": 20.0, "min_reps": 10, "max_reps": 100})


def _comparable(row: dict) -> dict:
    """A record without its timings and host fields."""
    return {k: v for k, v in row.items() if k not in VOLATILE and "_ms" not in k and "speedup" not in k
            and not k.endswith("_s")
            and k not in ("metadata", "timing_cv", "timing_reps")}


def _rows(folder: Path, name: str = "evaluations.jsonl") -> list[dict]:
    path = folder / name
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_two_lanes_records_equal_plain_path(cluster, problems, tmp_path):
    cands = [c for p in problems for c in null_candidates(p, ["reference", "zeros"])]
    messages: list[str] = []
    # with the structural variants: the driver draws their seeds too
    summary = evaluate_batch_ray(problems, cands, RecordStore(tmp_path / "ray"), _cfg(tmp_path, structural=True),
                                 echo=messages.append)
    assert summary.written == len(cands) and summary.already_done == 0
    plain = evaluate_batch(problems, cands, RecordStore(tmp_path / "plain"), _cfg(tmp_path, structural=True))
    assert plain.written == len(cands)
    ray_rows, plain_rows = _rows(tmp_path / "ray"), _rows(tmp_path / "plain")
    assert "ray: problems per lane: 1, 1" in messages, messages  # both lanes took a problem
    by_identity = {(r["key"], r["model_config"]): r for r in plain_rows}
    assert len(ray_rows) == len(plain_rows) == len(by_identity) == len(cands)
    for row in ray_rows:
        assert _comparable(row) == _comparable(by_identity[(row["key"], row["model_config"])])
        assert "ray_retries" not in row["metadata"]
        assert {t["name"] for t in row["metadata"]["extra_trials"]} >= set(STRUCTURAL_VARIANTS)
    assert sorted(r["key"] for r in _rows(tmp_path / "ray", "references.jsonl")) == \
        sorted(r["key"] for r in _rows(tmp_path / "plain", "references.jsonl"))
    # a rerun, with Ray or without, finds everything done
    again = evaluate_batch_ray(problems, cands, RecordStore(tmp_path / "plain"), _cfg(tmp_path, structural=True),
                               lanes=1,
                               echo=lambda _: None)
    assert (again.written, again.already_done) == (0, len(cands))


def test_killed_lane_is_retried_once(cluster, problems, tmp_path):
    folder = tmp_path / "cands"
    folder.mkdir()
    (folder / "level_1_problem_19_sample_0_kernel.py").write_text(LANE_KILLER.format(marker=str(tmp_path / "killed")))
    relu = [p for p in problems if p.problem_id == 19]
    cands = load_candidates(folder) + null_candidates(relu[0], ["reference"])
    out = tmp_path / "out"
    messages: list[str] = []
    summary = evaluate_batch_ray(relu, cands, RecordStore(out), _cfg(tmp_path), echo=messages.append)
    assert (tmp_path / "killed").exists(), "the candidate never ran"
    assert any("died" in m for m in messages), messages
    rows = _rows(out)
    assert summary.written == len(rows) == 2  # none lost, none duplicated
    assert {r["model_config"] for r in rows} == {c.model_config for c in cands}
    for row in rows:
        assert row["outcome"] == "evaluated", row["error_message"]
        assert row["metadata"]["ray_retries"] == 1
    assert len(_rows(out, "references.jsonl")) == 1


def test_resume_after_the_driver_is_killed(cluster, problems, tmp_path, levels_file):
    folder = tmp_path / "cands"
    folder.mkdir()
    (folder / "level_1_problem_21_sample_0_kernel.py").write_text(STALLER.format(marker=str(tmp_path / "stalled")))
    out = tmp_path / "out"
    args = [sys.executable, "-m", "kbstudy", "eval", "--problems", str(levels_file), "-c", str(folder),
            "-c", "null:reference", "--level", "1", *sum((["--problem-id", str(i)] for i in PROBLEM_IDS), []),
            "--size-scale", str(SIZE_SCALE), "--device", "cpu", "--no-compile-baseline", "--timing-budget-ms", "20",
            "--trials", str(TRIALS), "--fresh-trials", "0", "--no-structural-variants",
            "--extra-seeds", ",".join(map(str, EXTRA_SEEDS)), "--cache-dir", str(tmp_path / "cache"),
            "--out", str(out), "--run", "ray-test", "--no-progress", "--ray-address", cluster]
    driver = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        # the two problems beside the stalled one are recorded while the stalled one holds its lane
        while len(_rows(out)) < len(PROBLEM_IDS) - 1 or not (tmp_path / "stalled").exists():
            assert driver.poll() is None, driver.stdout.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the driver wrote no records in time"
            time.sleep(0.5)
        before = _rows(out)
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(30)
    assert len(before) == len(PROBLEM_IDS) - 1  # the stalled problem's records were never written
    # resumed without Ray: only what is missing is evaluated, nothing is duplicated
    cands = load_candidates(folder) + [c for p in problems for c in null_candidates(p, ["reference"])]
    summary = evaluate_batch(problems, cands, RecordStore(out), _cfg(tmp_path))
    rows = _rows(out)
    assert summary.already_done == len(before) and summary.written == len(cands) - len(before)
    assert len({(r["key"], r["model_config"]) for r in rows}) == len(rows) == len(cands)
    assert [json.dumps(r) for r in rows[:len(before)]] == [json.dumps(r) for r in before]  # appended, never rewritten


def test_plain_path_imports_no_ray(tmp_path, levels_file):
    code = ("import sys\nfrom typer.testing import CliRunner\nfrom kbstudy.cli.app import app\n"
            f"r = CliRunner().invoke(app, ['eval', '--problems', {str(levels_file)!r}, '-c', 'null:reference', "
            f"'--level', '1', '--problem-id', '19', '--size-scale', '0.03', '--device', 'cpu', "
            f"'--no-compile-baseline', '--timing-budget-ms', '20', '--out', {str(tmp_path / 'out')!r}, "
            f"'--cache-dir', {str(tmp_path / 'cache')!r}, '--no-progress'])\n"
            "assert r.exit_code == 0, r.output\nassert 'ray' not in sys.modules, 'the plain path imported Ray'\n")
    script = tmp_path / "plain.py"
    script.write_text("if __name__ == '__main__':\n" + "".join(f"    {line}\n" for line in code.splitlines()))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
