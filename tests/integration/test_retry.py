"""Failures of the machine rather than of a candidate: retrying recorded outcomes (``EvalConfig.retry_outcomes``,
``--retry-outcome``) and replacing worker processes that die while starting (``ChildPool``).

Both are needed on the H200: calibration lanes sharing one GPU ran out of memory, which left
``out_of_memory`` and ``crashed`` records that a resume would otherwise count as done, and a spare worker that died
creating its CUDA context stopped a whole batch. Real problem (KernelBench 19_ReLU at 1/16 size), real workers.
"""

from __future__ import annotations

import json

import pytest
from support.helpers import cpu_config, torch_candidate

from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.harness.pool import ChildPool, WorkerStartError, start_forkserver
from kbstudy.records.store import RecordStore


def _flaky_relu(marker) -> object:
    """ReLU that raises ``torch.OutOfMemoryError`` until ``marker`` exists (a transient failure, as when another
    process holds the GPU's memory), and creates ``marker`` when it does."""
    prelude = f"import os\n_MARKER = {str(marker)!r}\n"
    body = """
    if not os.path.exists(_MARKER):
        open(_MARKER, "w").close()
        raise torch.OutOfMemoryError("CUDA out of memory (simulated: another process holds the device)")
    return torch.relu(x)
    """
    return torch_candidate(body, problem_id=19, name="flaky-oom", prelude=prelude)


def test_retry_outcome_reevaluates_and_keeps_history(tmp_path, problem_by_name):
    problem = problem_by_name["19_ReLU.py"]
    cand = _flaky_relu(tmp_path / "device-free")
    store = RecordStore(tmp_path / "records")
    cfg = cpu_config(time_candidates=False, eager_baseline=False, structural_variants=())

    first = evaluate_batch([problem], [cand], store, cfg)
    assert first.written == 1
    assert store.evaluations()[0]["outcome"] == "out_of_memory"

    # a plain resume counts the failed record as done
    again = evaluate_batch([problem], [cand], store, cfg)
    assert (again.written, again.already_done) == (0, 1)

    retried = evaluate_batch([problem], [cand], store, cpu_config(time_candidates=False, eager_baseline=False,
                                                                   structural_variants=(),
                                                                   retry_outcomes=("out_of_memory",)))
    assert retried.written == 1
    latest = store.evaluations()
    assert len(latest) == 1 and latest[0]["outcome"] == "evaluated" and latest[0]["kbstudy_correct"] is True
    history = [json.loads(line)["outcome"] for line in store.evaluations_path.read_text().splitlines()]
    assert history == ["out_of_memory", "evaluated"]  # nothing is lost: the failed attempt stays in the JSONL


def test_unknown_retry_outcome_is_a_clear_error(tmp_path, problem_by_name):
    cand = torch_candidate("return torch.relu(x)", problem_id=19, name="relu")
    with pytest.raises(ValueError, match="unknown outcome.*out_of_memry"):
        evaluate_batch([problem_by_name["19_ReLU.py"]], [cand], RecordStore(tmp_path),
                       cpu_config(retry_outcomes=("out_of_memry",)))


@pytest.mark.parametrize("after_idle", [False, True], ids=["while_starting", "after_saying_idle"])
def test_dead_spare_worker_is_replaced(after_idle):
    start_forkserver("cpu")
    pool = ChildPool(spare=True)
    try:
        first = pool.get()
        spare = pool._spares[0]
        if after_idle:
            # its "idle" message already read: only the process's state shows it died (a race seen under load)
            spare.wait_idle()
        spare.process.kill()  # as a CUDA context creation that ran out of memory would end it
        spare.process.join(10)
        second = pool.get()
        assert second is not spare and second.process.is_alive()
        assert first.process.is_alive()
    finally:
        pool.shutdown()


def test_workers_that_cannot_start_stop_the_batch_with_a_clear_error(monkeypatch):
    # a warm device that does not exist: every worker dies creating it, as on a GPU whose memory others hold
    start_forkserver("cpu")
    monkeypatch.setattr(ChildPool, "START_RETRY_PAUSES_S", (0.0,))
    pool = ChildPool(spare=False, warm_device="cuda:7")
    try:
        with pytest.raises(WorkerStartError, match="2 worker processes in a row died while starting.*cuda:7"):
            pool.get()
    finally:
        pool.shutdown()
