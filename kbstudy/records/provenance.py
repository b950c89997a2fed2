"""Provenance stamped on every record: code version, library versions and the hardware that produced a number."""

from __future__ import annotations

import datetime as _dt
import functools
import os
import platform
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]  # kbstudy/records/provenance.py -> the checkout


@functools.lru_cache(maxsize=1)
def git_commit() -> str:
    """The repository's HEAD commit (40 hex digits), with ``+dirty`` when the tree has changes; ``"unknown"`` outside git.

    ``KBSTUDY_GIT_COMMIT`` overrides it: the GPU machine receives a copy of the working tree without ``.git``, so the
    batch script passes the commit in."""
    if os.environ.get("KBSTUDY_GIT_COMMIT"):
        return os.environ["KBSTUDY_GIT_COMMIT"]
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return "unknown"
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
        )
        return sha.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def cpu_name() -> str:
    """The CPU model name from ``/proc/cpuinfo`` (Linux), else ``platform.processor()``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def library_versions() -> dict[str, str | None]:
    """Versions of python, torch, triton and the CUDA runtime torch was built with (``None`` where absent)."""
    import torch  # on first use: the analyses import the records layer without torch

    try:
        import triton  # noqa: PLC0415 - optional: absent on CPU machines without the triton extra

        triton_version = triton.__version__
    except Exception:  # triton is optional on CPU machines
        triton_version = None
    return {
        "python_version": platform.python_version(),
        "torch_version": torch.__version__,
        "triton_version": triton_version,
        "cuda_version": torch.version.cuda,
    }


def hardware_name(device: str) -> str:
    """``torch.cuda.get_device_name`` for a CUDA device (initialises CUDA), else the CPU model name."""
    if device.startswith("cuda"):
        import torch  # on first use: the analyses import the records layer without torch

        return torch.cuda.get_device_name(torch.device(device))
    return cpu_name()


def collect(device: str) -> dict[str, str | None]:
    """All provenance fields for one record: git commit, versions, hardware, host and UTC time (ISO 8601)."""
    return {
        "git_commit": git_commit(),
        "kbstudy_version": __import__("kbstudy").__version__,
        **library_versions(),
        "hardware": hardware_name(device),
        "hostname": platform.node(),
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
