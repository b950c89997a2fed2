"""The entry point of every child process, and the dispatch to its role.

Children are forked from a ``forkserver`` that has imported torch (and no CUDA) (``kbstudy.harness.pool``); each
starts *idle*, in a process group of its own, and takes the role its first message gives: a candidate
(``child/candidate.py``), a build (``child/build.py``) or a problem's reference (``child/reference.py``). Every
candidate is loaded, built and run in a process of its own, started fresh for it; the orchestrator never executes
candidate code. A process dies with its candidate: a segfault, an abort, a hang or a broken CUDA context ends that one
process, is recorded as the candidate's outcome, and the next candidate gets a fresh process.

Every child is also contained (``kbstudy.harness.containment``): the subreaper of what it starts, its stdout and
stderr captured (``kbstudy.harness.capture``), its connection watched so it ends when the orchestrator does; a worker
gets a private temporary folder, file-size and process limits and a pids cgroup of its own. Whatever ends its role,
it kills what was left running and reports that and its output (:class:`~kbstudy.harness.protocol.ExitReport`).

The child side never imports the parent side (orchestrator, pool, builds, record assembly); what both sides share
lives in neutral modules (``protocol``, ``transfer``, ``tensors``, ``loading``, ``failures``, ``containment``,
``capture``).
"""

from __future__ import annotations

import os
from multiprocessing import forkserver, resource_tracker

import torch

from kbstudy.harness import capture, containment, transfer
from kbstudy.harness.child import build, reference
from kbstudy.harness.child.candidate import CandidateWorker
from kbstudy.harness.protocol import AssignRole, ExitReport, Idle


def _apply_env(env: dict) -> None:
    for key, value in (env or {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = str(value)


def process_main(conn, warm_device: str | None = None) -> None:
    """Entry point of every child process: become a process-group leader and the subreaper of what it starts, send
    its stdout and stderr into a bounded capture (``kbstudy.harness.capture``), watch the connection to the
    orchestrator (``kbstudy.harness.containment.ParentWatch``: the child ends when the orchestrator does), optionally
    create the CUDA context ahead (``warm_device``: context creation costs seconds, and a spare process can pay it
    while the previous candidate runs), report :class:`~kbstudy.harness.protocol.Idle`, then take the role the first
    message gives (``worker``, ``build`` or ``reference``, :class:`~kbstudy.harness.protocol.AssignRole`). A worker
    gets a temporary folder of its own and file-size and process limits (:func:`_contain_worker`). Whatever ends the
    role, :func:`_end_child` kills the processes left behind and reports them and the captured output before the
    process exits."""
    try:
        os.setpgrp()  # the orchestrator kills the whole group (nvcc, ninja, compile workers) on a timeout
    except OSError:
        pass
    containment.become_subreaper()
    output = capture.start()
    watch = containment.start_watch(conn)
    transfer.use_shared_file_system()
    if warm_device and warm_device.startswith("cuda"):
        torch.zeros(1, device=warm_device)  # creates the context; the first real allocation is then cheap
    conn.send(Idle(pid=os.getpid()).to_wire())
    try:
        message = AssignRole.from_wire(conn.recv())
        if message.role == "exit":
            return
        _apply_env(message.env)
        if message.role == "worker":
            _contain_worker()
            CandidateWorker(conn, message.job).serve()
        elif message.role == "build":
            build.serve(conn, message.job)
        elif message.role == "reference":
            reference.serve(conn, message.job)
    finally:
        _end_child(conn, watch, output)


def _contain_worker() -> None:
    """What a candidate's worker gets before the candidate is loaded: a temporary folder of its own, bounded file
    sizes and process count, and no descriptors of the fork server's or resource tracker's (a candidate writing
    to every inherited descriptor would otherwise stop the fork server every other child comes from)."""
    containment.private_tmpdir()
    containment.limit_resources()
    containment.join_pids_cgroup()
    try:
        for owner, name in ((forkserver._forkserver, "_forkserver_alive_fd"),
                            (resource_tracker._resource_tracker, "_fd")):
            fd = getattr(owner, name, None)
            if isinstance(fd, int) and fd > 2:
                os.close(fd)
                setattr(owner, name, None)
    except (AttributeError, OSError):  # another Python's multiprocessing: keep them
        pass


def _end_child(conn, watch, output) -> None:
    """The end of every child process: kill the processes it (its candidate) left running, collect the captured
    output, remove its temporary folder, send its :class:`~kbstudy.harness.protocol.ExitReport` (read by
    ``Child.close`` in the orchestrator) and exit without interpreter teardown (extension modules and CUDA contexts
    of broken candidates can hang or crash at exit, and nothing is left to save)."""
    try:
        escaped = containment.kill_descendants()
        containment.reap_children()
        captured = output.finish() if output is not None else None
        containment.remove_tmpdir(os.getpid())
        containment.remove_shared_memory(os.getpid())
        containment.leave_pids_cgroup()
        if watch is not None:
            watch.stop()
        try:
            conn.send(ExitReport(escaped, captured).to_wire())
        except Exception:  # noqa: BLE001 - the orchestrator is gone or the candidate closed the connection
            pass
        conn.close()
    finally:
        os._exit(0)
