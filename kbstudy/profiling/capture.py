"""``torch.profiler`` capture of workloads: per-kernel device time on a GPU, per-ATen-operator self CPU time on a CPU.

The profiled window itself (:func:`profile_steps` and its tables) is ``kbstudy.harness.kernel_profile``, which the
candidate process uses too; this module adds the unprofiled step time (:func:`time_steps`).

How the GPU numbers are made (``../shared/research/workloads-anchors.md`` (beside the repository) section 1):

* the step runs under ``torch.profiler.profile(schedule=schedule(wait, warmup, active))``; warm-up steps trace nothing,
  so autotuning, cuDNN benchmarking and lazy initialisation stay out of the window, and each step ends with
  ``torch.cuda.synchronize()`` so its kernels fall inside it;
* per kernel name, the device time is summed over the Kineto device events in ``prof.events()`` with
  ``device_type == DeviceType.CUDA`` and ``not is_user_annotation`` (``gpu_user_annotation`` ranges are CUDA events
  too and would count the same time twice, pytorch#130730); kernels, memcpy and memset are all device events;
* ``key_averages()`` is not used: its operator rows carry their kernels' time, so summing rows double-counts;
* no device events at all (CUPTI failed to initialise, or the profiler ran without CUDA activity) raises
  :class:`NoDeviceEventsError` instead of returning an empty table;
* step time is measured in a separate run without the profiler (:func:`time_steps`), since the profiler inflates CPU
  gaps; kernel durations under the profiler stay accurate, so shares are computed over kernel time.

On a CPU (no device), the table is per ATen operator: the sum of each operator's **self** CPU time (time not spent in
child operators), so nothing is counted twice; user annotations, ``autograd::`` bookkeeping, and view/allocation
operators (:data:`~kbstudy.harness.kernel_classes.VIEW_OR_ALLOC_OPS`) are left out and reported as unattributed time.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from kbstudy.harness.kernel_profile import (
    TABLE_COLUMNS,
    NoDeviceEventsError,
    ProfileResult,
    _sync,
    kernel_table_from_events,
    op_table_from_events,
    profile_steps,
)


def time_steps(step: Callable[[], None], device: str, warmup: int = 3, trials: int = 10) -> dict[str, float | int]:
    """Wall time of ``step`` in ms, without the profiler: ``warmup`` untimed steps, then ``trials`` timed ones.

    Each trial is bracketed by ``torch.cuda.synchronize`` on CUDA (host ``perf_counter``). Returns ``step_ms_median``,
    ``step_ms_q1``, ``step_ms_q3``, ``step_ms_min``, ``step_ms_mean`` and ``step_trials``. Raises ``ValueError`` if
    ``trials < 1``.
    """
    if trials < 1:
        raise ValueError("trials must be >= 1")
    for _ in range(warmup):
        step()
    _sync(device)
    times = []
    for _ in range(trials):
        _sync(device)
        t0 = time.perf_counter()
        step()
        _sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
    a = np.asarray(times)
    return {
        "step_ms_median": float(np.median(a)), "step_ms_q1": float(np.percentile(a, 25)),
        "step_ms_q3": float(np.percentile(a, 75)), "step_ms_min": float(a.min()), "step_ms_mean": float(a.mean()),
        "step_trials": int(trials),
    }


__all__ = ["NoDeviceEventsError", "ProfileResult", "TABLE_COLUMNS", "kernel_table_from_events", "op_table_from_events",
           "profile_steps", "time_steps"]
