"""torch.profiler capture on CPU, the no-device-events error path, annotation handling and step timing."""

from types import SimpleNamespace

import pytest
import torch
from torch.autograd import DeviceType

from kbstudy.profiling import workloads as W
from kbstudy.profiling.capture import NoDeviceEventsError, kernel_table_from_events, profile_steps, time_steps


@pytest.fixture(scope="module")
def dlrm_profile():
    torch.manual_seed(0)
    wl = W.build("dlrm_dcnv2_train", "cpu", tiny=True)
    return profile_steps(wl.step, "cpu", wait=1, warmup=1, active=2)


def test_cpu_capture_gives_a_classified_operator_table(dlrm_profile):
    t = dlrm_profile.table
    assert dlrm_profile.level == "aten_op" and dlrm_profile.active_steps == 2
    assert len(t) > 5 and (t["time_us"] > 0).any()
    assert t["name"].str.startswith("aten::").all()
    assert {"embedding", "gemm", "elementwise"} <= set(t["category"])
    assert (t.loc[t["name"] == "aten::_embedding_bag", "calls_per_step"] == 26).all()  # one lookup per table
    assert t["time_us_per_step"].tolist() == pytest.approx((t["time_us"] / 2).tolist())
    assert dlrm_profile.total_us_per_step > 0


def test_kernel_table_raises_when_no_device_events(dlrm_profile):
    wl = W.build("bert_infer", "cpu", tiny=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        wl.step()
    with pytest.raises(NoDeviceEventsError, match="no device"):
        kernel_table_from_events(prof.events(), active_steps=1)


def _evt(name, dur, device=DeviceType.CUDA, annotation=False, kernels=()):
    return SimpleNamespace(name=name, device_type=device, is_user_annotation=annotation,
                           time_range=SimpleNamespace(elapsed_us=lambda d=dur: d), kernels=list(kernels))


def test_kernel_table_sums_device_events_and_skips_user_annotations():
    k = SimpleNamespace
    events = [
        _evt("nvjet_tst_128x128_64x4_TNT", 10.0), _evt("nvjet_tst_128x128_64x4_TNT", 14.0),
        _evt("void at::native::vectorized_elementwise_kernel<4, add>", 3.0),
        _evt("forward", 100.0, annotation=True),  # gpu_user_annotation range: a CUDA event spanning the others
        _evt("aten::addmm", 0.0, device=DeviceType.CPU,
             kernels=[k(name="nvjet_tst_128x128_64x4_TNT", device=0, duration=24.0)]),
    ]
    t = kernel_table_from_events(events, active_steps=2).set_index("name")
    assert t["time_us"].sum() == pytest.approx(27.0)
    assert "forward" not in t.index
    assert t.loc["nvjet_tst_128x128_64x4_TNT", "calls"] == 2
    assert t.loc["nvjet_tst_128x128_64x4_TNT", "time_us_per_step"] == pytest.approx(12.0)
    assert t.loc["nvjet_tst_128x128_64x4_TNT", "top_op"] == "aten::addmm"
    assert t.loc["nvjet_tst_128x128_64x4_TNT", "category"] == "gemm"
    with pytest.raises(NoDeviceEventsError):
        kernel_table_from_events([_evt("forward", 5.0, annotation=True)])
    with pytest.raises(ValueError):
        kernel_table_from_events(events, active_steps=0)


def test_time_steps_statistics():
    calls = []
    stats = time_steps(lambda: calls.append(1), "cpu", warmup=2, trials=5)
    assert len(calls) == 7 and stats["step_trials"] == 5
    assert stats["step_ms_q1"] <= stats["step_ms_median"] <= stats["step_ms_q3"]
    with pytest.raises(ValueError):
        time_steps(lambda: None, "cpu", trials=0)
