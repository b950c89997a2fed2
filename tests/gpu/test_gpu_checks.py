"""GPU-only checks of the evaluation path (skipped without CUDA): the host-synchronised cross-check of the CUDA-event
timing catches work left running on a side stream, the custom-kernel share tells a Triton kernel from cuBLAS, and
the device time (``kbstudy.harness.timing.time_device``) leaves out host work that the per-call time holds.

Real problems (KernelBench level 1: 1_Square_matrix_multiplication_ at half size, 19_ReLU at 1/10) and real
candidate sources, through ``evaluate_batch``. Run on a GPU machine with::

    KBSTUDY_KERNELBENCH_DIR=<shared>/kernelbench python -m pytest -q tests/gpu  (or make test-gpu)
"""

from __future__ import annotations

import pytest
import torch
from support.helpers import records_by_config

from kbstudy.harness.candidates import make_candidate
from kbstudy.harness.config import EvalConfig
from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.harness.timing import DEVICE_TIME_CHECKED_CALLS, TIMED_CHECKED_CALLS
from kbstudy.records.store import RecordStore

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

_HONEST_MATMUL = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)
'''

_SIDE_STREAM_MATMUL = '''
import torch
import torch.nn as nn

_STREAM = []


class ModelNew(nn.Module):
    """cuBLAS on a private stream, returned without joining it: the current stream's end event fires at once."""

    def forward(self, A, B):
        if not _STREAM:
            _STREAM.append(torch.cuda.Stream())
        side = _STREAM[0]
        side.wait_stream(torch.cuda.current_stream())  # the inputs are ready: the answer is right
        with torch.cuda.stream(side):
            out = torch.matmul(A, B)
        return out
'''

# the side stream, plus a memo keyed on the inputs' pointers and sums (a full read, cheaper than the matmul): where a
# timing loop repeats its inputs (a host check of back-to-back calls on one input set) it returns lookups, while the
# events of the timed calls, on fresh values, see none of the side stream's work
_SIDE_STREAM_MEMO_MATMUL = _SIDE_STREAM_MATMUL.replace("_STREAM = []\n", "_STREAM = []\n_MEMO = {}\n").replace(
    "    def forward(self, A, B):\n",
    "    def forward(self, A, B):\n"
    "        key = (A.data_ptr(), B.data_ptr(), float(A.sum()), float(B.sum()))\n"
    "        if key in _MEMO:\n            return _MEMO[key]\n"
    "        _MEMO[key] = self.compute(A, B)\n        return _MEMO[key]\n\n"
    "    def compute(self, A, B):\n")

_TRITON_RELU = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def kbstudy_test_relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        kbstudy_test_relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
'''


_HOST_HEAVY_RELU = _TRITON_RELU.replace("import torch\n", "import time\nimport torch\n", 1).replace(
    "        y = torch.empty_like(x)\n",
    "        time.sleep(0.0008)  # 0.8 ms of host work before the launch: per-call time holds it, device time not\n"
    "        y = torch.empty_like(x)\n")


# candidates that behave in the timed calls and fail only in the device-time calls (found by their frame on the
# stack): one raises, one kills its process
_DEVICE_TIME_PROBE = """
import sys


def _in_device_time():
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "time_device":
            return True
        frame = frame.f_back
    return False
"""
_RAISES_IN_DEVICE_TIME = _TRITON_RELU.replace("import torch\n", "import torch\n" + _DEVICE_TIME_PROBE, 1).replace(
    "        y = torch.empty_like(x)\n",
    "        if _in_device_time():\n            raise RuntimeError('kbstudy test: refuses the device-time calls')\n"
    "        y = torch.empty_like(x)\n")
# ... and one that skips its work there (zeros for an answer): a random device-time call's outputs are checked
_SKIPS_IN_DEVICE_TIME = _TRITON_RELU.replace("import torch\n", "import torch\n" + _DEVICE_TIME_PROBE, 1).replace(
    "        y = torch.empty_like(x)\n",
    "        if _in_device_time():\n            return torch.zeros_like(x)\n        y = torch.empty_like(x)\n")
_CRASHES_IN_DEVICE_TIME = _TRITON_RELU.replace("import torch\n", "import os\nimport torch\n" + _DEVICE_TIME_PROBE,
                                               1).replace(
    "        y = torch.empty_like(x)\n",
    "        if _in_device_time():\n            os._exit(3)\n        y = torch.empty_like(x)\n")


def _config(tmp, scale: float) -> EvalConfig:
    return EvalConfig(run="gpu-checks", device="cuda", size_scale=scale, compile_baseline=False, progress=False,
                      cache_dir=str(tmp / "cache"), timing={"warmup_ms": 5.0, "budget_ms": 200.0, "min_reps": 10,
                                                             "max_reps": 40})


@pytest.fixture(scope="module")
def gpu_rows(problem_by_name, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpu_checks")
    store = RecordStore(tmp / "records")
    matmul = problem_by_name["1_Square_matrix_multiplication_.py"]
    relu = problem_by_name["19_ReLU.py"]
    cands = [make_candidate(_HONEST_MATMUL, level=1, problem_id=1, model_config="honest_matmul", backend="torch"),
             make_candidate(_SIDE_STREAM_MATMUL, level=1, problem_id=1, model_config="side_stream", backend="torch"),
             make_candidate(_SIDE_STREAM_MEMO_MATMUL, level=1, problem_id=1, model_config="side_stream_memo",
                            backend="torch")]
    assert evaluate_batch([matmul], cands, store, _config(tmp, 0.5)).written == 3
    triton_relu = make_candidate(_TRITON_RELU, level=1, problem_id=19, model_config="triton_relu", backend="triton")
    host_heavy = make_candidate(_HOST_HEAVY_RELU, level=1, problem_id=19, model_config="host_heavy_relu",
                                backend="triton")
    raises = make_candidate(_RAISES_IN_DEVICE_TIME, level=1, problem_id=19, model_config="raises_in_device_time",
                            backend="triton")
    crashes = make_candidate(_CRASHES_IN_DEVICE_TIME, level=1, problem_id=19, model_config="crashes_in_device_time",
                             backend="triton")
    skips = make_candidate(_SKIPS_IN_DEVICE_TIME, level=1, problem_id=19, model_config="skips_in_device_time",
                           backend="triton")
    assert evaluate_batch([relu], [triton_relu, host_heavy, raises, crashes, skips], store,
                          _config(tmp, 0.1)).written == 5
    return records_by_config(store)


def _evaluated(row: dict) -> dict:
    assert row["outcome"] == "evaluated", f"{row['candidate_id']}: {row['outcome']}: {row['error_message']}"
    return row


@pytest.mark.parametrize("name", ["side_stream", "side_stream_memo"])
def test_side_stream_work_is_flagged(gpu_rows, name):
    """Work left on a side stream is seen by the host-synchronised time, also when a memo of the inputs would make
    repeated calls fast (the host check's calls get fresh values), and the record has no speedup."""
    row = _evaluated(gpu_rows[name])
    assert row["kbstudy_correct"] is True and row["timing_output_ok"] is True  # right answers, wrong clock
    assert row["timing_discrepancy"] is True, (row["candidate_ms_median"], row["candidate_host_ms"])
    assert row["candidate_host_ms"] > 1.5 * row["candidate_ms_median"]
    assert row["speedup_significant"] is False  # whatever the events claimed, the speedup is not verified ...
    assert row["speedup_vs_eager"] is None and row["speedup_vs_eager_ci_low"] is None  # ... nor reported


def test_honest_matmul_is_not_flagged_and_is_all_vendor(gpu_rows):
    row = _evaluated(gpu_rows["honest_matmul"])
    assert row["kbstudy_correct"] is True and row["timing_output_ok"] is True
    assert row["timing_discrepancy"] is False, (row["candidate_ms_median"], row["candidate_host_ms"])
    assert row["candidate_host_ms"] > 0
    assert row["custom_kernel_share"] == 0.0
    assert row["top_kernels"] and row["top_kernels"][0]["origin"] == "vendor", row["top_kernels"]


def test_triton_kernel_is_custom(gpu_rows):
    row = _evaluated(gpu_rows["triton_relu"])
    assert row["kbstudy_correct"] is True and row["timing_discrepancy"] is False
    assert row["custom_kernel_share"] > 0.9, row["top_kernels"]
    assert row["top_kernels"][0]["name"].startswith("kbstudy_test_relu_kernel")
    assert row["top_kernels"][0]["origin"] == "custom"


def test_device_time_leaves_out_host_work(gpu_rows):
    """The same kernel with 0.8 ms of host work before its launch: the per-call time holds the host work, the device
    time (cold L2, the host hidden behind a spin) does not, and agrees with the plain kernel's."""
    plain, heavy = _evaluated(gpu_rows["triton_relu"]), _evaluated(gpu_rows["host_heavy_relu"])
    for row in (plain, heavy):
        assert row["candidate_device_ms_q1"] <= row["candidate_device_ms_median"] <= row["candidate_device_ms_q3"]
        assert len(row["candidate_device_ms_samples"]) == row["metadata"]["device_time"]["calls"] >= 5
        assert row["metadata"]["device_time"]["host_overran"] == 0
        assert 0 < row["candidate_device_ms_median"] <= row["candidate_ms_median"] * 1.05, row["candidate_id"]
    assert heavy["candidate_ms_median"] > 0.8  # ms: the sleep is in the per-call time
    assert heavy["candidate_device_ms_median"] < 0.5 * heavy["candidate_ms_median"]
    assert heavy["candidate_device_ms_median"] < 1.5 * plain["candidate_device_ms_median"] + 0.01


def test_a_candidate_failing_in_the_device_time_calls_is_a_recorded_outcome(gpu_rows):
    """A candidate that passes its trials and its timed calls, then raises (or kills its process) in the device-time
    calls, ends as a record with that outcome and its verdicts; the batch goes on (the fixture wrote five records)."""
    raised, crashed = gpu_rows["raises_in_device_time"], gpu_rows["crashes_in_device_time"]
    for row in (raised, crashed):
        assert row["kbstudy_correct"] is True and row["kernelbench_correct"] is True, row["candidate_id"]
        assert row["outcome"] != "evaluated" and row["candidate_device_ms_median"] is None
    assert "refuses the device-time calls" in raised["metadata"]["timing_failure"]
    assert raised["error_message"].startswith("failed while timing: ")
    assert crashed["outcome"] == "crashed" and crashed["error_message"].startswith("time: "), crashed["error_message"]


def test_a_candidate_skipping_work_in_the_device_time_calls_fails_its_timed_outputs(gpu_rows):
    """A candidate that computes in its trials and timed calls but returns zeros once it finds itself in the
    device-time calls (a near-zero device time, were it believed) fails kbstudy's verdict on its timed outputs: the
    outputs of one device-time call drawn at random are checked with the timed calls'. An honest kernel's pass (its check counts one
    more output set than the timed calls kept)."""
    skipped, honest = gpu_rows["skips_in_device_time"], _evaluated(gpu_rows["triton_relu"])
    assert skipped["kernelbench_correct"] is True and skipped["timing_output_ok"] is False
    assert skipped["kbstudy_correct"] is False and skipped["kbstudy_failure"] == "timing_output_mismatch"
    assert skipped["metadata"]["kbstudy_detail"].startswith("device-time call "), skipped["metadata"]
    assert skipped["metadata"]["device_time"]["flush"] == "read"
    assert honest["timing_output_ok"] is True and honest["metadata"]["device_time"]["flush"] == "read"
    calls = honest["metadata"]["timing_output_check"]["checked"]
    assert calls == TIMED_CHECKED_CALLS + DEVICE_TIME_CHECKED_CALLS, honest["metadata"]["timing_output_check"]


def test_time_pool_checks_random_device_time_calls():
    """``time_pool(keep_outputs=True, device_time=True)``: the last ``DEVICE_TIME_CHECKED_CALLS`` entries of
    ``checked`` are device-time calls' (distinct indices after the timed calls), each with the answer for exactly the
    inputs that call had (``fresh_inputs.mixed`` of its entry and weight, rebuilt bit for bit on the GPU)."""
    from kbstudy.harness.fresh_inputs import mixed
    from kbstudy.harness.timing import time_pool

    pool = [[torch.rand(1 << 12, device="cuda", generator=torch.Generator("cuda").manual_seed(v))] for v in range(3)]
    timed = time_pool(lambda x: x * 2, pool, device="cuda", keep_outputs=True, device_time=True, warmup_ms=0.0,
                      min_warmup=2, budget_ms=1.0, min_reps=5, max_reps=5)
    device_checked = [c for c in timed.checked if c[1] >= len(timed.samples)]
    assert len(device_checked) == DEVICE_TIME_CHECKED_CALLS == len({call for _, call, _, _ in device_checked})
    assert len(timed.checked) == TIMED_CHECKED_CALLS + DEVICE_TIME_CHECKED_CALLS
    last = len(timed.samples) + len(timed.device.samples) - 1
    for entry, call, outputs, mix in timed.checked:
        inputs = mixed(pool[entry], pool[(entry + 1) % 3], mix)
        assert call <= last and torch.equal(outputs[0], inputs[0] * 2), (entry, call)


def test_the_reading_flush_leaves_the_next_call_less_to_write_back():
    """The device time's flush reads its buffer (``l2_flusher(..., "read")``) and leaves clean lines; the per-call
    timing's writes it and leaves dirty ones, whose write-back the next call pays: a 64 MB copy's device time is
    lower after the reading flush (on the H200: 17.6 vs 20.4 us, ``scripts/bench_l2_flush.py``)."""
    from kbstudy.harness.timing import time_device

    src = torch.ones(32 << 20, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    read = time_device(lambda: dst.copy_(src), device="cuda", flush_mode="read")
    write = time_device(lambda: dst.copy_(src), device="cuda", flush_mode="write")
    assert read.flush == "read" and write.flush == "write"
    med = lambda t: sorted(t.samples)[len(t.samples) // 2]  # noqa: E731
    assert med(read) < med(write), (read.samples, write.samples)


def test_device_time_holds_a_host_synchronisation_inside_the_call():
    """A call that synchronises with the host between two kernels: the GPU idles while the host sleeps after the
    synchronisation, and the device time holds that idle time (it hides only the host work before the first
    launch)."""
    import time

    from kbstudy.harness.timing import time_device

    x = torch.randn(1 << 20, device="cuda")

    def call():
        y = x * 2
        torch.cuda.synchronize()
        time.sleep(0.001)  # 1 ms: the GPU is idle until the next launch
        return y + 1

    result = time_device(call, device="cuda", reps=5)
    assert len(result.samples) == 5 and result.host_overran == 5  # the host outlasted the spin, and says so
    assert min(result.samples) > 0.9


def test_a_slow_call_gets_no_device_time():
    """``time_pool(device_time=True)`` measures the device time, except for a call slower than ``slow_call_ms`` (no
    speedup candidate: its stage's time goes to its timing)."""
    from kbstudy.harness.timing import time_pool

    pool = [[torch.randn(1 << 16, device="cuda")], [torch.randn(1 << 16, device="cuda")]]
    kwargs = dict(device="cuda", device_time=True, warmup_ms=0.0, min_warmup=2, budget_ms=1.0, min_reps=5, max_reps=5)
    timed = time_pool(lambda x: x * 2, pool, **kwargs)
    assert timed.device is not None and len(timed.device.samples) == 20 and timed.device.host_overran == 0
    assert time_pool(lambda x: x * 2, pool, slow_call_ms=1e-6, **kwargs).device is None


def test_device_time_calls_get_fresh_values():
    """Each device-time call of ``time_pool`` gets fresh values in the same buffers first (two pool entries mixed
    with a weight of its own), as the timed calls do, so a result cached by pointer or contents is not timed as a
    kernel."""
    from kbstudy.harness.timing import time_pool

    seen = []

    def call(x):
        seen.append((x.data_ptr(), float(x[0])))  # a host read: fine here, the values are what is checked
        return x * 2

    pool = [[torch.full((1 << 10,), 1.25, device="cuda")], [torch.full((1 << 10,), 2.5, device="cuda")]]
    timed = time_pool(call, pool, device="cuda", device_time=True, warmup_ms=0.0, min_warmup=2, budget_ms=1.0,
                      min_reps=5, max_reps=5)
    device_calls = seen[-len(timed.device.samples):]
    assert len({ptr for ptr, _ in device_calls}) == 1  # the same buffer ...
    values = [value for _, value in seen]
    assert len(set(values)) == len(values)  # ... with values no call saw before (timed, host check, device time)
    assert all(1.25 < value < 2.5 for value in values)  # a mix of the two entries


def test_copy_at_size_is_a_plausible_bandwidth():
    """A copy of 256 MB by device time: positive, quartiles around the median, and below 10 TB/s (HBM3e peaks near
    4.8 TB/s on an H200; an L2-resident copy would show as an impossible rate)."""
    from kbstudy.suites.dlrm_bench.roofline import copy_at_size

    result = copy_at_size(256e6, "cuda")
    assert 0 < result["copy_q1_ms"] <= result["copy_ms"] <= result["copy_q3_ms"]
    assert result["copy_flush"] == "read"  # the device time's clean flush (kbstudy.harness.timing.DEVICE_FLUSH_MODE)
    assert 256e6 / (result["copy_ms"] * 1e-3) < 10e12


def test_large_input_pristine_copy_lives_in_host_memory(monkeypatch):
    """Inputs above ``PRISTINE_HOST_BYTES`` keep their pristine copy on the host, and the inputs-mutated check
    still sees a one-element change across the two devices."""
    from kbstudy.harness.child import integrity

    monkeypatch.setattr(integrity, "PRISTINE_HOST_BYTES", 1 << 10)
    x = torch.randn(4096, device="cuda")
    # while the device has the memory to spare, the copy stays there; when it would take too much, it goes to the host
    assert integrity.pristine_copy(x).device.type == "cuda"
    monkeypatch.setattr(integrity, "PRISTINE_DEVICE_FREE_FRACTION", 1e-12)
    copy = integrity.pristine_copy(x)
    assert copy.device.type == "cpu" and integrity.pristine_copy(x[:8]).device.type == "cuda"
    assert integrity.inputs_equal(copy, x)
    x[17] += 1.0
    assert not integrity.inputs_equal(copy, x)
    # compared on the GPU in chunks (COMPARE_CHUNK_BYTES), a change in the last chunk too
    monkeypatch.setattr(integrity, "COMPARE_CHUNK_BYTES", 1 << 10)
    x[17] = copy[17].item()  # restored exactly
    assert integrity.inputs_equal(copy, x) and integrity.inputs_equal(x, copy)
    x[-1] = float("nan")
    assert not integrity.inputs_equal(copy, x)
