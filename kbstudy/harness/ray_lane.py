"""The worker side of an evaluation spread over a Ray cluster (the driver is :mod:`kbstudy.pipeline.ray_batch`).

A :class:`Lane` is one GPU of the cluster (a Ray actor holding ``num_gpus=1``; Ray sets its ``CUDA_VISIBLE_DEVICES``).
It evaluates one problem at a time through the unchanged batch loop,
:func:`kbstudy.harness.orchestrator.evaluate_batch`, so each lane keeps today's isolation: a reference process that
never loads a candidate, a fresh process per candidate, timing alone on its GPU.

One writer: a lane writes no record where the driver keeps them. It runs the batch loop on a throwaway
:class:`~kbstudy.records.store.RecordStore` in a temporary folder, seeded with the driver's records of that problem
(so resume, the same-code copies and ``retry_outcomes`` behave exactly as in one process), and returns the JSON lines
the loop appended; the driver alone appends them to the records folder.

This module imports nothing of Ray: the driver wraps :class:`Lane` and :func:`build_candidate` with ``ray.remote``.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

from kbstudy.harness.builds import BuildQueue
from kbstudy.harness.candidates import Candidate
from kbstudy.harness.config import EvalConfig, hardware_label, resolve_device
from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.harness.pool import start_forkserver
from kbstudy.harness.problems import Problem
from kbstudy.records.store import RecordStore


def _lines(path: Path) -> list[str]:
    """The non-empty lines of a JSONL file (none if it does not exist)."""
    if not path.exists():
        return []
    return [line for line in path.read_text().splitlines() if line.strip()]


def gpu_arch(index: str = "0") -> str | None:
    """The compute capability of the visible GPU ``index`` (``"9.0"``), from ``nvidia-smi`` so no CUDA context is
    opened; ``None`` without one. Builds elsewhere (a CPU task) use it as ``TORCH_CUDA_ARCH_LIST``."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:  # nvidia-smi numbers GPUs physically; CUDA_VISIBLE_DEVICES renumbers them
        index = visible.split(",")[int(index)] if int(index) < len(visible.split(",")) else index
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader", f"--id={index}"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout.strip().splitlines()
    return text[0].strip() if out.returncode == 0 and text else None


class Lane:
    """One evaluation lane: the batch loop for one problem at a time, on this worker's device."""

    def __init__(self, cfg: EvalConfig):
        self.cfg = cfg
        self.device = resolve_device(cfg.device)
        self.hardware = hardware_label(self.device)
        self.arch = gpu_arch() if self.device.startswith("cuda") else None

    def describe(self) -> dict:
        """Where this lane runs: its device, hardware label (part of every record key), GPU architecture, host, pid."""
        return {"device": self.device, "hardware": self.hardware, "arch": self.arch, "hostname": platform.node(),
                "pid": os.getpid(), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}

    def evaluate(self, problem: Problem, candidates: list[Candidate], evaluation_lines: list[str],
                 reference_lines: list[str], *builds) -> dict:
        """Evaluate ``candidates`` on ``problem``; ``evaluation_lines`` and ``reference_lines`` are the driver's records
        of this problem (JSON lines). ``builds``: the results of the candidates' build tasks (Ray waits for them before
        calling; the builds sit in the shared cache). Returns the new lines (``evaluations``, ``references``), the
        batch summary's counts and the wall seconds."""
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="kbstudy-lane-") as tmp:
            store = RecordStore(tmp)
            for path, lines in ((store.evaluations_path, evaluation_lines), (store.references_path, reference_lines)):
                if lines:
                    path.write_text("".join(line + "\n" for line in lines))
            summary = evaluate_batch([problem], candidates, store, self.cfg)
            new_evaluations = _lines(store.evaluations_path)[len(evaluation_lines):]
            new_references = _lines(store.references_path)[len(reference_lines):]
        return {"evaluations": new_evaluations, "references": new_references, "written": summary.written,
                "already_done": summary.already_done, "outcomes": dict(summary.outcomes),
                "seconds": time.perf_counter() - started, "pid": os.getpid()}


def build_candidate(candidate: Candidate, cfg: EvalConfig) -> dict:
    """Build one CUDA candidate into the build cache (``<cache_dir>/torch_extensions/<sha>``) in a build process of
    its own, as :class:`~kbstudy.harness.builds.BuildQueue` does in one process; returns its ``BuildResult`` (wire
    form). A failed build is a result, not an exception: the lane's worker loads the source again and records the
    error."""
    start_forkserver("cuda")
    queue = BuildQueue([candidate], dataclasses.replace(cfg, build_jobs=1), "cuda")
    try:
        queue.wait([candidate])
        return queue.results.get(candidate.sha256, {})
    finally:
        queue.close()
