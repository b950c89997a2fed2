"""The entry point of every child process, and the dispatch to its role.

Children are forked from a ``forkserver`` that has imported torch (and no CUDA) (``kbstudy.harness.pool``); each
starts *idle*, in a process group of its own, and takes the role its first message gives: a candidate
(``child/candidate.py``), a build (``child/build.py``) or a problem's reference (``child/reference.py``). Every
candidate is loaded, built and run in a process of its own, started fresh for it; the orchestrator never executes
candidate code. A process dies with its candidate: a segfault, an abort, a hang or a broken CUDA context ends that one
process, is recorded as the candidate's outcome, and the next candidate gets a fresh process.

The child side never imports the parent side (orchestrator, pool, builds, record assembly); what both sides share
lives in neutral modules (``protocol``, ``transfer``, ``tensors``, ``loading``, ``failures``).
"""

from __future__ import annotations

import os
import sys

import torch

from kbstudy.harness import transfer
from kbstudy.harness.child import build, reference
from kbstudy.harness.child.candidate import CandidateWorker
from kbstudy.harness.protocol import AssignRole, Idle


def _apply_env(env: dict) -> None:
    for key, value in (env or {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = str(value)


def process_main(conn, warm_device: str | None = None) -> None:
    """Entry point of every child process: become a process-group leader, optionally create the CUDA context ahead
    (``warm_device``: context creation costs seconds, and a spare process can pay it while the previous candidate
    runs), report :class:`~kbstudy.harness.protocol.Idle`, then take the role the first message gives (``worker``,
    ``build`` or ``reference``, :class:`~kbstudy.harness.protocol.AssignRole`)."""
    try:
        os.setpgrp()  # the orchestrator kills the whole group (nvcc, ninja, compile workers) on a timeout
    except OSError:
        pass
    transfer.use_shared_file_system()
    if warm_device and warm_device.startswith("cuda"):
        torch.zeros(1, device=warm_device)  # creates the context; the first real allocation is then cheap
    conn.send(Idle(pid=os.getpid()).to_wire())
    message = AssignRole.from_wire(conn.recv())
    if message.role == "exit":
        return
    _apply_env(message.env)
    try:
        if message.role == "worker":
            CandidateWorker(conn, message.job).serve()
        elif message.role == "build":
            build.serve(conn, message.job)
        elif message.role == "reference":
            reference.serve(conn, message.job)
    finally:
        try:
            conn.close()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            # skip interpreter teardown: extension modules and CUDA contexts of broken candidates can hang or crash
            # at exit, and nothing is left to save
            os._exit(0)
