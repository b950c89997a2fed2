"""One profiled window under ``torch.profiler``: per-kernel device time on a GPU, per-ATen-operator self CPU time on
a CPU. The candidate process profiles one call of each timed candidate with it (``child/candidate.py``; the share of
device time in custom kernels, ``kbstudy.harness.kernel_share``); ``kbstudy.profiling.capture`` profiles workloads.

How the GPU numbers are made:

* the step runs under ``torch.profiler.profile(schedule=schedule(wait, warmup, active))``; warm-up steps trace nothing,
  so autotuning, cuDNN benchmarking and lazy initialisation stay out of the window, and each step ends with
  ``torch.cuda.synchronize()`` so its kernels fall inside it;
* per kernel name, the device time is summed over the Kineto device events in ``prof.events()`` with
  ``device_type == DeviceType.CUDA`` and ``not is_user_annotation`` (``gpu_user_annotation`` ranges are CUDA events
  too and would count the same time twice, pytorch#130730); kernels, memcpy and memset are all device events;
* ``key_averages()`` is not used: its operator rows carry their kernels' time, so summing rows double-counts;
* no device events at all (CUPTI failed to initialise, or the profiler ran without CUDA activity) raises
  :class:`NoDeviceEventsError` instead of returning an empty table.

On a CPU (no device), the table is per ATen operator: the sum of each operator's **self** CPU time (time not spent in
child operators), so nothing is counted twice; user annotations, ``autograd::`` bookkeeping, and view/allocation
operators (:data:`~kbstudy.harness.kernel_classes.VIEW_OR_ALLOC_OPS`) are left out and reported as unattributed time.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Callable, Iterable

import pandas as pd
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, schedule

from kbstudy.harness.kernel_classes import VIEW_OR_ALLOC_OPS, classify_kernel, classify_op, op_base_name

TABLE_COLUMNS = ("name", "time_us", "time_us_per_step", "calls", "calls_per_step", "category", "top_op", "ops")


class NoDeviceEventsError(RuntimeError):
    """The profiler recorded no device (CUDA) events: CUPTI may have failed (``CUPTI_ERROR_NOT_INITIALIZED``,
    ``INSUFFICIENT_PRIVILEGES``; pytorch#99615, #118982) or the profiled code ran nothing on the GPU."""


@dataclasses.dataclass
class ProfileResult:
    """One profiled window.

    ``table``: one row per kernel name (``level == "kernel"``, time = device time) or per ATen operator
    (``level == "aten_op"``, time = self CPU time), columns :data:`TABLE_COLUMNS`; times in µs, summed over the
    ``active_steps`` profiled steps (``time_us``) and divided by them (``time_us_per_step``). ``unattributed_us``:
    CPU mode only, self time of events left out of the table (annotations, autograd bookkeeping, views), in µs.
    """

    table: pd.DataFrame
    level: str
    active_steps: int
    unattributed_us: float = 0.0

    @property
    def total_us_per_step(self) -> float:
        return float(self.table["time_us_per_step"].sum()) if len(self.table) else 0.0


def _is_device_event(evt) -> bool:
    return evt.device_type == DeviceType.CUDA and not getattr(evt, "is_user_annotation", False)


def kernel_table_from_events(events: Iterable, active_steps: int = 1) -> pd.DataFrame:
    """Per-kernel device time from ``prof.events()``: columns :data:`TABLE_COLUMNS`, sorted by time (descending).

    ``top_op`` is the ATen operator that launched most of the kernel's time (``None`` if none was recorded), and
    ``ops`` a ``{operator: µs}`` dict of its three largest launchers. Raises :class:`NoDeviceEventsError` when the
    events hold no device event (what a failed CUPTI looks like) and ``ValueError`` if ``active_steps < 1``.
    """
    if active_steps < 1:
        raise ValueError("active_steps must be >= 1")
    events = list(events)
    time_us: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    for evt in events:
        if _is_device_event(evt):
            time_us[evt.name] += float(evt.time_range.elapsed_us())
            calls[evt.name] += 1
    if not time_us:
        raise NoDeviceEventsError(
            f"the profiler returned {len(events)} events and no device (CUDA) kernel, memcpy or memset event; "
            "check that CUPTI works (torch.profiler warns 'CUDA profiler activities will be missing') and that the "
            "profiled steps run on the GPU"
        )
    # launching operator: CPU operator events carry the kernels correlated with them (``FunctionEvent.kernels``)
    by_op: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for evt in events:
        if evt.device_type == DeviceType.CPU and getattr(evt, "kernels", None):
            for k in evt.kernels:
                by_op[k.name][evt.name] += float(k.duration)
    rows = []
    for name, t in time_us.items():
        ops = sorted(by_op.get(name, {}).items(), key=lambda kv: -kv[1])[:3]
        top = ops[0][0] if ops else None
        rows.append({
            "name": name, "time_us": t, "time_us_per_step": t / active_steps, "calls": calls[name],
            "calls_per_step": calls[name] / active_steps, "category": classify_kernel(name, top), "top_op": top,
            "ops": {o: round(v, 3) for o, v in ops},
        })
    return pd.DataFrame(rows, columns=TABLE_COLUMNS).sort_values("time_us", ascending=False, ignore_index=True)


#: Operator namespaces counted in the CPU table (``torch::autograd::AccumulateGrad``, ``autograd::engine::...`` and
#: ``record_function`` ranges are bookkeeping around operators, not operators).
OP_NAMESPACES = ("aten::", "prims::", "fbgemm::", "c10d::", "_c10d_functional::", "quantized::", "mkldnn::")


def _is_op_event(evt) -> bool:
    name = evt.name
    return name.startswith(OP_NAMESPACES) and op_base_name(name) not in VIEW_OR_ALLOC_OPS


def op_table_from_events(events: Iterable, active_steps: int = 1) -> tuple[pd.DataFrame, float]:
    """Per-ATen-operator self CPU time from ``prof.events()``; returns ``(table, unattributed_us)``.

    Only synchronous CPU events that are not user annotations count. Raises ``ValueError`` if no operator was seen.
    """
    if active_steps < 1:
        raise ValueError("active_steps must be >= 1")
    time_us: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    unattributed = 0.0
    for evt in events:
        if evt.device_type != DeviceType.CPU or getattr(evt, "is_async", False):
            continue
        self_us = float(evt.self_cpu_time_total)
        if getattr(evt, "is_user_annotation", False) or not _is_op_event(evt):
            unattributed += self_us
            continue
        time_us[evt.name] += self_us
        calls[evt.name] += 1
    if not time_us:
        raise ValueError("the profiler recorded no ATen operator")
    rows = [{
        "name": name, "time_us": t, "time_us_per_step": t / active_steps, "calls": calls[name],
        "calls_per_step": calls[name] / active_steps, "category": classify_op(name), "top_op": name, "ops": {},
    } for name, t in time_us.items()]
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS).sort_values("time_us", ascending=False, ignore_index=True)
    return table, unattributed / active_steps


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def profile_steps(step: Callable[[], None], device: str, wait: int = 1, warmup: int = 2, active: int = 3) -> ProfileResult:
    """Run ``wait + warmup + active`` steps under ``torch.profiler`` with ``schedule(wait, warmup, active)``.

    CUDA device: records CPU and CUDA activity and returns the per-kernel device-time table (:func:`kernel_table_from_events`;
    raises :class:`NoDeviceEventsError` if no device event arrived). CPU device: records CPU activity and returns the
    per-ATen-operator self-time table (:func:`op_table_from_events`).
    """
    cuda = torch.device(device).type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities, schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
                 record_shapes=False, with_stack=False, profile_memory=False) as prof:
        for _ in range(wait + warmup + active):
            step()
            _sync(device)
            prof.step()
    events = prof.events()
    if events is None:
        raise NoDeviceEventsError("the profiler produced no events (did the schedule reach its active steps?)")
    if cuda:
        return ProfileResult(kernel_table_from_events(events, active), "kernel", active)
    table, unattributed = op_table_from_events(events, active)
    return ProfileResult(table, "aten_op", active, unattributed)
