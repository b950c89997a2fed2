"""The build role: load (and so compile) a CUDA candidate's source with no GPU work, to fill the build cache in
parallel with the evaluation of earlier problems (``kbstudy.harness.builds.BuildQueue`` on the parent side).

:func:`load_candidate` is the one way a candidate's source is run, here and in the candidate process.
"""

from __future__ import annotations

import os
import sys
import time

from kbstudy.harness.failures import classify_exception, error_text
from kbstudy.harness.loading import extensions_lock, load_module
from kbstudy.harness.protocol import BuildJob, BuildResult, CandidateJob

#: niceness of a CUDA build process (0 normal, 19 lowest): builds share the machine with timed processes
BUILD_NICENESS = 10


def load_candidate(job: CandidateJob | BuildJob):
    """``(module, stale build locks removed)``: the candidate's source run as module ``kbstudy_candidate``, inside
    ``loading.extensions_lock`` (a build killed earlier may have left torch's lock file, which would be waited on
    until the load timeout). Raises what the source raises."""
    with extensions_lock() as stale:
        module = load_module(job.source, "kbstudy_candidate", job.filename)
    return module, stale


def serve(conn, job: BuildJob) -> None:
    """Build one candidate and send a :class:`~kbstudy.harness.protocol.BuildResult`.

    Runs at a lower CPU priority (``BUILD_NICENESS``, inherited by nvcc and ninja): builds overlap the timing of
    earlier problems, whose processes must keep the CPUs first."""
    try:
        os.nice(BUILD_NICENESS)
    except OSError:  # not permitted here: build at normal priority
        pass

    started = time.perf_counter()
    try:
        module, stale = load_candidate(job)
        if stale:
            print(f"kbstudy: removed {len(stale)} stale extension build lock(s): {', '.join(map(str, stale))}",
                  file=sys.stderr)
        ok = hasattr(module, "ModelNew")
        result = BuildResult(ok, None if ok else "source defines no ModelNew", time.perf_counter() - started)
    except BaseException as exc:  # noqa: BLE001
        result = BuildResult(False, error_text(exc), time.perf_counter() - started, classify_exception(exc, "load"))
    conn.send(result.to_wire())
