"""Every outcome category, end to end through ``evaluate_batch`` on a CPU: one real batch of hand-written candidates
for KernelBench's 19_ReLU (plus a problem whose ``get_inputs`` raises), and one batch with a hanging candidate.

Each candidate runs in its own worker process; a crash, an exit or a hang must cost that candidate only.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from support.helpers import cpu_config, records_by_config, torch_candidate

from kbstudy.harness.candidates import load_candidates, make_candidate, null_candidates
from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.harness.problems import make_problem
from kbstudy.records.schema import OUTCOMES
from kbstudy.records.store import RecordStore

SCALE = 0.0625
RELU = (1, 19)


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, killed and waiting to be reaped, counts as gone)."""
    stat = Path(f"/proc/{pid}/stat")
    if Path("/proc/self/stat").exists():
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        return state not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return not _alive(pid)


def _spawn_prelude(pid_file: Path) -> str:
    """Imports and a helper that starts a grandchild process (sleeping for an hour) once, writing its pid."""
    return f"""
import os
import subprocess
import sys

_PID_FILE = {str(pid_file)!r}


def _spawn_sleeper():
    if not os.path.exists(_PID_FILE):
        child = subprocess.Popen([{sys.executable!r}, "-c", "import time; time.sleep(3600)"])
        with open(_PID_FILE + ".tmp", "w") as fh:
            fh.write(str(child.pid))
        os.replace(_PID_FILE + ".tmp", _PID_FILE)
"""


def _kill_leftover(pid_file: Path) -> None:
    """Test hygiene: if the harness left the sleeper running, end it (by its pid) so the test run does not leak it."""
    if pid_file.exists():
        pid = int(pid_file.read_text())
        if _alive(pid):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass


# ------------------------------------------------------------------------------------------------ the main batch


@pytest.fixture(scope="module")
def main_batch(problem_by_name, kernelbench_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("outcomes")
    relu = problem_by_name["19_ReLU.py"]
    broken_source = relu.source.replace(
        "def get_inputs():", "def get_inputs():\n    raise RuntimeError('kbstudy test: get_inputs fails')", 1)
    assert broken_source != relu.source
    broken = make_problem(broken_source, level=1, problem_id=1019, name="1019_BrokenInputs.py", origin="test")
    spawn_pid_file = tmp / "spawned.pid"
    L, P = RELU
    cands = [
        torch_candidate("return torch.relu(x)", problem_id=P, name="good"),
        make_candidate("import torch\n\nclass ModelNew(torch.nn.Module:\n    pass\n", level=L, problem_id=P,
                       model_config="syntax_error"),
        make_candidate("import torch\n\nclass NotTheModel(torch.nn.Module):\n    pass\n", level=L, problem_id=P,
                       model_config="no_modelnew"),
        make_candidate("import torch\n\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n"
                       "        super().__init__()\n        raise ValueError('kbstudy test: init fails')\n",
                       level=L, problem_id=P, model_config="init_raises"),
        torch_candidate("raise ValueError('kbstudy test: forward fails')", problem_id=P, name="forward_raises"),
        torch_candidate("os.kill(os.getpid(), signal.SIGSEGV)\nreturn torch.relu(x)", problem_id=P,
                        name="sigsegv", prelude="import os\nimport signal\n"),
        torch_candidate("ctypes.string_at(0)\nreturn torch.relu(x)", problem_id=P, name="null_deref",
                        prelude="import ctypes\n"),
        torch_candidate("os._exit(3)", problem_id=P, name="exit_3", prelude="import os\n"),
        torch_candidate("raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 2.00 GiB')",
                        problem_id=P, name="oom"),
        torch_candidate("raise RuntimeError('CUDA error: an illegal memory access was encountered')",
                        problem_id=P, name="illegal_address"),
        torch_candidate("_spawn_sleeper()\nreturn torch.relu(x)", problem_id=P, name="spawns_and_returns",
                        prelude=_spawn_prelude(spawn_pid_file)),
        torch_candidate("return torch.relu(x) * 1.0", problem_id=P, name="good_last"),
    ]
    cuda = [c for c in load_candidates(kernelbench_dir / "leaderboard_kernels.jsonl", levels=[1])
            if c.problem_id == P][:1]
    assert cuda and cuda[0].backend == "cuda"
    cands.insert(3, cuda[0])
    broken_cands = [torch_candidate("return torch.relu(x)", problem_id=1019, name="on_broken_problem"),
                    *null_candidates(broken, ["reference"])]
    cands += broken_cands
    store = RecordStore(tmp / "records")
    # outcomes, not verdicts, are under test: the structural variants (seven more trials each) stay off
    cfg = cpu_config(size_scale=SCALE, structural_variants=(), cache_dir=str(tmp / "cache"))
    try:
        summary = evaluate_batch([relu, broken], cands, store, cfg)
    finally:
        spawned_gone = None
        if spawn_pid_file.exists():
            spawned_gone = _wait_gone(int(spawn_pid_file.read_text()))
        _kill_leftover(spawn_pid_file)
    return {"summary": summary, "store": store, "candidates": cands, "rows": records_by_config(store),
            "cuda_config": cuda[0].model_config, "spawned_gone": spawned_gone, "spawn_pid_file": spawn_pid_file}


def test_every_candidate_gets_exactly_one_record(main_batch):
    summary, store, cands = main_batch["summary"], main_batch["store"], main_batch["candidates"]
    rows = store.evaluations()
    assert summary.written == len(cands) == len(rows)
    assert summary.already_done == 0 and summary.unmatched == []
    assert sorted(r["candidate_id"] for r in rows) == sorted(c.candidate_id for c in cands)
    assert len({r["key"] for r in rows}) == len(rows)
    assert all(r["outcome"] in OUTCOMES for r in rows)
    assert sum(summary.outcomes.values()) == len(rows)
    assert dict(summary.outcomes) == {o: sum(r["outcome"] == o for r in rows) for o in summary.outcomes}


@pytest.mark.parametrize("config, outcome, message", [
    ("syntax_error", "compile_error", "SyntaxError"),
    ("no_modelnew", "compile_error", "ModelNew"),
    ("init_raises", "runtime_error", "init fails"),
    ("forward_raises", "runtime_error", "forward fails"),
    ("sigsegv", "crashed", "SIGSEGV"),
    ("null_deref", "crashed", "SIGSEGV"),
    ("exit_3", "crashed", "status 3"),
    ("oom", "out_of_memory", "out of memory"),
    ("illegal_address", "cuda_error", "illegal memory access"),
    ("on_broken_problem", "reference_error", "get_inputs fails"),
    ("null:reference", "reference_error", "get_inputs fails"),
])
def test_failure_outcomes(main_batch, config, outcome, message):
    row = main_batch["rows"][config]
    assert row["outcome"] == outcome, row["error_message"]
    assert message in (row["error_message"] or "")
    # a failed candidate has no verdict and no timing
    assert row["kernelbench_correct"] is None and row["kbstudy_correct"] is None
    assert row["candidate_ms_median"] is None and row["speedup_vs_eager"] is None
    # ... but its harness cost is accounted (no worker was started for a reference failure)
    if outcome != "reference_error":
        assert row["worker_wall_s"] is not None and row["worker_wall_s"] > 0


def test_compiled_flag(main_batch):
    rows = main_batch["rows"]
    assert rows["syntax_error"]["compiled"] is False and rows["no_modelnew"]["compiled"] is False
    assert rows["init_raises"]["compiled"] is True and rows["sigsegv"]["compiled"] is True


def test_cuda_candidate_skipped_on_cpu(main_batch):
    row = main_batch["rows"][main_batch["cuda_config"]]
    assert row["outcome"] == "skipped"
    assert row["backend"] == "cuda"
    assert "GPU" in row["error_message"]
    assert row["metadata"].get("torch_speedup") is not None  # the leaderboard's published numbers are kept


@pytest.mark.parametrize("config", ["good", "good_last", "spawns_and_returns"])
def test_correct_candidate_evaluated(main_batch, config):
    row = main_batch["rows"][config]
    assert row["outcome"] == "evaluated", row["error_message"]
    assert row["error_message"] is None and row["compiled"] is True
    assert row["kernelbench_correct"] is True and row["kbstudy_correct"] is True
    assert row["kernelbench_trials"] == row["kernelbench_trials_passed"] == 5
    assert row["kbstudy_failure"] is None and row["coverage"] == 1.0 and row["rel_l2_error"] == 0.0
    # timings present and consistent
    assert 3 <= row["candidate_timing_trials"] <= 5
    assert 0 < row["candidate_ms_min"] <= row["candidate_ms_median"] <= row["candidate_ms_max"]
    assert row["candidate_ms_ci_low"] <= row["candidate_ms_median"] <= row["candidate_ms_ci_high"]
    assert row["eager_ms_median"] > 0 and row["reference_key"]
    assert row["speedup_vs_eager"] == pytest.approx(row["eager_ms_median"] / row["candidate_ms_median"])
    assert row["compile_ms_median"] is None and row["speedup_vs_compile"] is None  # compile_baseline=False
    assert row["worker_wall_s"] > 0
    assert row["size_scale"] == SCALE and row["device"] == "cpu" and row["timing_method"] == "cpu_perf_counter"
    assert row["category"] == "activation" and row["problem_name"] == "19_ReLU.py"


def test_reference_records(main_batch):
    refs = list(main_batch["store"].references().values())
    by_problem = {r["problem_id"]: r for r in refs}
    assert set(by_problem) == {19, 1019}
    assert by_problem[19]["outcome"] == "evaluated" and by_problem[19]["eager_ms_median"] > 0
    assert by_problem[19]["output_shape"] == [4096 // 16, 393216 // 16]
    stages = by_problem[19]["metadata"]["stage_seconds"]  # where the problem's time went before its candidates
    assert set(stages) == {"build_wait", "setup", "gpu_wait", "time"} and stages["setup"] > 0 and stages["time"] > 0
    assert stages["build_wait"] == 0.0  # a CPU batch builds nothing
    assert stages["gpu_wait"] < 1.0  # one problem at a time: nothing else holds the device lock
    assert by_problem[1019]["outcome"] == "reference_error"
    assert "get_inputs fails" in by_problem[1019]["error_message"]


def test_spawned_process_killed_with_the_worker(main_batch):
    """A candidate that leaves a process behind: the worker's process group is killed when the candidate ends."""
    assert main_batch["spawn_pid_file"].exists(), "the candidate did not run its spawn"
    assert main_batch["spawned_gone"] is True


# ------------------------------------------------------------------------------------------------ a hang


@pytest.fixture(scope="module")
def hang_batch(problem_by_name, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hang")
    relu = problem_by_name["19_ReLU.py"]
    pid_file = tmp / "hang_child.pid"
    cands = [
        torch_candidate("_spawn_sleeper()\ntime.sleep(3600)\nreturn torch.relu(x)", problem_id=19, name="hangs",
                        prelude=_spawn_prelude(pid_file) + "import time\n"),
        torch_candidate("return torch.relu(x)", problem_id=19, name="after_hang"),
    ]
    store = RecordStore(tmp / "records")
    # short enough to keep the test fast; long enough for a fresh worker's first call (lazy torch imports)
    cfg = cpu_config(size_scale=0.01, run_timeout_s=10, cache_dir=str(tmp / "cache"))
    started = time.monotonic()
    try:
        summary = evaluate_batch([relu], cands, store, cfg)
    finally:
        gone = _wait_gone(int(pid_file.read_text())) if pid_file.exists() else None
        _kill_leftover(pid_file)
    return {"summary": summary, "rows": records_by_config(store), "seconds": time.monotonic() - started,
            "gone": gone, "pid_file": pid_file}


def test_hang_is_a_timeout_and_the_batch_goes_on(hang_batch):
    rows = hang_batch["rows"]
    assert hang_batch["summary"].written == 2
    assert rows["hangs"]["outcome"] == "timeout"
    assert rows["hangs"]["worker_wall_s"] >= 10  # the run timeout, spent waiting
    assert "run" in rows["hangs"]["error_message"]
    assert rows["after_hang"]["outcome"] == "evaluated"
    assert rows["after_hang"]["kbstudy_correct"] is True
    assert hang_batch["seconds"] < 120  # the hour-long sleep was cut short


def test_hanging_worker_children_killed(hang_batch):
    assert hang_batch["pid_file"].exists(), "the candidate did not run its spawn"
    assert hang_batch["gone"] is True
