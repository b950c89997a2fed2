"""CUDA candidates' builds, in the background: :class:`BuildQueue` fills the build cache (one extension folder per
source, torch, CUDA and build environment, ``<cache_dir>/torch_extensions/<key>``, ``kbstudy.harness.build_cache``)
while earlier problems are evaluated."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Iterable

from kbstudy.harness.candidates import Candidate
from kbstudy.harness.config import EvalConfig
from kbstudy.harness.pool import Child, ChildDied, ChildTimeout, child_env, label
from kbstudy.harness.protocol import AssignRole, BuildJob, BuildResult


class BuildQueue:
    """CUDA candidates' extensions built in the background, one process each, ``build_jobs`` at a time.

    Builds are submitted in the order given (the batch's problem order), so the first problems' candidates are built
    first and evaluated while later ones still compile: nvcc on a hundred candidates takes minutes of CPU that would
    otherwise leave the GPU idle (7 minutes for 100 level-1 leaderboard kernels on the H200 machine's 32 cores).
    Build processes run at ``os.nice(BUILD_NICENESS)`` so the reference and candidate processes being timed keep the
    CPUs first. :meth:`wait` blocks until the given candidates' builds are done. A failed, timed-out or unstartable
    build is not final (it is a result, never an exception): the worker loads the source again and records the real
    error. ``results`` maps a source SHA-256 to its :class:`~kbstudy.harness.protocol.BuildResult` (wire form).
    """

    def __init__(self, candidates: list[Candidate], cfg: EvalConfig, device: str):
        unique = {c.sha256: c for c in candidates if c.backend == "cuda"}
        jobs = max(1, min(cfg.build_jobs or os.cpu_count() or 1, len(unique) or 1))
        # ninja's parallelism inside one build: at least 2, for load_inline's two compile units (the C++ bindings
        # and the CUDA source), so that the builds past the first ``jobs`` (e.g. 24 candidates on 16 cores) do not
        # leave half the cores idle while each compiles its two units one after the other
        self._max_jobs = max(2, (os.cpu_count() or 1) // jobs)
        self._cfg, self._device = cfg, device
        self._lock = threading.Lock()
        self._children: set[Child] = set()
        self._closed = False
        self.results: dict[str, dict] = {}
        #: ``time.perf_counter()`` at which each source's build ended
        self.finished: dict[str, float] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="kbstudy-build")
        self._futures = {sha: self._pool.submit(self._build_one, cand) for sha, cand in unique.items()}

    def _build_one(self, candidate: Candidate) -> dict:
        with self._lock:
            if self._closed:
                return BuildResult(False, "build queue closed").to_wire()
            try:
                child = Child()
            except Exception as exc:  # noqa: BLE001 - no process (e.g. out of PIDs): the worker builds it later
                result = BuildResult(False, f"build process did not start: {type(exc).__name__}: {exc}").to_wire()
                self.results[candidate.sha256] = result
                return result
            self._children.add(child)
        try:
            child.wait_idle()
            job = BuildJob(candidate.source, f"<candidate {label(candidate.candidate_id)}>")
            child.send(AssignRole("build", child_env(candidate, self._cfg, self._device, self._max_jobs), job).to_wire())
            result = child.recv(self._cfg.load_timeout_s)
        except (ChildDied, ChildTimeout) as exc:
            result = BuildResult(False, str(exc)).to_wire()
        except Exception as exc:  # noqa: BLE001 - e.g. OSError from the pipe: the worker retries the build itself
            result = BuildResult(False, f"build process: {type(exc).__name__}: {exc}").to_wire()
        finally:
            child.kill()
            with self._lock:
                self._children.discard(child)
        self.results[candidate.sha256] = result
        self.finished[candidate.sha256] = time.perf_counter()
        return result

    def wait(self, candidates: Iterable[Candidate]) -> None:
        """Block until every given CUDA candidate's build has finished (successfully or not)."""
        for cand in candidates:
            future = self._futures.get(cand.sha256)
            if future is not None:
                future.result()

    def done(self, candidates: Iterable[Candidate]) -> bool:
        """Whether every given CUDA candidate's build has finished (successfully or not)."""
        return all(self._futures[c.sha256].done() for c in candidates if c.sha256 in self._futures)

    def close(self) -> None:
        """Cancel the builds not started and kill the running ones (an interrupted batch leaves no nvcc behind)."""
        with self._lock:
            self._closed = True
            children = list(self._children)
        self._pool.shutdown(wait=False, cancel_futures=True)
        for child in children:
            child.kill()


def clear_build_cache(cfg: EvalConfig) -> None:
    """Remove the build cache (``<cache_dir>/torch_extensions``)."""
    shutil.rmtree(Path(cfg.cache_dir) / "torch_extensions", ignore_errors=True)
