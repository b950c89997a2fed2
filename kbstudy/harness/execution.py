"""What the isolated processes share: seeding, precision casts, loading a source as a module, classifying failures,
and passing tensors between processes without copies.

Used by ``reference.py`` (the reference process) and ``worker.py`` (the candidate process); the orchestrating process
(``evaluate.py``) never imports a problem or candidate source and never opens a tensor: it forwards pickled bytes.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import linecache
import os
import random
import sys
import types
from pathlib import Path
from typing import Any, Iterator

PRECISIONS = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def torch_dtype(precision: str):
    """The torch dtype of a precision name (``fp32``, ``fp16``, ``bf16``). Raises ``ValueError`` otherwise."""
    import torch

    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {sorted(PRECISIONS)}")
    return getattr(torch, PRECISIONS[precision])


def set_seed(seed: int) -> None:
    """Seed torch's CPU and CUDA generators and Python's ``random`` (KernelBench's ``set_seed`` seeds torch only; the
    extra ``random`` seed changes nothing for problems that do not use it)."""
    import torch

    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)
    random.seed(seed)


def kernelbench_trial_seeds(n: int, seed: int = 42) -> list[int]:
    """KernelBench's correctness-trial seeds: ``torch.manual_seed(seed)`` then ``n`` draws of
    ``torch.randint(0, 2**32 - 1, (1,))`` (``run_and_check_correctness`` in ``src/kernelbench/eval.py``)."""
    import torch

    gen_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        return [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(n)]
    finally:
        torch.random.set_rng_state(gen_state)


def cast_input(x: Any, device: str, dtype) -> Any:
    """Move a tensor to ``device``; cast it to ``dtype`` only if it is floating point.

    KernelBench's ``_process_input_tensor`` casts every tensor, integer targets included, which breaks level1/95
    (KernelBench issue #151); kbstudy keeps integer and bool tensors as they are. Non-tensors pass through.
    """
    import torch

    if isinstance(x, torch.Tensor):
        x = x.to(device=device)
        if x.is_floating_point():
            x = x.to(dtype=dtype)
    return x


def load_module(source: str, name: str, filename: str) -> types.ModuleType:
    """Execute ``source`` as a fresh module registered as ``sys.modules[name]`` (so dataclasses, pickling and
    ``inspect`` work), with ``filename`` in its tracebacks. Raises whatever executing the source raises."""
    spec = importlib.util.spec_from_loader(name, loader=None, origin=filename)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = filename
    sys.modules[name] = module
    # Triton's @jit reads its function's source through inspect.getsourcelines and refuses ("@jit functions should be
    # defined in a Python file") when it finds none; an mtime of None keeps linecache.checkcache from evicting it.
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    code = compile(source, filename, "exec")
    exec(code, module.__dict__)  # noqa: S102 - running candidate code is this process's job
    return module


#: the file, in a candidate's ``TORCH_EXTENSIONS_DIR``, that :func:`extensions_lock` locks
EXTENSIONS_LOCK_FILE = ".kbstudy-load.lock"


@contextlib.contextmanager
def extensions_lock(root: str | os.PathLike | None = None) -> Iterator[list[Path]]:
    """Hold an exclusive lock on a candidate's extensions folder, and remove the build locks no live build holds.

    ``torch.utils.cpp_extension`` guards each extension's build folder with a lock *file* (``<root>/<name>/lock``, a
    ``torch.utils.file_baton.FileBaton``); a process that finds one polls until it disappears, with no timeout. A
    build killed mid-way (a batch stopped at its deadline, a device call that ended) leaves it behind, and every
    later load of that candidate then waits out kbstudy's load timeout (900 s by default) and fails. On the H200, one
    left by a phase stopped at the end of a device call stalled the same phase in the next two calls (session 8).

    Every kbstudy process that loads a candidate (the build process and the worker, ``kbstudy.harness.child.worker``) does so
    inside this lock, an ``fcntl.flock`` that the kernel releases when its holder dies, and ``root`` is the
    candidate's own folder (``kbstudy.harness.orchestrator`` sets ``TORCH_EXTENSIONS_DIR`` per source SHA-256). So a build lock
    found while holding it belongs to no live build, and is removed. Loads of the same candidate by two processes
    (two batches sharing a build cache) take turns; other candidates are not held up.

    Args:
        root: the extensions folder; default ``$TORCH_EXTENSIONS_DIR``. With neither, nothing is locked or removed
            (torch's default folder is shared with builds that are not kbstudy's).

    Yields the build-lock paths removed (empty when none was left). Raises nothing of its own: where the folder
    cannot be created, locked or listed (a file system without ``flock``), the load goes on as torch alone would.

    Limit: a candidate that compiles later than its module's import (in ``__init__`` or ``forward``) builds outside
    this lock, and a second process loading the same candidate at that moment would take its live lock file for a
    stale one and build into the same folder. None of the level-1 leaderboard kernels does (each calls ``load_inline``
    at module level); the script that runs two batches at once (``scripts/h200_leaderboard.sh`` on two GPUs) runs
    one phase per GPU, and two phases share a candidate only across versions or precisions of one chunk.
    """
    root = root if root is not None else os.environ.get("TORCH_EXTENSIONS_DIR")
    handle = None
    if root:
        folder = Path(root)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            handle = open(folder / EXTENSIONS_LOCK_FILE, "a")
            fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError:  # a file system without flock (or read-only): load as torch alone would, nothing removed
            if handle is not None:
                handle.close()
            handle = None
    if handle is None:
        yield []
        return
    try:
        try:
            stale = sorted(p for p in folder.glob("*/lock") if p.is_file())
            for path in stale:
                path.unlink(missing_ok=True)
        except OSError:  # not ours to fix: torch reports what it cannot read or write
            stale = []
        yield stale
    finally:
        handle.close()  # closing the descriptor releases the flock


def flatten_outputs(out: Any) -> list:
    """A model's output as a flat list: a tensor becomes ``[tensor]``; tuples and lists are flattened one level."""
    if isinstance(out, (tuple, list)):
        return list(out)
    return [out]


# ------------------------------------------------------------------------------------------------ failure classes

_CUDA_ERROR_MARKERS = (
    "cuda error", "illegal memory access", "illegal address", "unspecified launch failure", "device-side assert",
    "misaligned address", "cudaerror", "cublas_status", "cudnn_status", "an illegal instruction",
    "launch timed out", "cuda driver error", "no kernel image is available", "accelerator error",
)


def classify_exception(exc: BaseException, stage: str) -> str:
    """The outcome category of an exception raised at ``stage`` (``"load"``, ``"construct"``, ``"run"``).

    Out-of-memory (``torch.OutOfMemoryError`` or an "out of memory" message) -> ``out_of_memory``; a CUDA error
    message -> ``cuda_error``; any exception while loading the source (syntax error, nvcc failure, missing
    ``ModelNew``) -> ``compile_error``; anything else -> ``runtime_error``.
    """
    import torch

    text = f"{type(exc).__name__}: {exc}".lower()
    if isinstance(exc, getattr(torch, "OutOfMemoryError", ())) or "out of memory" in text:
        return "out_of_memory"
    if any(marker in text for marker in _CUDA_ERROR_MARKERS) or type(exc).__name__ == "AcceleratorError":
        return "cuda_error"
    if stage == "load":
        return "compile_error"
    return "runtime_error"


def error_text(exc: BaseException, limit: int = 4000) -> str:
    """``Type: message`` of an exception, truncated to ``limit`` characters (nvcc logs can be megabytes; the tail
    holds the error, so the tail is kept)."""
    text = f"{type(exc).__name__}: {exc}"
    if len(text) > limit:
        text = text[: limit // 4] + "\n...[truncated]...\n" + text[-(3 * limit) // 4:]
    return text


# ------------------------------------------------------------------------------------------- tensors between processes


def use_shared_file_system() -> None:
    """Share CPU tensors through named shared-memory files, so their pickled form can be forwarded by a third process
    (the orchestrator) without being opened. CUDA tensors travel as CUDA IPC handles either way."""
    import torch.multiprocessing as tmp

    tmp.set_sharing_strategy("file_system")


def share(obj: Any) -> bytes:
    """Pickle ``obj`` with torch's multiprocessing reductions: tensors travel by handle (CUDA IPC or a shared-memory
    file), not by value. The sender must keep the tensors alive until the receiver is done with them."""
    import torch.multiprocessing  # noqa: F401 - registers the tensor reductions with ForkingPickler
    from multiprocessing.reduction import ForkingPickler

    return bytes(ForkingPickler.dumps(obj, protocol=5))


def unshare(data: bytes) -> Any:
    """Inverse of :func:`share` (opens the handles)."""
    import pickle

    import torch.multiprocessing  # noqa: F401

    return pickle.loads(data)  # noqa: S301 - bytes come from our own processes


def pack_shared(obj: Any) -> bytes:
    """``share(obj)`` tagged as a payload (``b"S"``), so a forwarding process can tell it from an error without
    opening it."""
    return b"S" + share(obj)


def pack_error(error: dict) -> bytes:
    """A plain pickled error dict tagged ``b"E"`` (see :func:`pack_shared`)."""
    import pickle

    return b"E" + pickle.dumps(error)


def unpack(data: bytes) -> tuple[dict | None, bytes]:
    """``(error, b"")`` for an error packet; ``(None, shared_payload)`` for a payload, still unopened."""
    import pickle

    if data[:1] == b"E":
        return pickle.loads(data[1:]), b""  # noqa: S301 - a plain dict from our own process
    if data[:1] == b"S":
        return None, data[1:]
    raise ValueError("not a kbstudy packet")
