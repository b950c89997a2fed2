"""Issue 32: a batch bounded and contained for any size. Descriptors stay flat over hundreds of children under a low
``ulimit -n``; a ``kill -9`` of the orchestrator during a hanging candidate leaves no process and no shared-memory
file; a candidate's descendants, in its process group or a new session, are found and killed; host and device
out-of-memory are both ``out_of_memory``.

The process-level cases run in a subprocess of their own (a descriptor limit, a ``kill -9``), tagged through their
environment (``KBSTUDY_TEST_TAG``) so what they leave behind can be found; nothing of kbstudy is mocked.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
import torch

from kbstudy.harness import containment
from kbstudy.harness.failures import classify_exception
from kbstudy.pipeline.data import resolve_kernelbench_dir

REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------------ out of memory


@pytest.mark.parametrize("exc", [
    MemoryError(),
    RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you "
                 "tried to allocate 1099511627776 bytes. Error code 12 (Cannot allocate memory)"),
    OSError(12, "Cannot allocate memory"),
    torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB"),
])
@pytest.mark.parametrize("stage", ["load", "construct", "run"])
def test_host_and_device_out_of_memory_are_out_of_memory(exc, stage):
    assert classify_exception(exc, stage) == "out_of_memory"


def test_a_real_host_allocation_failure_is_out_of_memory():
    with pytest.raises(RuntimeError) as info:
        torch.empty(1 << 40, dtype=torch.uint8)  # 1 TiB: refused by torch's CPU allocator
    assert classify_exception(info.value, "run") == "out_of_memory"


def test_other_failures_keep_their_class():
    assert classify_exception(ValueError("bad shape"), "run") == "runtime_error"
    assert classify_exception(SyntaxError("x"), "load") == "compile_error"
    assert classify_exception(RuntimeError("CUDA error: an illegal memory access"), "run") == "cuda_error"


# ------------------------------------------------------------------------------------------------ descendants


def _alive(pid: int) -> bool:
    return (containment._stat(pid) or ("X", 0))[0] not in ("Z", "X")


def test_descendants_in_a_new_session_are_found_and_killed(tmp_path):
    """A process tree of depth 2 whose middle process exits (its child, in a new session, is re-parented to the
    subreaper) is still found and killed; the count says how many."""
    script = tmp_path / "tree.py"
    script.write_text(textwrap.dedent("""
        import os, subprocess, sys, time
        from kbstudy.harness import containment
        containment.become_subreaper()
        # a grandchild in a new session, its parent gone at once: re-parented here
        subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.Popen(['sleep', '600'], "
                          "start_new_session=True)"]).wait()
        group = subprocess.Popen(["sleep", "600"])  # one in this process group
        deadline = time.monotonic() + 10
        while len(containment.descendants(os.getpid())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        found = containment.descendants(os.getpid())
        n = containment.kill_descendants()
        containment.reap_children()
        left = containment.wait_gone(found, 5)
        print(len(found), n, len(left))
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    found, killed, left = map(int, out.stdout.split())
    assert found == 2 and killed == 2 and left == 0


def test_a_pids_cgroup_or_a_watch_bounds_the_descendants():
    """The descendant limit is above what a compiler driver starts and the pids cgroup's task bound leaves room
    for torch's threads beside it."""
    assert 16 <= containment.MAX_DESCENDANTS < containment.MAX_TASKS


# ------------------------------------------------------------------------------------------------ descriptors


_FD_SCRIPT = """
import json, os, resource, sys
from kbstudy.harness.pool import ChildPool, start_forkserver

if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_NOFILE, (__LIMIT__, __LIMIT__))
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    start_forkserver("cpu")
    pool = ChildPool(spare=True)
    counts = []
    for i in range(__CHILDREN__):
        child = pool.get()
        child.close(grace_s=5)
        counts.append(len(os.listdir("/proc/self/fd")))
    live = len({id(c) for c in pool._all})
    pool.shutdown()
    counts.append(len(os.listdir("/proc/self/fd")))
    print(json.dumps({"counts": counts, "live": live}))
"""


@pytest.mark.slow
def test_descriptors_stay_flat_over_hundreds_of_children(tmp_path):
    """256 children through the pool (a spare kept ahead, as on a GPU) under ``ulimit -n 64``: before the fix each
    child kept its pipe and sentinel open until the batch ended, and the batch died at the limit."""
    script = tmp_path / "fds.py"
    script.write_text(_FD_SCRIPT.replace("__LIMIT__", "64").replace("__CHILDREN__", "256"))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=280,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    counts = result["counts"]
    assert max(counts[10:]) - min(counts[:10]) <= 2, counts  # flat: no growth with the number of children
    assert result["live"] <= 2  # the pool holds the spare and the child just handed out, nothing more


# ------------------------------------------------------------------------------------------------ kill -9


_KILL_SCRIPT = """
import sys
from pathlib import Path
from kbstudy.harness.candidates import make_candidate
from kbstudy.harness.config import EvalConfig
from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.harness.problems import load_problems
from kbstudy.records.store import RecordStore

SOURCE = '''
import os, subprocess, time
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        subprocess.Popen(["sleep", "600"], start_new_session=True)
        subprocess.Popen(["sleep", "600"])
        open(PID_FILE, "w").write(str(os.getpid()))
        while True:  # hangs, holding a core
            pass
'''

if __name__ == "__main__":
    work = Path(sys.argv[2])
    relu = [p for p in load_problems(Path(sys.argv[1]) / "kernelbench_levels_1-3.jsonl")
            if p.level == 1 and p.problem_id == 19]
    source = SOURCE.replace("PID_FILE", repr(str(work / "running.pid")))
    cand = make_candidate(source, level=1, problem_id=19, model_config="hangs", backend="torch")
    cfg = EvalConfig(run="kill", device="cpu", size_scale=0.01, compile_baseline=False, progress=False,
                     trials=1, fresh_trials=0, variants=(), run_timeout_s=600, cache_dir=str(work / "cache"))
    evaluate_batch(relu, [cand], RecordStore(work / "records"), cfg)
"""


def _tagged(tag: str) -> list[int]:
    found, needle = [], f"KBSTUDY_TEST_TAG={tag}".encode()
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                if needle in Path(f"/proc/{name}/environ").read_bytes().split(b"\0") and _alive(int(name)):
                    found.append(int(name))
            except OSError:
                continue
    return found


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl")
def test_a_killed_orchestrator_leaves_nothing_behind(tmp_path):
    """``kill -9`` of the orchestrator while its candidate hangs (a busy loop, with one sleeping child in the worker's
    process group and one in a new session): within a few seconds no process of the batch is left (worker, its
    children, fork server, resource tracker, ``torch_shm_manager``) and no shared-memory file of it."""
    data = resolve_kernelbench_dir(required=False)
    if not (data / "kernelbench_levels_1-3.jsonl").is_file():
        pytest.skip(f"shared KernelBench data not found in {data}")
    script = tmp_path / "batch.py"
    script.write_text(_KILL_SCRIPT)
    tag = uuid.uuid4().hex
    shm_before = set(os.listdir("/dev/shm"))
    proc = subprocess.Popen([sys.executable, str(script), str(data), str(tmp_path)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO),
                                                            "KBSTUDY_TEST_TAG": tag})
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 150
        while not (tmp_path / "running.pid").exists():
            assert proc.poll() is None, "the batch ended before its candidate ran"
            assert time.monotonic() < deadline, "the candidate never ran"
            time.sleep(0.2)
        time.sleep(0.5)
        seen.update(_tagged(tag))
        assert len(seen) >= 5  # orchestrator, fork server, worker, its two sleepers (and the reference, ...)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        left = containment.wait_gone(seen, 8.0)
        left = [p for p in _tagged(tag) if p != proc.pid]
    finally:
        for pid in _tagged(tag):  # hygiene only: a failure below must not leave a spinning worker
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    assert left == [], [Path(f"/proc/{p}/cmdline").read_bytes()[:200] for p in left if Path(f"/proc/{p}").exists()]
    mine = {n for n in set(os.listdir("/dev/shm")) - shm_before
            if n.startswith("torch_") and int(n.split("_")[1]) in seen}
    assert mine == set()
