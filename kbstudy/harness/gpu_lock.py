"""The device's timed regions kept exclusive while untimed work overlaps: :class:`DeviceLock`, a readers-writer lock
(writers first) taken by the orchestrator's threads around each request they send to a child process.

Several problems can be in flight at once (``EvalConfig.concurrency``): one problem's reference process building
inputs and expected outputs, another's candidate loading or running its correctness trials. Those requests take the
lock *shared*. A timed request (a candidate's timing and profiled call, the eager and ``torch.compile`` baselines)
takes it *exclusive*: it starts once every shared request in flight has been answered, and no other request is sent
until it is answered, so every child process but the one being timed is idle, as in a serial batch. A waiting
exclusive request stops new shared ones (timing is never starved). The children only work between a request and
its reply, so the orchestrator's lock is the device's. On a CPU the device is the processor, so a process's start
(importing torch) and its orderly end (the interpreter's teardown) take the lock shared too
(:meth:`DeviceLock.process_change`): a process ending beside another problem's timing took one of a two-core machine's
cores and doubled that timing. On a GPU a spare process starting ahead (``ChildPool``) or a process ending can
overlap a timed region on the host's CPUs, never with work on the GPU beyond creating or freeing its CUDA context. A
process known to be hung or dead is killed at once, without waiting for the lock: waiting would let it spin through
the next timed region.

Every exclusive hold is kept as a ``(start, end)`` pair of ``time.time()`` (:attr:`DeviceLock.exclusive_windows`),
and each thread's waits are summed, so records can say how long they waited (``stage_seconds.gpu_wait``) and tests
can check from the records that no two timed regions overlapped.
"""

from __future__ import annotations

import contextlib
import threading
import time


class DeviceLock:
    """A readers-writer lock with writer preference that also accounts for waiting time."""

    def __init__(self):
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0
        self._local = threading.local()
        #: ``(start, end)`` (``time.time()``) of every exclusive hold, in order
        self.exclusive_windows: list[tuple[float, float]] = []

    def _waited(self, seconds: float) -> None:
        self._local.wait_s = getattr(self._local, "wait_s", 0.0) + seconds

    def take_wait(self) -> float:
        """Seconds this thread has waited for the lock since the last call (and reset)."""
        waited = getattr(self._local, "wait_s", 0.0)
        self._local.wait_s = 0.0
        return waited

    @contextlib.contextmanager
    def shared(self):
        """Untimed work: overlaps other shared holders, never an exclusive one."""
        t0 = time.perf_counter()
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        self._waited(time.perf_counter() - t0)
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    def process_change(self, device: str):
        """A worker process starting or ending on ``device``: untimed work on a CPU (:meth:`shared`), none on a
        GPU's lock."""
        return contextlib.nullcontext() if device.startswith("cuda") else self.shared()

    @contextlib.contextmanager
    def exclusive(self):
        """A timed region: alone on the device."""
        t0 = time.perf_counter()
        with self._cond:
            self._writers_waiting += 1
            try:
                while self._writer or self._readers:
                    self._cond.wait()
            finally:
                self._writers_waiting -= 1
            self._writer = True
        self._waited(time.perf_counter() - t0)
        start = time.time()
        try:
            yield
        finally:
            end = time.time()
            with self._cond:
                self._writer = False
                self.exclusive_windows.append((start, end))
                self._cond.notify_all()

