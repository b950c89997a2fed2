"""The build cache's key: where a CUDA candidate's extension is built and found again, across batches.

One folder per key under ``<cache_dir>/torch_extensions/``. The key hashes what decides the binary: the candidate's
source (its own compiler flags and ``load_inline`` arguments are in it), torch's version (its headers and ABI), the CUDA
version torch was built with, and the environment variables that change how ``torch.utils.cpp_extension`` compiles
(the target architectures, the compilers and their extra flags). A change to any of them builds afresh in a new
folder instead of loading a stale extension; an unchanged one is a cache hit in a later batch (``--cache-dir`` is kept
between runs), which skips nvcc entirely.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch

#: environment variables read by ``torch.utils.cpp_extension`` that change the binary it builds
BUILD_ENV = ("TORCH_CUDA_ARCH_LIST", "CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "NVCC_APPEND_FLAGS",
             "NVCC_PREPEND_FLAGS", "CUDA_HOME", "TORCH_DONT_CHECK_COMPILER_ABI")


def build_key(source_sha256: str, env: dict | None = None) -> str:
    """The build cache key (20 hex digits) of a source with this torch, CUDA and build environment (``env``,
    default ``os.environ``)."""
    env = os.environ if env is None else env
    parts = [source_sha256, f"torch={torch.__version__}", f"cuda={torch.version.cuda}",
             *(f"{name}={env.get(name, '')}" for name in BUILD_ENV)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def extensions_dir(cache_dir: str | os.PathLike, source_sha256: str) -> Path:
    """The folder a candidate's extensions are built in (``TORCH_EXTENSIONS_DIR`` of its build and its process)."""
    return Path(cache_dir).resolve() / "torch_extensions" / build_key(source_sha256)
