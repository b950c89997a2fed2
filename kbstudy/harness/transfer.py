"""Tensors between processes without copies: the reference process shares a trial's inputs, the orchestrator forwards
their pickled bytes unopened, the candidate process opens them; outputs travel back the same way. A *packet* is a
payload tagged ``b"S"`` (shared, opened only by the receiver) or an error dict tagged ``b"E"``.
"""

from __future__ import annotations

import pickle
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch.multiprocessing as tmp


def use_shared_file_system() -> None:
    """Share CPU tensors through named shared-memory files, so their pickled form can be forwarded by a third process
    (the orchestrator) without being opened. CUDA tensors travel as CUDA IPC handles either way."""
    tmp.set_sharing_strategy("file_system")


def share(obj: Any) -> bytes:
    """Pickle ``obj`` with torch's multiprocessing reductions: tensors travel by handle (CUDA IPC or a shared-memory
    file), not by value. The sender must keep the tensors alive until the receiver is done with them."""
    import torch.multiprocessing  # noqa: F401 - registers the tensor reductions with ForkingPickler

    return bytes(ForkingPickler.dumps(obj, protocol=5))


def unshare(data: bytes) -> Any:
    """Inverse of :func:`share` (opens the handles)."""
    import torch.multiprocessing  # noqa: F401

    return pickle.loads(data)  # noqa: S301 - bytes come from our own processes


def pack_shared(obj: Any) -> bytes:
    """``share(obj)`` tagged as a payload (``b"S"``), so a forwarding process can tell it from an error without
    opening it."""
    return b"S" + share(obj)


def pack_error(error: dict) -> bytes:
    """A plain pickled error dict tagged ``b"E"`` (see :func:`pack_shared`)."""
    return b"E" + pickle.dumps(error)


def unpack(data: bytes) -> tuple[dict | None, bytes]:
    """``(error, b"")`` for an error packet; ``(None, shared_payload)`` for a payload, still unopened."""
    if data[:1] == b"E":
        return pickle.loads(data[1:]), b""  # noqa: S301 - a plain dict from our own process
    if data[:1] == b"S":
        return None, data[1:]
    raise ValueError("not a kbstudy packet")
