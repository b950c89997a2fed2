"""The background CUDA build queue (``kbstudy.harness.builds.BuildQueue``), on a CPU.

The build process only imports the candidate's source (which is what compiles a ``load_inline`` extension), so these
candidates are detected as CUDA (``__global__`` in a comment) but need no compiler: what is tested is the queue --
problem order, waiting for a problem's own builds only, failures recorded, low priority, and an interrupted batch
leaving no build process behind.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import time

import pytest

from kbstudy.harness.build_cache import extensions_dir
from kbstudy.harness.builds import BuildQueue
from kbstudy.harness.candidates import make_candidate
from kbstudy.harness.child.build import BUILD_NICENESS
from kbstudy.harness.config import EvalConfig

MODEL_NEW = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def _cuda_candidate(problem_id: int, body: str) -> object:
    source = f"# __global__ (detected as a CUDA candidate)\nimport os, time\n{body}\n{MODEL_NEW}"
    cand = make_candidate(source, level=1, problem_id=problem_id, model_config="test")
    assert cand.backend == "cuda"
    return cand


def _marker(tmp_path, name: str) -> str:
    """Source that records the build's niceness and the time it ran, in a file named ``name``."""
    path = tmp_path / name
    return f"open({str(path)!r}, 'w').write(f'{{os.nice(0)}} {{time.time()}}')"


def _build_all(candidates, tmp_path, jobs: int) -> dict:
    """Every candidate built, as a batch's problem loop would wait for them; the queue closed afterwards."""
    queue = BuildQueue(candidates, _config(tmp_path, jobs), "cpu")
    try:
        queue.wait(candidates)
    finally:
        queue.close()
    return queue.results


def _config(tmp_path, jobs: int) -> EvalConfig:
    return EvalConfig(device="cpu", build_jobs=jobs, cache_dir=str(tmp_path / "cache"), load_timeout_s=60,
                      progress=False)


def test_builds_run_in_order_at_low_priority_and_failures_are_recorded(tmp_path):
    ok1 = _cuda_candidate(1, _marker(tmp_path, "b1"))
    ok2 = _cuda_candidate(2, _marker(tmp_path, "b2"))
    broken = _cuda_candidate(3, "raise RuntimeError('nvcc said no')")
    results = _build_all([ok1, ok2, broken], tmp_path, jobs=1)
    assert results[ok1.sha256]["built"] and results[ok2.sha256]["built"]
    assert not results[broken.sha256]["built"] and "nvcc said no" in results[broken.sha256]["error"]
    nice1, t1 = (tmp_path / "b1").read_text().split()
    nice2, t2 = (tmp_path / "b2").read_text().split()
    # one job at a time, in the order given; niceness is relative to this process's
    assert float(t1) < float(t2)
    assert min(int(nice1), int(nice2)) >= min(os.nice(0) + BUILD_NICENESS, 19)


def test_wait_returns_once_the_problems_own_builds_are_done(tmp_path):
    first = _cuda_candidate(1, _marker(tmp_path, "first"))
    slow = _cuda_candidate(2, "time.sleep(30)")
    queue = BuildQueue([first, slow], _config(tmp_path, jobs=2), "cpu")
    try:
        started = time.monotonic()
        queue.wait([first])
        assert time.monotonic() - started < 25, "waited for another problem's build"
        assert queue.results[first.sha256]["built"]
        assert slow.sha256 not in queue.results
    finally:
        started = time.monotonic()
        queue.close()
    # close() kills the running build: no 30 s sleep left behind
    assert time.monotonic() - started < 10


def test_close_cancels_builds_not_started(tmp_path):
    slow = _cuda_candidate(1, "time.sleep(30)")
    never = _cuda_candidate(2, _marker(tmp_path, "never"))
    queue = BuildQueue([slow, never], _config(tmp_path, jobs=1), "cpu")
    time.sleep(1.0)
    queue.close()
    time.sleep(1.0)
    assert not (tmp_path / "never").exists()
    with pytest.raises(concurrent.futures.CancelledError):  # a build that never started was cancelled
        queue.wait([never])


def test_a_build_process_that_cannot_start_is_a_result_not_an_exception(tmp_path, monkeypatch):
    """The OS refusing a process (out of PIDs, a broken pipe) fails that build only; the batch goes on and the worker
    builds the candidate itself later."""
    from kbstudy.harness import builds

    def no_process(*args, **kwargs):
        raise OSError("Resource temporarily unavailable")

    monkeypatch.setattr(builds, "Child", no_process)
    cand = _cuda_candidate(1, "")
    results = _build_all([cand], tmp_path, jobs=1)
    assert results[cand.sha256]["built"] is False
    assert "did not start: OSError: Resource temporarily unavailable" in results[cand.sha256]["error"]


def test_child_kill_from_two_threads_closes_the_pipe_once(monkeypatch):
    # BuildQueue.close() and the build's own thread can kill one build process at the same moment; each used to close
    # the connection, and the second close hit a closed descriptor (EBADF: a flaky test under CPU load)
    import threading

    from kbstudy.harness.pool import Child, start_forkserver

    start_forkserver("cpu")
    child = Child()
    child.wait_idle()
    real_close, calls = child.conn.close, []

    def slow_close():
        calls.append(threading.get_ident())
        time.sleep(0.2)  # widens the window in which the other thread would close it too
        real_close()

    monkeypatch.setattr(child.conn, "close", slow_close)
    errors = []

    def kill():
        try:
            child.kill()
        except Exception as exc:  # noqa: BLE001 - what the test looks for
            errors.append(exc)

    threads = [threading.Thread(target=kill) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and len(calls) == 1 and child.conn.closed and not child.process.is_alive()
    child.kill()  # and once more, later: nothing left to do


# ------------------------------------------------------------------------------ a build lock left by a killed build


def _stale_build_lock(tmp_path, cand, name: str = "ext"):
    """torch's build lock file for extension ``name`` of ``cand``, as a build killed mid-way leaves it."""
    folder = extensions_dir(tmp_path / "cache", cand.sha256) / name
    folder.mkdir(parents=True)
    (folder / "lock").write_text("")
    return folder / "lock"


def test_a_stale_build_lock_is_removed_not_waited_on(tmp_path):
    # the source does what torch.utils.cpp_extension._jit_compile does around a build, with torch's own FileBaton:
    # without kbstudy's lock, wait() polls the leftover file until the load timeout
    body = ("from torch.utils.cpp_extension import _get_build_directory\n"
            "from torch.utils.file_baton import FileBaton\n"
            "baton = FileBaton(os.path.join(_get_build_directory('ext', False), 'lock'))\n"
            "if baton.try_acquire():\n    baton.release()\nelse:\n    baton.wait()\n")
    cand = _cuda_candidate(1, body)
    stale = _stale_build_lock(tmp_path, cand)
    started = time.monotonic()
    results = _build_all([cand], tmp_path, jobs=1)  # load timeout 60 s
    assert results[cand.sha256]["built"], results[cand.sha256]
    assert time.monotonic() - started < 30 and not stale.exists()


@pytest.mark.slow
def test_a_real_load_inline_build_goes_through_a_stale_build_lock(tmp_path):
    from torch.utils.cpp_extension import is_ninja_available

    if shutil.which("c++") is None or not is_ninja_available():
        pytest.skip("needs a C++ compiler and ninja")
    body = ("from torch.utils.cpp_extension import load_inline\n"
            "ext = load_inline(name='kbstudy_lock_test', cpp_sources='int add1(int x) { return x + 1; }',\n"
            "                  functions=['add1'])\nassert ext.add1(2) == 3\n")
    cand = _cuda_candidate(1, body)
    stale = _stale_build_lock(tmp_path, cand, "kbstudy_lock_test")
    results = _build_all([cand], tmp_path, jobs=1)
    assert results[cand.sha256]["built"], results[cand.sha256]
    assert not stale.exists()


def test_a_live_build_lock_is_waited_for_not_removed(tmp_path):
    # a second loader of the same candidate (two batches sharing a cache) waits for the first, whose lock file is live
    import threading

    from kbstudy.harness.loading import extensions_lock

    root = tmp_path / "ext_root"
    holding, release = threading.Event(), threading.Event()
    live = root / "ext" / "lock"

    def first_loader():
        with extensions_lock(root):
            live.parent.mkdir(parents=True)
            live.write_text("")
            holding.set()
            release.wait(10)
            live.unlink()  # torch removes its lock file when its build ends

    thread = threading.Thread(target=first_loader)
    thread.start()
    assert holding.wait(10)
    threading.Timer(1.0, release.set).start()
    started = time.monotonic()
    with extensions_lock(root) as removed:
        waited = time.monotonic() - started
    thread.join(10)
    assert waited >= 0.8 and removed == []


def test_without_an_extensions_folder_nothing_is_locked(monkeypatch):
    from kbstudy.harness.loading import extensions_lock

    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    with extensions_lock() as removed:
        assert removed == []


def test_an_unlockable_extensions_folder_loads_unlocked(tmp_path, monkeypatch):
    # a file system without flock must not turn every candidate's load into an error
    import fcntl

    from kbstudy.harness import loading

    def no_flock(*args):
        raise OSError(37, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    stale = tmp_path / "ext" / "lock"
    stale.parent.mkdir(parents=True)
    stale.write_text("")
    with loading.extensions_lock(tmp_path) as removed:
        assert removed == []
    assert stale.exists()  # not ours to remove without the lock
