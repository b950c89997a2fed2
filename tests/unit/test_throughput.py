"""Throughput's pieces that need no process: the device lock (timed regions exclusive, untimed ones shared, timing
never starved), the build cache's key, and where a batch's time went (``kbstudy.analysis.stage_time`` and
``kbstudy throughput``) on committed records and on hand-made ones."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from kbstudy.analysis.stage_time import batch_walls, stage_breakdown
from kbstudy.cli.app import app
from kbstudy.harness.build_cache import BUILD_ENV, build_key, extensions_dir
from kbstudy.harness.gpu_lock import DeviceLock
from kbstudy.harness.orchestrator import _submit_as_built
from kbstudy.records.frames import load_frames

COMMITTED = Path(__file__).resolve().parents[2] / "outputs" / "records" / "kernelbench" / "h200" / "leaderboard"


# ------------------------------------------------------------------------------------------------ the device lock


def test_shared_holders_overlap_and_an_exclusive_one_waits_for_them():
    lock, events = DeviceLock(), []
    inside = threading.Barrier(2, timeout=5)

    def reader(name):
        with lock.shared():
            inside.wait()  # both readers are inside at once: shared holds overlap
            time.sleep(0.05)
            events.append(("reader out", name, time.time()))

    readers = [threading.Thread(target=reader, args=(i,)) for i in range(2)]
    for t in readers:
        t.start()
    time.sleep(0.01)
    with lock.exclusive():
        entered = time.time()
    for t in readers:
        t.join(5)
    assert all(t < entered for kind, _, t in events) and len(events) == 2
    assert len(lock.exclusive_windows) == 1


def test_a_waiting_exclusive_request_stops_new_shared_ones():
    lock, order = DeviceLock(), []
    first_in, release = threading.Event(), threading.Event()

    def long_reader():
        with lock.shared():
            first_in.set()
            release.wait(5)
        order.append("reader 1 out")

    def writer():
        with lock.exclusive():
            order.append("writer")

    def late_reader():
        with lock.shared():
            order.append("reader 2")

    threads = [threading.Thread(target=long_reader)]
    threads[0].start()
    first_in.wait(5)
    threads.append(threading.Thread(target=writer))
    threads[1].start()
    time.sleep(0.05)  # the writer is waiting
    threads.append(threading.Thread(target=late_reader))
    threads[2].start()
    time.sleep(0.05)
    assert order == []  # the late reader queues behind the waiting writer
    release.set()
    for t in threads:
        t.join(5)
    assert order == ["reader 1 out", "writer", "reader 2"]


def test_a_process_change_waits_for_a_timed_region_on_a_cpu_only():
    # a worker process starting or ending is work on a CPU device (the processor), none on a GPU's lock
    lock, entered = DeviceLock(), {}
    in_timed, release = threading.Event(), threading.Event()

    def timed():
        with lock.exclusive():
            in_timed.set()
            release.wait(5)

    def change(device):
        with lock.process_change(device):
            entered[device] = time.time()

    holder = threading.Thread(target=timed)
    holder.start()
    in_timed.wait(5)
    changes = [threading.Thread(target=change, args=(d,)) for d in ("cuda:0", "cpu")]
    for t in changes:
        t.start()
    time.sleep(0.05)
    assert list(entered) == ["cuda:0"]  # the CPU's process change waits for the timed region
    released = time.time()
    release.set()
    for t in (holder, *changes):
        t.join(5)
    assert entered["cpu"] >= released


def test_exclusive_windows_never_overlap_under_contention():
    lock = DeviceLock()

    def work(i):
        for _ in range(5):
            with lock.shared():
                time.sleep(0.001)
            with lock.exclusive():
                time.sleep(0.002)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    windows = sorted(lock.exclusive_windows)
    assert len(windows) == 20
    assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:]))


def test_waiting_is_counted_per_thread():
    lock = DeviceLock()
    assert lock.take_wait() == 0.0
    with lock.exclusive():
        pass
    assert 0.0 <= lock.take_wait() < 1.0 and lock.take_wait() == 0.0


# ------------------------------------------------------------------------------------------------ the build cache


def test_the_build_key_follows_source_torch_cuda_and_build_flags(tmp_path, monkeypatch):
    env = {name: "" for name in BUILD_ENV}
    key = build_key("a" * 64, env)
    assert len(key) == 20 and key == build_key("a" * 64, dict(env))
    assert build_key("b" * 64, env) != key  # another source
    assert build_key("a" * 64, {**env, "TORCH_CUDA_ARCH_LIST": "9.0"}) != key  # other targets
    assert build_key("a" * 64, {**env, "NVCC_APPEND_FLAGS": "-O0"}) != key  # other flags
    assert build_key("a" * 64, {**env, "UNRELATED": "1"}) == key
    monkeypatch.setattr("torch.__version__", "0.0.0-other")
    assert build_key("a" * 64, env) != key  # another torch
    monkeypatch.undo()
    monkeypatch.setattr("torch.version.cuda", "99.9")
    assert build_key("a" * 64, env) != key  # another CUDA
    monkeypatch.undo()
    assert extensions_dir(tmp_path, "a" * 64).parent == tmp_path.resolve() / "torch_extensions"


# ------------------------------------------------------------------------------------------------ where the time went


@pytest.mark.skipif(not COMMITTED.is_dir(), reason="committed leaderboard records not found")
def test_stage_breakdown_of_a_committed_folder():
    evaluations, references, _ = load_frames([COMMITTED], label="name", first_attempts=True)
    table = stage_breakdown(evaluations, references)
    assert set(table["category"]) <= {"build", "reference", "candidate", "waiting"}
    v0 = table[table["run"] == "h200-level1-leaderboard-v0-fp32"].set_index("stage")
    ran = evaluations[(evaluations["run"] == "h200-level1-leaderboard-v0-fp32") & (evaluations["outcome"] != "skipped")]
    expected = sum(float((m.get("stage_seconds") or {}).get("load", 0.0)) for m in ran["metadata"])
    assert v0.loc["load", "seconds"] == pytest.approx(expected)
    assert v0.loc["load", "records"] == len(ran)
    assert {"build_wait", "setup", "reference_time", "time"} <= set(v0.index)
    assert batch_walls(evaluations, references).empty  # those records predate metadata.batch


@pytest.mark.skipif(not COMMITTED.is_dir(), reason="committed leaderboard records not found")
def test_the_throughput_command_prints_where_the_time_went():
    result = CliRunner().invoke(app, ["throughput", str(COMMITTED)])
    assert result.exit_code == 0, result.output
    assert "kernels per GPU-minute" in result.output and "where the time went" in result.output
    assert "reference_time" in result.output and "build_wait" in result.output
    plain = CliRunner().invoke(app, ["throughput", str(COMMITTED), "--no-stages"])
    assert plain.exit_code == 0 and "where the time went" not in plain.output


def test_batch_walls_from_hand_made_records():
    batch = {"started_unix": 1000.0, "concurrency": 2}
    meta = [{"batch": batch, "span_unix": [1010.0, 1012.0], "build_done_s": 9.0,
             "stage_seconds": {"start": 0.1, "load": 0.5, "time": 1.0, "gpu_wait": 0.4}},
            {"batch": batch, "span_unix": [1011.0, 1030.0], "build_done_s": 20.0, "build_seconds": 19.0,
             "stage_seconds": {"start": 0.1, "load": 0.5, "time": 1.0, "gpu_wait": 0.2}}]
    evaluations = pd.DataFrame({"run": "r", "hardware": "h", "outcome": ["evaluated", "evaluated"], "metadata": meta})
    references = pd.DataFrame({"run": ["r"], "hardware": ["h"], "metadata": [
        {"batch": batch, "stage_seconds": {"build_wait": 9.0, "setup": 0.3, "gpu_wait": 0.0, "time": 0.7}}]})
    walls = batch_walls(evaluations, references).iloc[0]
    assert walls["wall_s"] == 30.0 and walls["first_record_s"] == 12.0 and walls["last_build_s"] == 20.0
    assert walls["kernels_per_minute"] == pytest.approx(4.0) and walls["concurrency"] == 2
    table = stage_breakdown(evaluations, references).set_index("stage")
    assert table.loc["gpu_wait", "seconds"] == pytest.approx(0.6) and table.loc["gpu_wait", "category"] == "waiting"
    assert table.loc["reference_time", "seconds"] == 0.7 and table.loc["time", "seconds"] == 2.0
    assert table.loc["build", "seconds"] == 19.0 and table.loc["build_wait", "category"] == "waiting"


# ------------------------------------------------------------------------------------------------ problems as built


def test_problems_are_handed_out_in_the_order_their_builds_end():
    class Builds:  # problem "b" is built first, then "a", then "c"
        def __init__(self):
            self.calls = 0

        def done(self, cands):
            self.calls += 1
            return {"b": True, "a": self.calls > 4, "c": self.calls > 8}[cands[0]]

    class Batch:
        def __init__(self):
            self.order = []

        def evaluate_problem(self, problem, cands):
            self.order.append(problem)

    batch = Batch()
    with concurrent.futures.ThreadPoolExecutor(1) as threads:
        futures = _submit_as_built(threads, batch, [("A", ["a"]), ("B", ["b"]), ("C", ["c"])], Builds())
        for f in futures:
            f.result()
    assert batch.order == ["B", "A", "C"]
