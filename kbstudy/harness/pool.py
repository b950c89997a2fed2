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
import pickle
import select
import signal
import struct
import threading
import time
from multiprocessing import forkserver
from pathlib import Path
from typing import Any

from kbstudy.harness import containment
from kbstudy.harness.build_cache import extensions_dir
from kbstudy.harness.candidates import Candidate
from kbstudy.harness.child.bootstrap import process_main
from kbstudy.harness.config import EvalConfig
from kbstudy.harness.protocol import AssignRole, Exit, ExitReport, Idle

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

    def __init__(self, exitcode: int | None, detail: str | None = None):
        self.exitcode = exitcode
        if detail:
            text = detail
        elif exitcode in containment.EXIT_MEANINGS:
            text = f"worker exited with status {exitcode}: {containment.EXIT_MEANINGS[exitcode]}"
        elif exitcode is not None and exitcode < 0:
            try:
                name = signal.Signals(-exitcode).name
            except ValueError:
                name = f"signal {-exitcode}"
            text = f"worker killed by {name}"
        else:
            text = f"worker exited with status {exitcode} without reporting"
        super().__init__(text)


class ChildProtocolError(ChildDied):
    """The child sent what the harness protocol does not allow (a candidate wrote into its connection); it was
    killed."""


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
        #: the child's last message (``kbstudy.harness.child.bootstrap``): processes it killed, its captured output
        self.exit_report: ExitReport | None = None
        #: descendants of the child killed by :meth:`kill` (it was killed before it could kill them itself)
        self.killed_descendants = 0

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
        """Run a connection operation; a closed or broken pipe means the child is gone: ``ChildDied``. Anything else
        going wrong with what came through (a candidate writing into or closing its process's connection) breaks
        the protocol: the child is killed and that is ``ChildDied`` too."""
        try:
            return operation(*args)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            self.process.join(5)
            raise ChildDied(self.process.exitcode) from None
        except ChildDied:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. an unpickling error on bytes the candidate wrote
            self._protocol_broken(f"{type(exc).__name__}: {exc}"[:300])

    def _protocol_broken(self, what: str) -> None:
        self.kill()
        raise ChildProtocolError(self.process.exitcode, f"worker broke the harness protocol ({what}); killed") \
            from None

    def _ended(self, message: Any) -> Any:
        """``message`` if it is a reply; the child's exit report where a reply was expected means it ended without
        replying (``ChildDied``), anything but a dict breaks the protocol."""
        report = ExitReport.of(message)
        if report is not None:
            self.exit_report = report
            self.process.join(5)
            raise ChildDied(self.process.exitcode)
        if not isinstance(message, dict):
            self._protocol_broken(f"sent a {type(message).__name__}")
        return message

    #: seconds a child gets to end itself (and what it started) once its connection is closed by :meth:`kill`
    KILL_GRACE_S = 1.0
    #: the largest message a child may send (tensors travel by handle: messages are kilobytes)
    MAX_MESSAGE_BYTES = 1 << 30
    #: once a message has started, the seconds its remaining bytes may take
    MESSAGE_GRACE_S = 30.0

    def _read_exact(self, n: int, deadline: float) -> bytes:
        fd, chunks = self.conn.fileno(), []
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while n > 0:
            if not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
                self._protocol_broken("a message stopped short")
            chunk = os.read(fd, min(n, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _recv_frame(self) -> bytes:
        """One message as ``Connection.send_bytes`` frames it (a 4-byte signed length, or -1 and an 8-byte length),
        read with a deadline and a size bound: bytes a candidate writes into its process's connection can neither
        stall the orchestrator on a length that never arrives nor make it allocate without bound."""
        deadline = time.monotonic() + self.MESSAGE_GRACE_S
        size, = struct.unpack("!i", self._read_exact(4, deadline))
        if size == -1:
            size, = struct.unpack("!Q", self._read_exact(8, deadline))
        if not 0 <= size <= self.MAX_MESSAGE_BYTES:
            self._protocol_broken(f"a message of {size} bytes")
        return self._read_exact(size, deadline)

    def recv(self, timeout: float) -> Any:
        self._wait(timeout)
        return self._ended(self._io(lambda: pickle.loads(self._recv_frame())))  # noqa: S301 - as Connection.recv

    def recv_bytes(self, timeout: float) -> bytes:
        self._wait(timeout)
        data = self._io(self._recv_frame)
        if data[:1] not in (b"S", b"E"):  # a packet (transfer.pack_shared / pack_error), or a plain message
            try:
                message = pickle.loads(data)  # noqa: S301 - as Connection.recv would
            except Exception:  # noqa: BLE001
                message = None
            self._ended(message)
            self._protocol_broken("sent bytes that are not a packet")
        return data

    def send(self, message: Any) -> None:
        self._io(self.conn.send, message)

    def send_bytes(self, data: bytes) -> None:
        self._io(self.conn.send_bytes, data)

    def close(self, grace_s: float = 10.0) -> None:
        """Ask the child to finish, read its exit report (:attr:`exit_report`), then kill its whole process group and
        its descendants if it has not finished."""
        if not self.conn.closed:
            if self.process.is_alive():
                try:
                    # an idle child reads the role, a candidate process the op
                    self.conn.send({**AssignRole("exit").to_wire(), **Exit().to_wire()})
                except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
                    pass
            self._read_exit_report(grace_s)
            self.process.join(grace_s)
        self.kill()

    def _read_exit_report(self, timeout: float) -> None:
        """Read messages until the exit report, the end of the connection or ``timeout``."""
        deadline = time.monotonic() + timeout
        while self.exit_report is None:
            try:
                if not self.conn.poll(max(0.0, deadline - time.monotonic())):
                    return
                message = pickle.loads(self._recv_frame())  # noqa: S301 - as Connection.recv
            except Exception:  # noqa: BLE001 - closed, broken or garbled: nothing more to read
                return
            self.exit_report = ExitReport.of(message)

    def kill(self) -> None:
        """Kill the child's process group and close the connection. Safe to call again and from several threads at
        once: a build queue's ``close()`` and the build's own thread can both kill one build process, and two
        unguarded ``Connection.close()`` calls close one file descriptor twice (EBADF, or worse, a descriptor number
        reused meanwhile by another pipe)."""
        with self._kill_lock:
            process = self.process
            pid = process.pid
            if pid is not None and process.is_alive() and not self.conn.closed:
                # first its own watch (containment.ParentWatch): the connection closed, it kills and reaps its
                # descendants and exits; killed from here, the processes it started would be left to PID 1 to reap
                self.conn.close()
                process.join(self.KILL_GRACE_S)
            if pid is not None and process.is_alive():
                # its group stopped at once (no fork outruns one killpg), then descendants outside the group (a new
                # session) found through its process tree, which stays whole while it lives: it is their subreaper
                containment.freeze_group(pid)
                group = containment.cgroup_of(pid)
                if group and os.path.isdir(group):  # its pids cgroup holds every descendant, whatever its session
                    self.killed_descendants += containment.kill_cgroup(group, keep=pid)
                self.killed_descendants += containment.kill_descendants(pid)
            if pid is not None:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError, OSError):
                    pass
            if process.is_alive():
                process.kill()
            process.join(10)
            if not self.conn.closed:
                self.conn.close()
            if pid is not None and not isinstance(process, containment.EndedProcess):
                containment.remove_tmpdir(pid)
                containment.remove_shared_memory(pid)
                containment.remove_pids_cgroup(pid)
                exitcode = process.exitcode
                try:
                    process.close()  # releases its descriptors (the sentinel pipe)
                except ValueError:  # still running (stuck in the kernel): kept, killed again at shutdown
                    return
                self.process = containment.EndedProcess(pid, exitcode)

    @property
    def escaped_processes(self) -> int:
        """Processes the child's candidate left running that were killed: by the child at its end, or by
        :meth:`kill`."""
        reported = self.exit_report.escaped_processes if self.exit_report is not None else 0
        return reported + self.killed_descendants


class ChildPool:
    """Hands out idle children, keeping ``spare`` of them started ahead (``True``: one) so the next candidate or
    reference skips the process start and, on a GPU, the CUDA context's creation."""

    def __init__(self, spare: bool | int = True, warm_device: str | None = None):
        self.spare = int(spare)
        self.warm_device = warm_device
        self._spares: list[Child] = []
        self._all: list[Child] = []
        self._lock = threading.RLock()  # threads of a batch with several problems in flight share the pool
        self._closed = False

    #: attempts to start a child that dies before reporting idle (e.g. CUDA out of memory while creating its context,
    #: when other processes fill the GPU), with these pauses (s) between them
    START_RETRY_PAUSES_S = (2.0, 10.0)

    def get(self) -> Child:
        """An idle child. A child that dies while starting is replaced (:data:`START_RETRY_PAUSES_S`); raises
        :class:`WorkerStartError` when every attempt died, naming the last exit status; :class:`ChildDied` once the
        pool is shut down. Safe from several threads: a child is waited for (its start, its CUDA context) outside
        the pool's lock, so threads' children start side by side."""
        with self._lock:
            # children closed since the last call are forgotten: a batch holds descriptors only for live children
            self._all = [c for c in self._all if not isinstance(c.process, containment.EndedProcess)]
            child = self._spares.pop(0) if self._spares else self._start()
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
                with self._lock:
                    child = self._start()
        with self._lock:
            while len(self._spares) < self.spare and not self._closed:
                self._spares.append(self._start())
        return child

    def _start(self) -> Child:
        """A new child, known to :meth:`shutdown` from its start (call with the lock held)."""
        if self._closed:
            raise ChildDied(None, "the batch is stopping: no new worker process")
        child = Child(self.warm_device)
        self._all.append(child)
        return child

    def shutdown(self) -> None:
        """Kill every child handed out or spare; :meth:`get` refuses from now on."""
        with self._lock:
            self._closed = True
            children, self._all = list(self._all), []
            self._spares = []
        for child in children:
            if child.process.is_alive() or child.process.exitcode is None:
                child.kill()


def label(identifier: str) -> str:
    """An id usable inside a pseudo file name: Python's messages keep only what follows the last ``/``."""
    return identifier.replace("/", ":")


def child_env(candidate: Candidate | None, cfg: EvalConfig, device: str, max_jobs: int | None = None) -> dict:
    """The environment of a child's role: one Inductor compile thread; for a candidate, its own extensions folder
    (``kbstudy.harness.build_cache``: per source, torch, CUDA and build environment), the shared Triton cache and, for Triton on a CPU, the interpreter; for a build, ninja's
    parallelism (``max_jobs``)."""
    env: dict[str, str | None] = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
    cache = Path(cfg.cache_dir).resolve()
    if candidate is not None:
        env["TORCH_EXTENSIONS_DIR"] = str(extensions_dir(cache, candidate.sha256))
        env["TRITON_CACHE_DIR"] = str(cache / "triton")
        if candidate.backend == "triton" and not device.startswith("cuda"):
            env["TRITON_INTERPRET"] = "1"
    if max_jobs:
        env["MAX_JOBS"] = str(max_jobs)
    return env
