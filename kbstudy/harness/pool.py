"""The orchestrator's child processes: a fork server, :class:`Child` (one process and its connection) and
:class:`ChildPool` (idle children handed out, one spare started ahead), and the environment each role gets.

Children fork from a server that has already imported torch and Inductor (no CUDA initialised there), so a fresh
process per candidate costs milliseconds, not the ~2 s of ``import torch`` plus the ~3 s of ``torch._inductor`` that
``use_deterministic_algorithms`` pulls in. As with any multiprocessing start method but fork, a child re-imports the
caller's main script: scripts that call ``evaluate_batch`` need the ``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from multiprocessing import forkserver
from pathlib import Path
from typing import Any

from kbstudy.harness.candidates import Candidate
from kbstudy.harness.child.bootstrap import process_main
from kbstudy.harness.config import EvalConfig
from kbstudy.harness.protocol import AssignRole, Exit, Idle

_CTX = multiprocessing.get_context("forkserver")
_PRELOAD = ["torch", "torch.multiprocessing", "torch.utils.deterministic", "torch._inductor",
            "kbstudy.harness.child.bootstrap", "kbstudy.harness.child.candidate", "kbstudy.harness.child.reference",
            "kbstudy.verdict.checks", "kbstudy.harness.timing"]
_forkserver_device: str | None = None


def start_forkserver(device_type: str) -> None:
    """Start the fork server once per process, for CPU or CUDA children.

    Triton decides at import whether it interprets (``TRITON_INTERPRET=1``, the only way it runs on a CPU), and
    Inductor imports Triton, so a CPU server is started with the variable set; the orchestrator's own environment is
    restored right after. One process serves one device type: mixing raises ``RuntimeError``.
    """
    global _forkserver_device
    if _forkserver_device == device_type:
        return
    if _forkserver_device is not None:
        raise RuntimeError(f"this process already evaluates on {_forkserver_device}; start a new process for "
                           f"{device_type} (Triton's interpreter mode is fixed per process)")
    saved = os.environ.get("TRITON_INTERPRET")
    if device_type == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        _CTX.set_forkserver_preload(_PRELOAD)
        forkserver.ensure_running()
    finally:
        if saved is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved
    _forkserver_device = device_type


class ChildDied(RuntimeError):
    """The child process exited without replying; ``exitcode`` < 0 is the signal that killed it."""

    def __init__(self, exitcode: int | None):
        self.exitcode = exitcode
        if exitcode is not None and exitcode < 0:
            try:
                name = signal.Signals(-exitcode).name
            except ValueError:
                name = f"signal {-exitcode}"
            text = f"worker killed by {name}"
        else:
            text = f"worker exited with status {exitcode} without reporting"
        super().__init__(text)


class WorkerStartError(RuntimeError):
    """Worker processes keep dying before they can take a job: the machine, not a candidate, is failing (the batch
    stops; its records so far are kept and a rerun resumes)."""


class ChildTimeout(RuntimeError):
    """The child process did not reply within the timeout (it is killed by the caller)."""


class Child:
    """A forked ``kbstudy.harness.child.bootstrap.process_main`` process and its connection."""

    def __init__(self, warm_device: str | None = None):
        self.conn, child_conn = _CTX.Pipe()
        self.process = _CTX.Process(target=process_main, args=(child_conn, warm_device), daemon=False)
        self.process.start()
        child_conn.close()
        self.started = time.perf_counter()
        self._idle = False
        self._kill_lock = threading.Lock()

    def wait_idle(self, timeout: float = 300.0) -> None:
        if not self._idle:
            reply = self.recv(timeout)
            if not isinstance(reply, dict) or reply.get("status") != Idle.status:
                raise RuntimeError(f"unexpected first message from a child: {reply}")
            self._idle = True

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.conn.poll(0.2):
            if not self.process.is_alive():
                if self.conn.poll(0):
                    return
                raise ChildDied(self.process.exitcode)
            if time.monotonic() > deadline:
                raise ChildTimeout(f"no reply within {timeout:.0f} s")

    def _io(self, operation, *args):
        """Run a connection operation; a closed or broken pipe means the child is gone: ``ChildDied``."""
        try:
            return operation(*args)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            self.process.join(5)
            raise ChildDied(self.process.exitcode) from None

    def recv(self, timeout: float) -> Any:
        self._wait(timeout)
        return self._io(self.conn.recv)

    def recv_bytes(self, timeout: float) -> bytes:
        self._wait(timeout)
        return self._io(self.conn.recv_bytes)

    def send(self, message: Any) -> None:
        self._io(self.conn.send, message)

    def send_bytes(self, data: bytes) -> None:
        self._io(self.conn.send_bytes, data)

    def close(self, grace_s: float = 10.0) -> None:
        """Ask the child to finish, then kill its whole process group if it has not."""
        if self.process.is_alive():
            try:
                # an idle child reads the role, a candidate process the op
                self.conn.send({**AssignRole("exit").to_wire(), **Exit().to_wire()})
            except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
                pass
            self.process.join(grace_s)
        self.kill()

    def kill(self) -> None:
        """Kill the child's process group and close the connection. Safe to call again and from several threads at
        once: a build queue's ``close()`` and the build's own thread can both kill one build process, and two
        unguarded ``Connection.close()`` calls close one file descriptor twice (EBADF, or worse, a descriptor number
        reused meanwhile by another pipe)."""
        with self._kill_lock:
            if self.process.pid is not None:
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError, OSError):
                    pass
            if self.process.is_alive():
                self.process.kill()
            self.process.join(10)
            if not self.conn.closed:
                self.conn.close()


class ChildPool:
    """Hands out idle children, keeping one spare started ahead so the next candidate skips torch's import."""

    def __init__(self, spare: bool = True, warm_device: str | None = None):
        self.spare = spare
        self.warm_device = warm_device
        self._next: Child | None = None
        self._all: list[Child] = []

    #: attempts to start a child that dies before reporting idle (e.g. CUDA out of memory while creating its context,
    #: when other processes fill the GPU), with these pauses (s) between them
    START_RETRY_PAUSES_S = (2.0, 10.0)

    def get(self) -> Child:
        """An idle child. A child that dies while starting is replaced (:data:`START_RETRY_PAUSES_S`); raises
        :class:`WorkerStartError` when every attempt died, naming the last exit status."""
        child = self._next or Child(self.warm_device)
        self._next = None
        for pause in (*self.START_RETRY_PAUSES_S, None):
            try:
                child.wait_idle()
                if not child.process.is_alive():
                    # it died after saying idle (a spare killed while its message waited in the pipe)
                    raise ChildDied(child.process.exitcode)
                break
            except ChildDied as exc:
                child.kill()
                if pause is None:
                    raise WorkerStartError(
                        f"{len(self.START_RETRY_PAUSES_S) + 1} worker processes in a row died while starting "
                        f"({exc}; warm device {self.warm_device or 'none'}); the device may be out of memory or "
                        f"unavailable. Records written so far are kept: rerun to resume.") from exc
                time.sleep(pause)
                child = Child(self.warm_device)
        if self.spare:
            self._next = Child(self.warm_device)
            self._all.append(self._next)
        self._all.append(child)
        return child

    def shutdown(self) -> None:
        for child in self._all:
            if child.process.is_alive() or child.process.exitcode is None:
                child.kill()
        self._all.clear()
        self._next = None


def label(identifier: str) -> str:
    """An id usable inside a pseudo file name: Python's messages keep only what follows the last ``/``."""
    return identifier.replace("/", ":")


def child_env(candidate: Candidate | None, cfg: EvalConfig, device: str, max_jobs: int | None = None) -> dict:
    """The environment of a child's role: one Inductor compile thread; for a candidate, its own extensions folder
    (per source SHA-256), the shared Triton cache and, for Triton on a CPU, the interpreter; for a build, ninja's
    parallelism (``max_jobs``)."""
    env: dict[str, str | None] = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
    cache = Path(cfg.cache_dir).resolve()
    if candidate is not None:
        env["TORCH_EXTENSIONS_DIR"] = str(cache / "torch_extensions" / candidate.sha256[:20])
        env["TRITON_CACHE_DIR"] = str(cache / "triton")
        if candidate.backend == "triton" and not device.startswith("cuda"):
            env["TRITON_INTERPRET"] = "1"
    if max_jobs:
        env["MAX_JOBS"] = str(max_jobs)
    return env
