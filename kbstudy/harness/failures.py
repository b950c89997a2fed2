"""Failure classes: the outcome category of an exception raised in a child process, and its message as recorded."""

from __future__ import annotations

import torch

from kbstudy.records.outcomes import Outcome

_CUDA_ERROR_MARKERS = (
    "cuda error", "illegal memory access", "illegal address", "unspecified launch failure", "device-side assert",
    "misaligned address", "cudaerror", "cublas_status", "cudnn_status", "an illegal instruction",
    "launch timed out", "cuda driver error", "no kernel image is available", "accelerator error",
)

#: messages of a failed allocation, on the device or the host: torch's CUDA and CPU allocators ("DefaultCPUAllocator:
#: can't allocate memory: you tried to allocate N bytes"), ``ENOMEM`` ("Cannot allocate memory"), NumPy ("Unable to
#: allocate")
_OOM_MARKERS = ("out of memory", "can't allocate memory", "cannot allocate memory", "unable to allocate")


def classify_exception(exc: BaseException, stage: str) -> str:
    """The outcome category of an exception raised at ``stage`` (``"load"``, ``"construct"``, ``"run"``).

    Out-of-memory, of the device or the host (``torch.OutOfMemoryError``, ``MemoryError``, or a message of
    :data:`_OOM_MARKERS`, e.g. torch's "DefaultCPUAllocator: can't allocate memory") -> ``out_of_memory``; a CUDA
    error message -> ``cuda_error``; any exception while loading the source (syntax error, nvcc failure, missing
    ``ModelNew``) -> ``compile_error``; anything else -> ``runtime_error``.
    """
    text = f"{type(exc).__name__}: {exc}".lower()
    if isinstance(exc, (MemoryError, getattr(torch, "OutOfMemoryError", MemoryError))) \
            or any(marker in text for marker in _OOM_MARKERS):
        return Outcome.OUT_OF_MEMORY.value
    if any(marker in text for marker in _CUDA_ERROR_MARKERS) or type(exc).__name__ == "AcceleratorError":
        return Outcome.CUDA_ERROR.value
    if stage == "load":
        return Outcome.COMPILE_ERROR.value
    return Outcome.RUNTIME_ERROR.value


def error_text(exc: BaseException, limit: int = 4000) -> str:
    """``Type: message`` of an exception, truncated to ``limit`` characters (nvcc logs can be megabytes; the tail
    holds the error, so the tail is kept)."""
    text = f"{type(exc).__name__}: {exc}"
    if len(text) > limit:
        text = text[: limit // 4] + "\n...[truncated]...\n" + text[-(3 * limit) // 4:]
    return text
